"""The sequential and parallel paths, and the keying of draws: bit identity and invariance properties."""

from __future__ import annotations

import numpy as np
import pytest

from grpo_probe.envs.boat.environment import BoatPush
from grpo_probe.envs.boat.params import SimParams
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.rollout import (
    EpisodeSpec,
    PolicySource,
    RolloutPool,
    engine,
    group_table,
    run_group,
    run_in_process,
    run_lockstep,
    run_sequential,
    worker_count,
)
from grpo_probe.rollout.engine import single_torch_thread
from grpo_probe.rollout.table import table_bytes

from .keyed_test_policies import make_ar_policy
from .rollout_cases import RUN_KEY, SHORT_SIM, keyed_source, make_job

MODES = {
    "ar": [SamplingMode("greedy"), SamplingMode("temperature", temperature=1.6)],
    "flow": [SamplingMode("flow_ode"), SamplingMode("flow_sde", sde_a=0.5)],
}
HEAD_MODES = [(head, mode) for head, modes in MODES.items() for mode in modes]
IDS = [f"{head}-{mode.kind}" for head, mode in HEAD_MODES]


def _assert_same_episodes(first: list, second: list) -> None:
    assert [r.spec for r in first] == [r.spec for r in second]
    for a, b in zip(first, second, strict=True):
        assert a.executed_actions.tobytes() == b.executed_actions.tobytes(), a.spec
        assert a.record.canonical_bytes() == b.record.canonical_bytes(), a.spec


@pytest.mark.parametrize(("head", "mode"), HEAD_MODES, ids=IDS)
def test_parallel_rollouts_match_sequential_bytes_for_keyed_test_policies(
    pool: RolloutPool, head: str, mode: SamplingMode
) -> None:
    job = make_job(keyed_source(head), mode, seeds=(0, 1, 2), group_size=2)
    sequential = run_sequential(job)
    parallel = pool.run(job, envs_per_worker=4)  # batches of 4 cut across seed groups
    _assert_same_episodes(sequential, parallel)
    assert table_bytes(group_table(job, sequential)) == table_bytes(group_table(job, parallel))


