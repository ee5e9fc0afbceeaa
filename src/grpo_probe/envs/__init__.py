"""Environments the probe can run: the protocol, the built-in ones and a registry of them.

``boat_push`` is the reference boat scene (:mod:`grpo_probe.envs.boat`), ``pusher`` is Gymnasium's MuJoCo
Pusher-v5, and ``"module:factory"`` is any environment of your own (:mod:`grpo_probe.envs.protocol`;
a Gymnasium one through :mod:`grpo_probe.envs.gym_adapter`). A design names one as ``env: {id, params}``.

The names below load on first use, so reading a design's environment does not import MuJoCo. Importing
this package picks a headless OpenGL backend for camera frames (:mod:`grpo_probe.envs.gl`) before any
environment can import MuJoCo: rollout workers are fresh processes, and MuJoCo reads ``MUJOCO_GL`` once.
"""

from __future__ import annotations

import importlib
from typing import Any

from grpo_probe.envs.gl import select_headless_gl

select_headless_gl()

__all__ = [
    "BUILTIN_IDS",
    "EnvConfig",
    "EnvFactoryError",
    "EnvSpec",
    "Environment",
    "Guard",
    "boat_env",
    "env_config",
    "env_provenance",
    "env_spec",
    "make_env",
    "make_expert",
]

_HOMES = {
    "EnvSpec": "grpo_probe.envs.protocol",
    "Environment": "grpo_probe.envs.protocol",
    "Guard": "grpo_probe.envs.protocol",
    **{
        name: "grpo_probe.envs.registry"
        for name in (
            "BUILTIN_IDS",
            "EnvConfig",
            "EnvFactoryError",
            "boat_env",
            "env_config",
            "env_provenance",
            "env_spec",
            "make_env",
            "make_expert",
        )
    },
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
