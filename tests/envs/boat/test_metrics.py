"""Each metric of the record, recomputed from the state or reached by a scripted case."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grpo_probe.envs.boat import BoatPushEnv, run_episode
from grpo_probe.envs.boat.simulator import BOAT_REST_Z_M


def test_progress_and_best_point_follow_the_distance_trace(env: BoatPushEnv, expert_act) -> None:
    record = run_episode(env, 3, expert_act(0.05, 3))
    trace = np.asarray(record.distance_trace_cm)
    assert len(trace) == record.n_ticks + 1
    assert record.d0_cm == trace[0]
    assert record.d_final_cm == trace[-1]
    assert record.progress_final_cm == pytest.approx(trace[0] - trace[-1], abs=1e-9)
    assert record.best_point_cm == pytest.approx(np.max(trace[0] - trace[1:]), abs=1e-9)


def test_distance_trace_is_boat_to_disk_in_the_table_plane(env: BoatPushEnv, expert_act) -> None:
    record = run_episode(env, 5, expert_act(0.0, 5))
    bx, by = np.asarray(record.boat_x_trace_m), np.asarray(record.boat_y_trace_m)
    recomputed = 100.0 * np.hypot(bx - record.disk_x_m, by - record.disk_y_m)
    np.testing.assert_allclose(record.distance_trace_cm, recomputed, rtol=0, atol=1e-6)


def test_progress_of_a_hand_checked_case(env: BoatPushEnv, hold_chunk) -> None:
    """Move the boat by hand 5 cm straight toward the disk: progress is 5 cm, best point too."""
    obs = env.reset(4)
    boat, disk = obs[6:8].astype(float), obs[13:15].astype(float)
    u = (disk - boat) / np.linalg.norm(disk - boat)
    state = env.get_state()
    physics = state.physics.copy()
    # mjSTATE_INTEGRATION starts with time (1) then qpos; the boat's free joint comes first in qpos.
    physics[1:3] = boat + 0.05 * u
    env.set_state(type(state)(**{**state.__dict__, "physics": physics}))
    env.execute_chunk(hold_chunk(np.array([*obs[0:2], 0.10]), env.params))
    record = env.record()
    assert record.progress_final_cm == pytest.approx(5.0, abs=0.05)
    assert record.best_point_cm == pytest.approx(5.0, abs=0.05)


def test_noiseless_expert_pushes_the_boat_onto_the_disk(env: BoatPushEnv, expert_act) -> None:
    record = run_episode(env, 0, expert_act(0.0, 0))
    assert record.success
    assert record.contact and record.first_contact_tick is not None
    assert record.d_final_cm <= 100 * env.params.disk_radius_m
    assert record.final_upright and not record.knocked_off


def test_holding_still_never_touches_the_boat(env: BoatPushEnv, hold_chunk) -> None:
    obs = env.reset(2)
    chunk = hold_chunk(obs[0:3].astype(float), env.params)
    while not env.done:
        env.execute_chunk(chunk)
    record = env.record()
    assert not record.contact and record.first_contact_tick is None
    assert record.progress_final_cm == pytest.approx(0.0, abs=0.01)
    assert not record.success and record.reset_strikes == 0
    assert record.final_z_mm == pytest.approx(1000 * BOAT_REST_Z_M, abs=0.5)


def test_a_swat_knocks_the_boat_off_the_table(env: BoatPushEnv, hold_chunk) -> None:
    obs = env.reset(1)
    boat = obs[6:8].astype(float)
    out = boat / np.linalg.norm(boat)
    start = boat - 0.12 * out
    env.execute_chunk(hold_chunk(np.array([*start, 0.08]), env.params))
    env.execute_chunk(hold_chunk(np.array([*start, 0.01]), env.params))
    while not env.done:
        env.execute_chunk(hold_chunk(np.array([*(boat + 0.6 * out), 0.01]), env.params))
    record = env.record()
    assert record.knocked_off and not record.success
    assert record.max_boat_speed_m_s > 1.0
    assert record.final_z_mm < 0


def test_a_tipped_boat_is_not_upright(env: BoatPushEnv, hold_chunk) -> None:
    obs = env.reset(6)
    state = env.get_state()
    physics = state.physics.copy()
    roll = math.pi / 2  # boat on its side
    physics[1:4] = (obs[6], obs[7], 0.025)  # hull half-width above the table
    physics[4:8] = (math.cos(roll / 2), math.sin(roll / 2), 0.0, 0.0)
    env.set_state(type(state)(**{**state.__dict__, "physics": physics}))
    env.execute_chunk(hold_chunk(obs[0:3].astype(float), env.params))
    record = env.record()
    assert not record.final_upright
    assert record.final_tilt_deg > env.params.upright_max_tilt_deg
    assert not record.knocked_off