@pytest.mark.parametrize(("head", "mode"), HEAD_MODES, ids=IDS)
def test_a_job_of_one_task_runs_in_process_with_the_parallel_bytes(
    pool: RolloutPool, head: str, mode: SamplingMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job of one task starts no worker (run_group runs it in process) and writes the bytes the
    workers and the sequential path write; with tasks to share, no more workers start than tasks."""
    job = make_job(keyed_source(head), mode, seeds=(0, 1, 2), group_size=2)
    parallel = pool.run(job, envs_per_worker=4)
    started: list[int] = []

    def no_pool(workers: int, **_: object) -> None:
        started.append(workers)
        raise AssertionError("a job of one task started worker processes")

    monkeypatch.setattr(engine, "RolloutPool", no_pool)
    in_process = run_group(job, workers=2, envs_per_worker=8)  # 6 episodes: one task
    _assert_same_episodes(parallel, in_process)
    _assert_same_episodes(run_sequential(job), run_in_process(job, envs_per_worker=4))
    assert table_bytes(group_table(job, in_process)) == table_bytes(group_table(job, parallel))
    assert started == []
    assert [worker_count(n, 2, 8) for n in (1, 8, 9, 16, 40)] == [0, 0, 2, 2, 2]
    assert [worker_count(n, 4, 8) for n in (9, 17, 40)] == [2, 3, 4]
    assert [worker_count(n, 1, 8) for n in (9, 40)] == [0, 0]  # one worker: in process


@pytest.mark.parametrize(("head", "mode"), HEAD_MODES, ids=IDS)
def test_parallel_rollouts_match_sequential_bytes_for_tiny_trained_heads(
    pool: RolloutPool, real_checkpoints: dict, head: str, mode: SamplingMode
) -> None:
    job = make_job(PolicySource(checkpoint=str(real_checkpoints[head])), mode, seeds=(3, 4), group_size=2)
    sequential = run_sequential(job)
    parallel = pool.run(job, envs_per_worker=3)
    _assert_same_episodes(sequential, parallel)
    table = group_table(job, parallel)
    assert table_bytes(group_table(job, sequential)) == table_bytes(table)
    if head == "ar":
        assert all(ids for row in table.column("replan_token_ids").to_pylist() for ids in row)


def test_rows_are_sorted_by_seed_then_draw_with_labels_of_the_mode() -> None:
    job = make_job(
        keyed_source("flow"), SamplingMode("flow_sde", sde_a=0.5, steps=4), seeds=(5, 2), group_size=2
    )
    table = group_table(job, run_sequential(job))
    assert list(zip(table["seed"].to_pylist(), table["draw"].to_pylist(), strict=True)) == [
        (2, 0),
        (2, 1),
        (5, 0),
        (5, 1),
    ]
    row = table.slice(0, 1).to_pylist()[0]
    assert (row["cell"], row["arm"], row["head"], row["mode"]) == ("cell_x", "arm_x", "flow", "flow_sde")
    assert (row["temperature"], row["sde_a"], row["sampler_steps"]) == (None, 0.5, 4)
    assert len(row["replan_logprob"]) == SHORT_SIM.replans and None not in row["replan_logprob"]
    assert row["replan_token_ids"] is None and row["replan_entropy_mean"] is None


def test_changing_the_draw_changes_ar_token_ids_but_not_the_spawn() -> None:
    job = make_job(
        keyed_source("ar"), SamplingMode("temperature", temperature=1.0), seeds=(0, 1), group_size=2
    )
    rows = group_table(job, run_sequential(job)).to_pylist()
    for draw0, draw1 in (rows[0:2], rows[2:4]):
        assert draw0["distance_trace_cm"][0] == draw1["distance_trace_cm"][0]  # same seed, same spawn
        assert draw0["replan_token_ids"][0] != draw1["replan_token_ids"][0]


def test_changing_the_draw_changes_flow_noise_of_the_trained_head(real_checkpoints: dict) -> None:
    job = make_job(
        PolicySource(checkpoint=str(real_checkpoints["flow"])), SamplingMode("flow_ode"), seeds=(0,)
    )
    draw0, draw1 = run_sequential(job)
    assert draw0.record.d0_cm == draw1.record.d0_cm
    assert draw0.executed_actions[0].tobytes() != draw1.executed_actions[0].tobytes()


def test_draws_of_a_deterministic_mode_are_identical_episodes() -> None:
    """The draw index enters only the RNG keys: greedy decoding has none, so every draw is the same."""
    job = make_job(keyed_source("ar"), SamplingMode("greedy"), seeds=(4,), group_size=3)
    results = run_sequential(job)
    assert len({r.record.canonical_bytes() for r in results}) == 1
    assert len({r.executed_actions.tobytes() for r in results}) == 1


@pytest.mark.parametrize("head", ["ar", "flow"])
def test_permuting_the_lockstep_batch_order_changes_nothing(real_checkpoints: dict, head: str) -> None:
    policy = PolicySource(checkpoint=str(real_checkpoints[head])).build()
    mode = (
        SamplingMode("temperature", temperature=1.6) if head == "ar" else SamplingMode("flow_sde", sde_a=0.5)
    )
    specs = [EpisodeSpec(seed, draw) for seed in (0, 1) for draw in (0, 1)]
    envs = [BoatPush(SHORT_SIM) for _ in specs]
    with single_torch_thread():
        forward = run_lockstep(policy, envs, specs, run_key=RUN_KEY, mode=mode)
        backward = run_lockstep(policy, envs, specs[::-1], run_key=RUN_KEY, mode=mode)[::-1]
    _assert_same_episodes(forward, backward)
    for a, b in zip(forward, backward, strict=True):
        assert [d.logprob for d in a.diagnostics] == [d.logprob for d in b.diagnostics]


def test_lockstep_batches_drop_envs_that_the_strike_cap_ended() -> None:
    """Rows the strike cap ends leave later batches; every row still matches its one-env run."""
    sim = SimParams(replans=3, executed_actions=10, strike_cap=1, workspace_half_extent_m=0.15)
    policy, mode = make_ar_policy(), SamplingMode("temperature", temperature=1.0)
    specs = [EpisodeSpec(seed, 0) for seed in range(6)]
    batched = run_lockstep(policy, [BoatPush(sim) for _ in specs], specs, run_key=3, mode=mode)
    alone = [run_lockstep(policy, [BoatPush(sim)], [s], run_key=3, mode=mode)[0] for s in specs]
    _assert_same_episodes(batched, alone)
    replans_run = {len(r.diagnostics) for r in batched}
    assert len(replans_run) > 1, "the case must end episodes at different replans"
    assert any(r.record.ended_by_strike_cap for r in batched)


def test_policy_returning_float64_actions_is_rejected_naming_the_protocol() -> None:
    class Float64Policy:
        head = "ar"
        obs_dim = 17

        def act(self, obs, keys, mode):
            out = make_ar_policy().act(obs, keys, mode)
            out.actions = out.actions.astype(np.float64)
            return out

    with pytest.raises(ValueError, match="float32"):
        run_lockstep(
            Float64Policy(),
            [BoatPush(SHORT_SIM)],
            [EpisodeSpec(0, 0)],
            run_key=0,
            mode=SamplingMode("greedy"),
        )


def test_spawned_workers_give_the_same_bytes_as_forkserver_ones(pool: RolloutPool) -> None:
    # the shared pool's workers are forked from the forkserver, which preloaded the engine's imports
    job = make_job(keyed_source("flow"), SamplingMode("flow_sde", sde_a=0.5), seeds=(6,), group_size=2)
    with RolloutPool(1, start_method="spawn") as spawn:
        spawned = spawn.run(job)
    _assert_same_episodes(pool.run(job), spawned)


def test_fork_start_method_is_refused() -> None:
    with pytest.raises(ValueError, match="'spawn' or 'forkserver'"):
        RolloutPool(2, start_method="fork")
