"""Same seed -> same bytes: in one process, in a fresh process, and across a save/restore."""

from __future__ import annotations

import subprocess
import sys

import mujoco
import pytest

from grpo_probe.envs.boat import BoatPushEnv, SimParams, run_episode
from grpo_probe.envs.boat import simulator as boat_env
from grpo_probe.envs.boat.expert import ScriptedExpert

_EPISODE_SCRIPT = """
import sys
from grpo_probe.envs.boat import BoatPushEnv, run_episode
from grpo_probe.envs.boat.expert import ScriptedExpert
expert = ScriptedExpert(noise=0.05)
record = run_episode(BoatPushEnv(), 7, lambda obs, k: expert.act(obs, (0, 7, k)))
sys.stdout.buffer.write(record.canonical_bytes())
"""


def _expert_record(env: BoatPushEnv, seed: int, noise: float = 0.05) -> bytes:
    expert = ScriptedExpert(env.params, noise=noise)
    return run_episode(env, seed, lambda obs, k: expert.act(obs, (0, seed, k))).canonical_bytes()


def test_same_seed_gives_identical_record_bytes_in_one_process() -> None:
    env = BoatPushEnv()
    first = _expert_record(env, 7)
    _expert_record(env, 8)  # an episode in between must leave no trace in the env
    assert _expert_record(env, 7) == first
    assert _expert_record(BoatPushEnv(), 7) == first


def test_same_seed_gives_identical_record_bytes_in_a_fresh_process() -> None:
    fresh = subprocess.run([sys.executable, "-c", _EPISODE_SCRIPT], capture_output=True, check=True).stdout
    assert fresh == _expert_record(BoatPushEnv(), 7)


def test_different_seeds_give_different_spawns() -> None:
    env = BoatPushEnv()
    assert env.reset(1).tobytes() != env.reset(2).tobytes()


def _straight_and_restored(seed: int = 11) -> tuple[bytes, bytes]:
    """One expert episode's record bytes run straight through, and resumed in a fresh env after 7 replans."""
    params = SimParams()
    expert = ScriptedExpert(params, noise=0.1)
    env = BoatPushEnv(params)
    obs = env.reset(seed)
    for _ in range(7):
        obs = env.execute_chunk(expert.act(obs, (0, seed, env.replan_index)))
    saved = env.get_state()
    while not env.done:
        obs = env.execute_chunk(expert.act(obs, (0, seed, env.replan_index)))
    straight = env.record().canonical_bytes()

    other = BoatPushEnv(params)
    other.reset(99)  # a different episode first, so nothing leaks from the fresh env's own history
    other.set_state(saved)
    obs = other.observe()
    while not other.done:
        obs = other.execute_chunk(expert.act(obs, (0, seed, other.replan_index)))
    return straight, other.record().canonical_bytes()


def test_restoring_a_mid_episode_state_continues_bit_identically() -> None:
    straight, restored = _straight_and_restored()
    assert restored == straight


def test_a_state_saved_without_the_warm_start_does_not_continue(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the saved state is mjSTATE_INTEGRATION: without qacc_warmstart the solver starts elsewhere."""
    no_warmstart = int(mujoco.mjtState.mjSTATE_INTEGRATION) & ~int(mujoco.mjtState.mjSTATE_WARMSTART)
    monkeypatch.setattr(boat_env, "_STATE_SPEC", no_warmstart)
    straight, restored = _straight_and_restored()
    assert restored != straight
