"""The two planes of known chaos, as the signal-or-chaos tests import them (``from envs import chaos_envs``).

The scenes themselves are the package's (:mod:`grpo_probe.envs.planes`: the smooth plane, whose reward
follows the actions, and the luck plane, whose reward is luck keyed by their exact bytes); this module
re-exports them with the default chunk geometry (3 replans x 4 executed of 8), so a worker process builds
them from the package factory's id (``factory_name(make_luck_plane)`` is
``grpo_probe.envs.planes:make_luck_plane``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grpo_probe.envs.planes import (
    ACTION_DIMS,
    CHUNK_LENGTH,
    EXECUTED_ACTIONS,
    GOAL_XY,
    LUCK_HALF_EXTENT_M,
    OBS_DIM,
    REPLANS,
    SPAWN_HALF_EXTENT_M,
    STEP_M,
    LuckPlane,
    SmoothPlane,
    make_luck_plane,
    make_smooth_plane,
)

__all__ = [
    "ACTION_DIMS",
    "CHUNK_LENGTH",
    "EXECUTED_ACTIONS",
    "GOAL_XY",
    "LUCK_HALF_EXTENT_M",
    "OBS_DIM",
    "REPLANS",
    "SPAWN_HALF_EXTENT_M",
    "STEP_M",
    "LuckPlane",
    "SmoothPlane",
    "factory_name",
    "make_luck_plane",
    "make_smooth_plane",
]


def factory_name(function: Callable[..., Any]) -> str:
    """``module:function`` of a factory, the form a design's ``env.id`` takes."""
    return f"{function.__module__}:{function.__qualname__}"
