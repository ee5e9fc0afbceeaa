"""The boat scene as a registered ``gymnasium.Env``: ``grpo_probe/BoatPush-v0``.

Why: people who train with Gymnasium can run the probe's reference scene with their own tools, and the
scene is held to Gymnasium's conventions (``gymnasium.utils.env_checker.check_env`` passes on it).

- ``reset(seed=)`` returns ``(obs, info)``; the spawn is a pure function of the seed (an unseeded reset
  draws the seed from the env's ``np_random``, as Gymnasium does).
- ``step(action)`` runs one 20 ms control tick of a ``Box(-1, 1, (6,), float32)`` action; ticks form
  replans of ``executed_actions`` as the probe's chunks do (``BoatPushEnv.execute_tick``).
- The reward is the tick's progress increment in cm, ``100 (d_{t-1} - d_t)``, so the return is
  ``progress_final_cm`` (to float rounding).
- ``terminated`` when the safety monitor's strike cap ends the episode, ``truncated`` after ``replans`` x
  ``executed_actions`` ticks; ``info`` carries the guard channels and the record's metrics so far.

Make it with ``gymnasium.make("grpo_probe.envs.boat.gym_registration:grpo_probe/BoatPush-v0")`` (importing
this module registers the id), optionally with ``params=SimParams(...)``.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from grpo_probe.envs.boat.environment import BoatPush
from grpo_probe.envs.boat.params import SimParams

__all__ = ["GYM_ID", "BoatPushGymEnv"]

GYM_ID = "grpo_probe/BoatPush-v0"

_INFO_KEYS = (
    "progress_final_cm",
    "best_point_cm",
    "contact",
    "reset_strikes",
    "ended_by_strike_cap",
    "knocked_off",
    "final_upright",
    "final_tilt_deg",
    "max_boat_speed_m_s",
    "success",
)
"""The record's metrics and guard channels carried in ``info`` at every step."""


class BoatPushGymEnv(gymnasium.Env[np.ndarray, np.ndarray]):
    """The boat-push tabletop, one control tick per ``step`` (its spaces:
    :mod:`grpo_probe.envs.boat.simulator`)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's class attribute

    def __init__(self, params: SimParams | None = None) -> None:
        self.sim = BoatPush(params)
        spec = self.sim.spec
        self.observation_space = spaces.Box(-np.inf, np.inf, (spec.obs_dim,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (spec.action_dims,), np.float32)
        self._distance_cm = 0.0

    def _info(self) -> dict[str, Any]:
        row = self.sim.record().to_row()
        return {key: row[key] for key in _INFO_KEYS}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        spawn_seed = seed if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        obs = self.sim.reset(spawn_seed)
        self._distance_cm = self.sim.record().d0_cm
        return obs, self._info()

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs = self.sim.execute_tick(action)
        info = self._info()
        distance_cm = self.sim.record().d_final_cm
        reward = self._distance_cm - distance_cm  # both in cm: 100 (d_{t-1} - d_t)
        self._distance_cm = distance_cm
        terminated = self.sim.ended_by_strike_cap
        truncated = self.sim.done and not terminated
        return obs, float(reward), terminated, truncated, info


if GYM_ID not in gymnasium.registry:
    gymnasium.register(id=GYM_ID, entry_point=f"{__name__}:BoatPushGymEnv")
