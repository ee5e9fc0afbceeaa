"""The reference simulator: a MuJoCo boat-push tabletop stepped in policy action chunks.

The names below load on first use, so reading the registered numbers (:mod:`grpo_probe.sim.params`,
which the prereg needs) does not import MuJoCo. Importing this package picks a headless OpenGL backend
for camera frames (:mod:`grpo_probe.sim.gl`) before anything of it can import MuJoCo.
"""

from __future__ import annotations

import importlib
from typing import Any

from grpo_probe.sim.gl import select_headless_gl

select_headless_gl()

__all__ = ["ACTION_DIMS", "OBS_DIM", "BoatPushEnv", "EnvState", "EpisodeRecord", "SimParams", "run_episode"]

_HOMES = {
    "ACTION_DIMS": "grpo_probe.sim.params",
    "SimParams": "grpo_probe.sim.params",
    "OBS_DIM": "grpo_probe.sim.env",
    "BoatPushEnv": "grpo_probe.sim.env",
    "EnvState": "grpo_probe.sim.env",
    "run_episode": "grpo_probe.sim.env",
    "EpisodeRecord": "grpo_probe.sim.record",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
