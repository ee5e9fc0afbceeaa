"""Environments the probe can run: the protocol, the built-in ones and a registry of them.

``boat_push`` is the reference boat scene (:mod:`grpo_probe.envs.boat`), ``pusher`` is Gymnasium's MuJoCo
Pusher-v5, and ``"module:factory"`` is any environment of your own (:mod:`grpo_probe.envs.protocol`;
a Gymnasium one through :mod:`grpo_probe.envs.gym_adapter`). A design names one as ``env: {id, params}``.

The names below load on first use, so reading a design's environment does not import MuJoCo. Importing
this package picks a headless OpenGL backend for camera frames (:mod:`grpo_probe.render_setup`) before any
environment can import MuJoCo: rollout workers are fresh processes, and MuJoCo reads ``MUJOCO_GL`` once.
"""

from __future__ import annotations

from grpo_probe.lazy_exports import lazy_exports
from grpo_probe.render_setup import select_headless_gl

select_headless_gl()

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        ".protocol": ("EnvSpec", "Environment", "Guard"),
        ".registry": (
            "BUILTIN_IDS",
            "EnvConfig",
            "EnvFactoryError",
            "boat_env",
            "env_config",
            "env_provenance",
            "env_spec",
            "make_env",
            "make_expert",
        ),
    },
    globals(),
)
