"""Two synthetic environments for the signal-or-chaos reads, importable by worker processes.

Why two: the chaos fraction must say "choices" where the reward follows the actions and "luck" where it
does not. Both move an object in the table plane toward a fixed goal and record it as the protocol asks
(``PushRecord``, ``progress_final_cm = 100 (d0 - d_final)``):

- :class:`SmoothPlane`: each tick the object moves by ``STEP_M * action[:2]`` (metres), so a replay whose
  actions differ by 1e-3 ends about 1e-5 m from its draw, while draws of different policy noise end
  centimetres apart: the chaos fraction is near 0.
- :class:`LuckPlane`: each tick the object lands at a spot drawn from a generator seeded by a hash of the
  exact bytes of every action executed so far; what the actions mean is ignored, so any change of an
  action (a 1e-3 nudge as much as another draw's choice) gives a fresh draw: the chaos fraction is near 1.

Each factory is called as ``factory(**params)`` (``env: {id: "envs.chaos_envs:make_smooth_plane"}``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from grpo_probe.envs.gym_adapter import PushRecord, push_schema
from grpo_probe.envs.protocol import EnvSpec, TopDownView, away_tail_guard, check_chunk
from grpo_probe.keyed_rng import numpy_generator, tag

STEP_M = 0.01
"""Smooth plane: metres the object moves per tick for a full-scale action."""
LUCK_HALF_EXTENT_M = 0.05
"""Luck plane: the object lands uniformly within this half extent of its spawn, every tick."""
GOAL_XY = (0.15, 0.0)
SPAWN_HALF_EXTENT_M = 0.02
CHUNK_LENGTH = 8
EXECUTED_ACTIONS = 4
REPLANS = 3
ACTION_DIMS = 2
OBS_DIM = 4
ENGAGED_M = 1e-3


def factory_name(function: Callable[..., Any]) -> str:
    """``module:function`` of a factory defined here, whatever name pytest imported this module under."""
    return f"{function.__module__}:{function.__qualname__}"


class _Plane:
    """An object in the table plane, a goal, and the protocol's bookkeeping; subclasses say how it moves."""

    def __init__(self, env_id: str, version: str, state_perturbation: str | None = None) -> None:
        self.spec = EnvSpec(
            id=env_id,
            version=version,
            action_dims=ACTION_DIMS,
            obs_dim=OBS_DIM,
            chunk_length=CHUNK_LENGTH,
            executed_actions=EXECUTED_ACTIONS,
            replans=REPLANS,
            tick_s=0.05,
            episode_schema=push_schema((), effector=False),
            guards=(away_tail_guard("object", "goal"),),
            view=TopDownView(
                object_xy=("object_x_trace_m", "object_y_trace_m"),
                effector_xy=None,
                target_xy=("goal_x_m", "goal_y_m"),
                target_radius_m=0.01,
                names=("object", "effector", "goal"),
            ),
            engagement=f"the object moved more than {ENGAGED_M:g} m from its spawn",
            state_perturbation=state_perturbation,
        )
        self.replan_index = 0
        self._seed: int | None = None

    # -- what a subclass says ---------------------------------------------------------------------------
    def _start(self) -> None:
        """Called after each reset (and after a state perturbation)."""

    def _move(self, action: np.ndarray) -> np.ndarray:
        """The object's xy after one tick of ``action`` (float32 values as executed)."""
        raise NotImplementedError

    # -- the protocol -----------------------------------------------------------------------------------
    def reset(self, seed: int) -> np.ndarray:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self._seed = int(seed)
        self.replan_index = 0
        self._tick = 0
        spawn = numpy_generator(tag("chaos_env_spawn"), self._seed).uniform(
            -SPAWN_HALF_EXTENT_M, SPAWN_HALF_EXTENT_M, 2
        )
        self._begin(spawn)
        return self._obs()

    def _begin(self, spawn: np.ndarray) -> None:
        self._spawn = np.asarray(spawn, dtype=np.float64)
        self._xy = self._spawn.copy()
        self._trace = [self._xy.copy()]
        self._first_contact: int | None = None
        self._start()

    def _obs(self) -> np.ndarray:
        gx, gy = GOAL_XY
        x, y = self._xy
        return np.array([x, y, gx - x, gy - y], dtype=np.float32)

    @property
    def done(self) -> bool:
        return self.replan_index >= REPLANS

    def execute(self, chunk: np.ndarray, n_executed: int) -> np.ndarray:
        if self._seed is None:
            raise RuntimeError("call reset(seed) before execute")
        if self.done:
            raise RuntimeError(f"seed {self._seed}: the episode is over; call reset(seed)")
        where = f"{self.spec.id} seed {self._seed}"
        exact = np.asarray(chunk, dtype=np.float32)  # the bytes the engine executes
        check_chunk(chunk, self.spec, n_executed, where)
        for action in exact[:n_executed]:
            self._tick += 1
            self._xy = self._move(action)
            self._trace.append(self._xy.copy())
            if self._first_contact is None and math.dist(self._xy, self._spawn) > ENGAGED_M:
                self._first_contact = self._tick
        self.replan_index += 1
        return self._obs()

    def record(self) -> PushRecord:
        if self._seed is None:
            raise RuntimeError("call reset(seed) before record")
        gx, gy = GOAL_XY
        dist = [math.hypot(x - gx, y - gy) for x, y in self._trace]
        d0, d_final = dist[0], dist[-1]
        return PushRecord(
            seed=self._seed,
            n_ticks=self._tick,
            d0_cm=100.0 * d0,
            d_final_cm=100.0 * d_final,
            progress_final_cm=100.0 * (d0 - d_final),
            best_point_cm=max(100.0 * (d0 - d) for d in dist[1:]) if len(dist) > 1 else 0.0,
            distance_trace_cm=tuple(100.0 * d for d in dist),
            contact=self._first_contact is not None,
            first_contact_tick=self._first_contact,
            success=d_final <= self.spec.view.target_radius_m,
            object_x_trace_m=tuple(float(x) for x, _ in self._trace),
            object_y_trace_m=tuple(float(y) for _, y in self._trace),
            goal_x_m=gx,
            goal_y_m=gy,
        )


