"""The safety monitor fires on a table press and on leaving the workspace; the strike cap ends the episode."""

from __future__ import annotations

import numpy as np

from grpo_probe.envs.boat import BoatPushEnv, SimParams


def _far_from_boat(obs: np.ndarray) -> np.ndarray:
    """A table point 0.2 m from the boat, toward the table centre side, to press on without touching it."""
    boat = obs[6:8].astype(float)
    away = -boat / max(np.linalg.norm(boat), 1e-6)
    return boat + 0.2 * away


def test_pressing_into_the_table_is_a_strike_and_resets_to_hover(env: BoatPushEnv, hold_chunk) -> None:
    obs = env.reset(3)
    xy = _far_from_boat(obs)
    env.execute_chunk(hold_chunk(np.array([*xy, -0.08]), env.params))  # 8 cm below the table top
    assert env.record().reset_strikes == 1
    tip_height = env.observe()[2]
    assert abs(tip_height - env.params.hover_height_m) < 0.01  # held at hover for the rest of the replan


def test_leaving_the_workspace_is_a_strike(env: BoatPushEnv, hold_chunk) -> None:
    env.reset(3)
    env.execute_chunk(hold_chunk(np.array([0.5, 0.0, 0.10]), env.params))
    record = env.record()
    assert record.reset_strikes >= 1
    assert abs(env.observe()[0]) <= env.params.workspace_half_extent_m + 0.01


def test_pressing_gently_is_not_a_strike(env: BoatPushEnv, hold_chunk) -> None:
    obs = env.reset(3)
    xy = _far_from_boat(obs)
    env.execute_chunk(hold_chunk(np.array([*xy, -0.01]), env.params))  # 1 cm in: about 4 N, under the limit
    assert env.record().reset_strikes == 0


def test_the_strike_cap_ends_the_episode(hold_chunk) -> None:
    params = SimParams(strike_cap=2)
    env = BoatPushEnv(params)
    obs = env.reset(3)
    xy = _far_from_boat(obs)
    while not env.done:
        env.execute_chunk(hold_chunk(np.array([*xy, -0.08]), params))
    record = env.record()
    assert record.reset_strikes == 2
    assert record.ended_by_strike_cap
    assert record.n_ticks < params.episode_ticks
    assert env.replan_index == 2
