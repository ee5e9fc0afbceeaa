"""Simulators the adapter cannot read by itself, and scene functions for them, importable by workers.

Why a module: a design names a scene function as ``module:callable`` (``env.params.scene``) and every job
imports it by that name, so the fakes live here rather than inside a test. :class:`PixelPuck` is a
non-MuJoCo simulator in pixel units (as gym-pusht is); :class:`DmControlLike` has a dm_control-style
``physics`` and no MuJoCo model or data (as gym-aloha has).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from grpo_probe.envs.gym_adapter import GymnasiumAdapter, GymnasiumParams
from grpo_probe.envs.scene import ScenePositions

PIXEL_M = 0.001
"""The puck's world is in pixels; a pixel is a millimetre."""
STEP_PX = 8.0
"""Pixels the puck moves per tick at full action."""
GOAL_PX = (200.0, 200.0)
PUCK_ID = "PixelPuck-v0"


def callable_name(obj: Any) -> str:
    """``module:name`` of something defined here, whatever name pytest imported this module under."""
    return f"{obj.__module__}:{obj.__qualname__}"


class PixelPuck(gymnasium.Env):  # type: ignore[type-arg]
    """A puck pushed toward a goal in a 400 x 400 pixel world: no MuJoCo, nothing the adapter can read.

    Observation: the puck's x, y and the goal's x, y in pixels (float64); action: the puck's velocity
    in [-1, 1] per axis, ``STEP_PX`` pixels per tick at full scale.
    """

    metadata = {"render_modes": []}  # noqa: RUF012 - Gymnasium's own convention

    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Box(0.0, 400.0, (4,), np.float64)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.puck = np.zeros(2)
        self.goal = np.array(GOAL_PX)

    def _obs(self) -> np.ndarray:
        return np.concatenate([self.puck, self.goal]).astype(np.float64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.puck = self.np_random.uniform(100.0, 300.0, 2)
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        before = float(np.linalg.norm(self.puck - self.goal))
        self.puck = np.clip(self.puck + STEP_PX * np.clip(action, -1.0, 1.0), 0.0, 400.0)
        after = float(np.linalg.norm(self.puck - self.goal))
        return self._obs(), before - after, False, False, {"moved": bool(np.any(action != 0.0))}


class PuckScene:
    """The scene function of :class:`PixelPuck`: the puck and the goal in metres, a keyed spawn shift, and
    engagement as "the puck moved this tick"."""

    traces_effector = False
    state_perturbation = "the puck's spawn position in the plane"

    def __init__(self, env: gymnasium.Env) -> None:  # type: ignore[type-arg]
        self.sim = env.unwrapped

    def positions(self) -> ScenePositions:
        return ScenePositions(object_xy=self.sim.puck * PIXEL_M, goal_xy=self.sim.goal * PIXEL_M)

    def perturb(self, rng: np.random.Generator, scale: float) -> np.ndarray:
        direction = rng.standard_normal(2)
        self.sim.puck = self.sim.puck + (scale / PIXEL_M) * direction / np.linalg.norm(direction)
        return self.sim._obs()

    def engaged(self, info: dict[str, Any]) -> bool:
        return bool(info["moved"])


class SceneWithoutPositions:
    def __init__(self, env: Any) -> None:
        del env


class TupleScene(PuckScene):
    """Returns a bare tuple instead of :class:`ScenePositions`."""

    def positions(self) -> Any:  # type: ignore[override]
        return (tuple(self.sim.puck * PIXEL_M), tuple(self.sim.goal * PIXEL_M))


class ThreeNumberScene(PuckScene):
    """Returns the object as x, y, z."""

    def positions(self) -> ScenePositions:
        return ScenePositions(object_xy=(*(self.sim.puck * PIXEL_M), 0.0), goal_xy=self.sim.goal * PIXEL_M)


class CountingEngagementScene(PuckScene):
    """Says how many ticks it has seen instead of whether the puck is engaged."""

    def engaged(self, info: dict[str, Any]) -> Any:
        return 1


class SaidEngagementScene(PuckScene):
    """Says what its engagement means, for decision.md."""

    engagement = "the puck was pushed this tick"


class BlankEngagementScene(PuckScene):
    """Says its engagement means nothing."""

    engagement = ""


class CameraWithoutRenderScene(PuckScene):
    """Names a camera but cannot draw it."""

    cameras = ("top",)


class FloatFrameScene(PuckScene):
    """Draws its camera as floats in [0, 1] instead of uint8 RGB."""

    cameras = ("top",)

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        return np.zeros((height, width, 3), dtype=np.float32)


class _Physics:
    """What dm_control's ``Physics`` looks like from outside: ``named``, ``step``, no ``model``/``data``."""

    named = None

    def step(self) -> None:
        pass


class DmControlLike(PixelPuck):
    """The puck, simulated (as far as the adapter can see) by a dm_control ``physics``, held inside a
    task object as gym-aloha holds its ``dm_control`` environment."""

    def __init__(self) -> None:
        super().__init__()

        class _Task:
            physics = _Physics()

        self._env = _Task()


def make_puck(**params: Any) -> GymnasiumAdapter:
    """A design's factory: the pixel puck, bound through ``params['scene']`` (or refused without one)."""
    return GymnasiumAdapter(GymnasiumParams.from_dict({"gym_id": PUCK_ID, **params}), env=PixelPuck())


def make_dm_control_like(**params: Any) -> GymnasiumAdapter:
    return GymnasiumAdapter(GymnasiumParams.from_dict({"gym_id": "DmLike-v0", **params}), env=DmControlLike())
