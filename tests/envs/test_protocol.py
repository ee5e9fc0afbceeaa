"""The environment protocol: the boat scene through it is the boat scene, and bad input fails clearly.

Why: the rollout engine now reaches every simulator through the protocol only, so the boat's episodes
must be unchanged byte for byte, and a user's environment that breaks the contract (a factory that
cannot be imported, a record without a registered metric, heads whose action dims do not fit, physics
that depend on the process) must fail with an error that names the design's file and field.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grpo_probe.envs.boat.environment import BoatPush
from grpo_probe.envs.boat.expert import ScriptedExpert
from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.boat.simulator import OBS_DIM, BoatPushEnv, run_episode
from grpo_probe.envs.boat.spec import boat_spec
from grpo_probe.envs.episode_table import EPISODE_SCHEMA
from grpo_probe.envs.protocol import Environment
from grpo_probe.envs.registry import (
    EnvFactoryError,
    boat_env,
    env_config,
    env_provenance,
    make_env,
)
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.provenance import env_files
from grpo_probe.rollout import (
    GroupJob,
    OracleMismatchError,
    PolicySource,
    run_parallel_oracle,
    run_sequential,
)

from . import user_envs
from .user_envs import factory_name, make_noise_policy

SHORT = {**SimParams(replans=2, executed_actions=10).to_dict()}
PUSHER_SHORT = {
    "replans": 2,
    "chunk_length": 50,
    "executed_actions": 10,
    "success_radius_m": 0.05,
    "table_region_half_extent_m": 0.4,
    "joint_limit_margin_rad": 0.01,
    "joint_limit_hit_speed_rad_s": 3.0,
}


def _job(env, source: PolicySource, seeds=(0, 1), group_size=2) -> GroupJob:
    return GroupJob("arm_x", "cell_x", source, SamplingMode("flow_ode"), seeds, group_size, 5, env)


def _noise_source(obs_dim: int, action_dims: int) -> PolicySource:
    options = {"obs_dim": obs_dim, "chunk_length": 50, "action_dims": action_dims}
    return PolicySource(factory=factory_name(make_noise_policy), options=options)


def test_the_boat_spec_states_what_the_simulator_measures() -> None:
    spec = boat_spec()
    assert spec.obs_dim == OBS_DIM and spec.action_dims == 6
    assert spec.episode_schema.equals(EPISODE_SCHEMA)
    assert spec.guard_names == boat_spec().guard_names
    assert isinstance(BoatPush(), Environment)


def test_the_boat_through_the_protocol_is_the_boat_episode_byte_for_byte() -> None:
    params = SimParams(replans=3, executed_actions=20)
    expert = ScriptedExpert(params, noise=0.1)
    direct = run_episode(BoatPushEnv(params), 4, lambda obs, replan: expert.act(obs, (0, 4, replan)))
    env = make_env(boat_env(params))
    obs = env.reset(4)
    while not env.done:
        obs = env.execute(expert.act(obs, (0, 4, env.replan_index)), env.spec.executed_actions)
    assert env.record().canonical_bytes() == direct.canonical_bytes()


def test_ticks_stepped_one_by_one_make_the_same_episode_as_their_chunks() -> None:
    """Strikes included: a pusher sent out of a small workspace is reset and held until the next replan."""
    params = SimParams(replans=3, executed_actions=10, workspace_half_extent_m=0.15, strike_cap=2)
    expert = ScriptedExpert(params, noise=0.3)
    chunks, by_chunk = [], BoatPush(params)
    obs = by_chunk.reset(9)
    while not by_chunk.done:
        chunks.append(expert.act(obs, (1, 9, by_chunk.replan_index)))
        obs = by_chunk.execute(chunks[-1], params.executed_actions)
    by_tick = BoatPush(params)
    by_tick.reset(9)
    for chunk in chunks:
        for action in chunk[: params.executed_actions]:
            if by_tick.done:
                break
            by_tick.execute_tick(action)
    assert by_tick.done
    assert by_tick.record().canonical_bytes() == by_chunk.record().canonical_bytes()


def test_a_bad_param_is_named_with_the_design_and_field() -> None:
    with pytest.raises(ValueError, match=r"p\.yaml: env\.params: unknown field\(s\) bogus"):
        env_config("pusher", {**PUSHER_SHORT, "bogus": 1}, "p.yaml: env")
    with pytest.raises(ValueError, match=r"p\.yaml: env\.params: missing field\(s\) replans"):
        env_config("pusher", {k: v for k, v in PUSHER_SHORT.items() if k != "replans"}, "p.yaml: env")
    with pytest.raises(ValueError, match=r"p\.yaml: env\.id: 'mujoco-thing' is neither a built-in"):
        env_config("mujoco-thing", {}, "p.yaml: env")


def test_a_factory_that_cannot_be_imported_is_named_with_the_design_and_field() -> None:
    config = env_config("no_such_package.envs:make", {}, "prereg/mine.yaml: env")
    with pytest.raises(
        EnvFactoryError, match=r"prereg/mine\.yaml: env\.id: cannot import module 'no_such_package"
    ):
        make_env(config)
    missing = env_config(f"{user_envs.__name__}:no_such_factory", {}, "prereg/mine.yaml: env")
    with pytest.raises(EnvFactoryError, match=r"prereg/mine\.yaml: env\.id: module .* has no callable"):
        make_env(missing)


def test_a_record_lacking_a_registered_metric_is_refused() -> None:
    config = env_config(factory_name(user_envs.make_boat_without_progress), SHORT, "prereg/mine.yaml: env")
    job = _job(config, _noise_source(OBS_DIM, 6), seeds=(0,), group_size=1)
    with pytest.raises(ValueError, match=r"prereg/mine\.yaml: env: seed 0: environment .* registered metric"):
        run_sequential(job)


def test_action_dims_that_do_not_match_the_heads_name_the_design() -> None:
    """A head of 6 action dims (the boat's) on the 7-joint pusher, and one that reads the boat's obs."""
    config = env_config("pusher", PUSHER_SHORT, "prereg/designs/smoke/pusher_smoke.yaml: env")
    wrong_dims = _job(config, _noise_source(23, 6), seeds=(0,), group_size=1)
    dims = r"head's 6 action dims do not match the environment's 7"
    with pytest.raises(
        ValueError, match=r"prereg/designs/smoke/pusher_smoke\.yaml: env: .*\(1, 50, 6\).*" + dims
    ):
        run_sequential(wrong_dims)
    wrong_obs = _job(config, _noise_source(OBS_DIM, 7), seeds=(0,), group_size=1)
    with pytest.raises(
        ValueError, match=r"prereg/designs/smoke/pusher_smoke\.yaml: env: .*17 numbers.*observes 23"
    ):
        run_sequential(wrong_obs)


def test_the_parallel_oracle_names_the_tick_where_a_nondeterministic_env_diverges(tmp_path: Path) -> None:
    config = env_config(factory_name(user_envs.make_drifting_boat), SHORT, "prereg/mine.yaml: env")
    job = _job(config, _noise_source(OBS_DIM, 6), seeds=(0,), group_size=1)
    with pytest.raises(OracleMismatchError, match=r"seed=0 draw=0 tick 13, ") as failure:
        run_parallel_oracle([job], tmp_path / "oracle.json", workers=1, show_progress=False)
    divergence = failure.value.divergence
    assert divergence.tick == user_envs.DRIFT_AT_TICK
    assert divergence.field.endswith(f"[{user_envs.DRIFT_AT_TICK}]")
    assert divergence.first != divergence.second and "(0x" in divergence.first


def test_a_user_modules_files_are_the_sources_its_manifests_record() -> None:
    config = env_config(factory_name(user_envs.make_drifting_boat), SHORT)
    record = env_provenance(config)
    assert record == {"id": factory_name(user_envs.make_drifting_boat), "version": boat_spec().version}
    source = Path(user_envs.__file__).resolve()
    assert source in [p.resolve() for p in env_files(config)]
    assert env_provenance(boat_env()) == {"id": "boat_push", "version": boat_spec().version}
    assert env_files(boat_env()) == ()


def test_normalized_actions_reach_the_pusher_as_its_torques() -> None:
    env = make_env(env_config("pusher", PUSHER_SHORT))
    env.reset(0)
    chunk = np.zeros((50, 7), dtype=np.float32)
    chunk[:, 3] = 0.5
    env.execute(chunk, 1)
    assert env.env.data.ctrl[3] == pytest.approx(1.0)  # Box(-2, 2): 0.5 -> 1 N m
