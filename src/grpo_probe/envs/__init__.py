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

_WHERE = {
    "EnvSpec": "grpo_probe.envs.protocol",
    "Environment": "grpo_probe.envs.protocol",
    "Guard": "grpo_probe.envs.protocol",
    "BUILTIN_IDS": "grpo_probe.envs.registry",
    "EnvConfig": "grpo_probe.envs.registry",
    "EnvFactoryError": "grpo_probe.envs.registry",
    "boat_env": "grpo_probe.envs.registry",
    "env_config": "grpo_probe.envs.registry",
    "env_provenance": "grpo_probe.envs.registry",
    "env_spec": "grpo_probe.envs.registry",
    "make_env": "grpo_probe.envs.registry",
    "make_expert": "grpo_probe.envs.registry",
}
"""Each exported name and the module it is imported from on first use."""

__getattr__ = lazy_exports(__name__, _WHERE, globals())

__all__ = sorted(_WHERE)