class SmoothPlane(_Plane):
    """The object moves by ``STEP_M * action`` each tick: the reward is a smooth function of the actions."""

    def __init__(self, offers_state_perturbation: bool) -> None:
        offer = "the object's spawn position in the table plane" if offers_state_perturbation else None
        super().__init__(factory_name(make_smooth_plane), "smooth/1", offer)

    def _move(self, action: np.ndarray) -> np.ndarray:
        return self._xy + STEP_M * np.clip(action.astype(np.float64), -1.0, 1.0)

    def perturb_state(self, rng: np.random.Generator, scale: float) -> np.ndarray:
        """The spawn shifted by ``scale`` metres in a direction drawn from ``rng`` (right after reset)."""
        if self.spec.state_perturbation is None:
            raise ValueError(f"{self.spec.id}: no state perturbation is offered")
        if self._seed is None or self._tick != 0:
            raise RuntimeError("perturb_state is called right after reset(seed), before any tick")
        direction = rng.standard_normal(2)
        direction /= float(np.linalg.norm(direction))
        if scale:
            self._begin(self._spawn + scale * direction)
        return self._obs()


class LuckPlane(_Plane):
    """Each tick the object lands where a generator keyed by the bytes of every executed action says."""

    def __init__(self) -> None:
        super().__init__(factory_name(make_luck_plane), "luck/1")

    def _start(self) -> None:
        self._hash = hashlib.sha256()

    def _move(self, action: np.ndarray) -> np.ndarray:
        self._hash.update(np.ascontiguousarray(action, dtype=np.float32).tobytes())
        luck = np.random.default_rng(int.from_bytes(self._hash.digest()[:8], "little"))
        return self._spawn + luck.uniform(-LUCK_HALF_EXTENT_M, LUCK_HALF_EXTENT_M, 2)


def make_smooth_plane(state_perturbation: bool = False) -> SmoothPlane:
    """The smooth plane; with ``state_perturbation`` it offers ``perturb_state`` (its spawn shifted)."""
    return SmoothPlane(bool(state_perturbation))


def make_luck_plane() -> LuckPlane:
    """The luck plane (no state perturbation)."""
    return LuckPlane()
