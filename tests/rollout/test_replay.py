"""Replays: the draw's own keys plus one keyed, registered perturbation, the same bytes on every path.

Why: a replay measures the scene's sensitivity to a hair's breadth of difference
(docs/signal-or-chaos.md). That reading is only worth something if a replay differs from its draw by the
registered perturbation alone: at size zero it is its draw, bit for bit; perturbed, it is the same bytes
on the sequential and the parallel path, run after run; and two replays never share their noise.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from grpo_probe.envs.pusher.spec import pusher_spec
from grpo_probe.envs.registry import make_env
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.prereg.replay import Perturbation, ReplaySection
from grpo_probe.rollout import (
    GroupJob,
    OracleMismatchError,
    RolloutPool,
    group_table,
    read_rollout_table,
    run_group,
    run_sequential,
    write_shard,
)
from grpo_probe.rollout.oracles import run_replay_oracle
from grpo_probe.rollout.perturb import Replay, action_noise
from grpo_probe.rollout.replay import (
    REPLAY_COLUMNS,
    divergence_tick,
    read_replay_table,
    registered_replays,
    write_replay_shard,
)
from grpo_probe.rollout.results import EpisodeResult
from grpo_probe.rollout.table import rollout_schema, table_bytes

from .rollout_cases import RUN_KEY, SHORT_SIM, keyed_source, make_job, nudge_one_action

E = SHORT_SIM.executed_actions
ACTION = Perturbation("action", 1e-3)
STATE = Perturbation("state", 1e-4)
SDE = SamplingMode("flow_sde", sde_a=0.5)
TEMPERATURE = SamplingMode("temperature", temperature=1.6)
TRACES = ("distance_trace_cm", "boat_x_trace_m", "boat_y_trace_m", "pusher_x_trace_m", "pusher_y_trace_m")


def _flow_job(**changes: object) -> GroupJob:
    return make_job(keyed_source("flow"), SDE, **{"seeds": (0, 1), "group_size": 2, **changes})


def _bytes(job: GroupJob, results: list[EpisodeResult]) -> tuple[bytes, bytes]:
    """The job's table bytes and the executed actions of every episode, in (seed, draw) order."""
    assert [r.spec for r in results] == job.episodes()
    return table_bytes(group_table(job, results)), b"".join(r.executed_actions.tobytes() for r in results)


def _spawn_xy(result: EpisodeResult) -> np.ndarray:
    row = result.record.to_row()
    return np.array([row["boat_x_trace_m"][0], row["boat_y_trace_m"][0]])


# -- the engine: one replay, every path ---------------------------------------------------------------
@pytest.mark.parametrize("perturbation", [ACTION, STATE], ids=["action", "state"])
@pytest.mark.parametrize(
    ("head", "mode"), [("ar", TEMPERATURE), ("flow", SDE)], ids=["ar-temperature", "flow-sde"]
)
def test_a_replay_is_the_same_bytes_on_the_sequential_and_the_parallel_path(
    pool: RolloutPool, perturbation: Perturbation, head: str, mode: SamplingMode
) -> None:
    job = make_job(keyed_source(head), mode, seeds=(0, 1, 2), group_size=2)
    replay = job.replace(replay=Replay(1, 1, perturbation))
    sequential = _bytes(replay, run_sequential(replay))
    # tasks of 4 lockstep envs cut across seeds, so rows of different seeds share policy batches
    parallel = _bytes(replay, pool.run(replay, envs_per_worker=4))
    via_group = _bytes(replay, run_group(replay, pool=pool, envs_per_worker=1))
    assert parallel == sequential
    assert via_group == sequential
    assert sequential != _bytes(job, run_sequential(job))  # and it is not the draws themselves


@pytest.mark.parametrize("kind", ["action", "state"])
def test_a_zero_size_replay_reproduces_its_draws_bit_for_bit(kind: str) -> None:
    job = make_job(keyed_source("ar"), TEMPERATURE, seeds=(0, 1, 2), group_size=2)
    draws = run_sequential(job)
    zero = job.replace(replay=Replay(2, 1, Perturbation(kind, 1e-3).zeroed()))  # type: ignore[arg-type]
    replays = run_sequential(zero)
    assert _bytes(zero, replays) == _bytes(job, draws)
    for draw, replay in zip(draws, replays, strict=True):
        assert replay.record.canonical_bytes() == draw.record.canonical_bytes()
        assert [d.token_ids.tobytes() for d in replay.diagnostics] == [
            d.token_ids.tobytes() for d in draw.diagnostics
        ]


def test_a_perturbed_replay_changes_the_traces_and_repeats_itself_byte_for_byte() -> None:
    job = _flow_job(seeds=(0, 1, 2))
    draws = {r.spec: r.record.to_row() for r in run_sequential(job)}
    for perturbation in (ACTION, STATE):
        replay = job.replace(replay=Replay(1, 0, perturbation))
        first = run_sequential(replay)
        for result in first:
            row, draw = result.record.to_row(), draws[result.spec]
            assert row["seed"] == draw["seed"] and row["n_ticks"] == draw["n_ticks"]
            changed = [c for c in TRACES if row[c] != draw[c]]
            assert changed, f"{perturbation.text()}: seed {result.spec} replayed its draw unchanged"
            if perturbation.kind == "action":  # the spawn is the draw's; the pusher moves elsewhere
                assert all(row[c][0] == draw[c][0] for c in TRACES)
                assert row["pusher_x_trace_m"] != draw["pusher_x_trace_m"]
        assert _bytes(replay, run_sequential(replay)) == _bytes(replay, first)


def test_action_noise_is_added_to_the_executed_actions_keyed_by_draw_replay_and_slot() -> None:
    """Replan 0 sees the draw's own observation, so its executed actions are the draw's plus the keyed noise
    (rounded to float32 as recorded); replays 1 and 2 and slots 0 and 1 each add their own noise."""
    job = make_job(keyed_source("ar"), TEMPERATURE, seeds=(0, 1), group_size=2)
    draws = {r.spec: r for r in run_sequential(job)}
    shape = (E, job.spec.action_dims)
    first_actions: dict[Replay, list[bytes]] = {}
    for replay in (Replay(1, 0, ACTION), Replay(2, 0, ACTION), Replay(1, 1, ACTION)):
        first_actions[replay] = []
        for result in run_sequential(job.replace(replay=replay)):
            seed, draw = result.spec.seed, result.spec.draw
            base = draws[result.spec]
            # the policy's keys are the draw's: its first replan's tokens are the draw's
            assert result.diagnostics[0].token_ids.tobytes() == base.diagnostics[0].token_ids.tobytes()
            noise = action_noise(RUN_KEY, seed, draw, replay, 0, shape)
            assert 0 < np.std(noise) < 3 * ACTION.scale
            expected = (base.executed_actions[0].astype(np.float64) + noise).astype(np.float32)
            assert result.executed_actions[0].tobytes() == expected.tobytes()
            first_actions[replay].append(result.executed_actions[0].tobytes())
    for a, b in itertools.combinations(first_actions.values(), 2):
        assert all(x != y for x, y in zip(a, b, strict=True))
    # two draws of one seed, and two seeds, never share a replay's noise either
    noises = [action_noise(RUN_KEY, s, d, Replay(1, 0, ACTION), 0, shape) for s in (0, 1) for d in (0, 1)]
    for a, b in itertools.combinations(noises, 2):
        assert not np.array_equal(a, b)


def _reexecute(job: GroupJob, result: EpisodeResult) -> bytes:
    """The record of ``result``'s seed with its recorded executed actions stepped again (chunk tail zero)."""
    env = make_env(job.env)
    env.reset(result.spec.seed)
    for actions in result.executed_actions:
        chunk = np.zeros((job.spec.chunk_length, job.spec.action_dims), dtype=np.float32)
        chunk[: len(actions)] = actions
        env.execute(chunk, job.spec.executed_actions)
    return env.record().canonical_bytes()


def test_the_recorded_executed_actions_of_a_draw_replay_its_record() -> None:
    job = _flow_job(seeds=(0,), group_size=1)
    (result,) = run_sequential(job)
    assert _reexecute(job, result) == result.record.canonical_bytes()


def test_the_recorded_executed_actions_of_an_action_replay_replay_its_record() -> None:
    job = _flow_job(seeds=(0,), group_size=1, replay=Replay(1, 0, ACTION))
    (result,) = run_sequential(job)
    assert _reexecute(job, result) == result.record.canonical_bytes()


def test_a_state_replay_shifts_each_spawn_by_the_scale_in_a_direction_keyed_by_replay_and_slot() -> None:
    job = _flow_job()
    draws = {r.spec: _spawn_xy(r) for r in run_sequential(job)}
    spawns: dict[Replay, list[np.ndarray]] = {}
    for replay in (Replay(1, 0, STATE), Replay(2, 0, STATE), Replay(1, 1, STATE)):
        spawns[replay] = []
        for result in run_sequential(job.replace(replay=replay)):
            shift = _spawn_xy(result) - draws[result.spec]
            assert math.hypot(*shift) == pytest.approx(STATE.scale, abs=1e-12)
            spawns[replay].append(shift)
        directions = spawns[replay]
        assert not any(np.allclose(a, b) for a, b in itertools.combinations(directions, 2))
    for a, b in itertools.combinations(spawns.values(), 2):
        assert not any(np.allclose(x, y) for x, y in zip(a, b, strict=True))


# -- the replay table ---------------------------------------------------------------------------------
SECTION = ReplaySection(
    replays_per_draw=2,
    seeds=(0, 1),
    perturbations=(Perturbation("action", 0.0), ACTION, STATE),
    divergence_m=1e-6,
    oracle_seeds=(1,),
)


def _expected_divergence(original: dict, replay: dict, distance_m: float) -> int | None:
    ox, oy = np.array(original["boat_x_trace_m"]), np.array(original["boat_y_trace_m"])
    rx, ry = np.array(replay["boat_x_trace_m"]), np.array(replay["boat_y_trace_m"])
    far = np.flatnonzero(np.hypot(rx - ox, ry - oy) > distance_m)
    return int(far[0]) if far.size else None


def test_the_replay_table_is_sorted_complete_and_the_same_bytes_on_every_path(
    tmp_path: Path, pool: RolloutPool
) -> None:
    job = _flow_job(seeds=(1, 0))
    probe = write_shard(job, tmp_path / "probe.parquet", show_progress=False).path
    sequential = write_replay_shard(job, SECTION, probe, tmp_path / "replays.parquet", show_progress=False)
    parallel = write_replay_shard(job, SECTION, probe, tmp_path / "replays_pool.parquet", pool=pool)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "probe.parquet",
        "replays.parquet",
        "replays_pool.parquet",
    ]
    assert sequential.sha256 == parallel.sha256
    assert sequential.path.read_bytes() == parallel.path.read_bytes()
    assert sequential.rows == parallel.rows == len(job.seeds) * job.group_size * SECTION.replays == 24

    table = read_replay_table(sequential.path, job.spec.episode_schema)
    assert table.schema.names[-len(REPLAY_COLUMNS) :] == [f.name for f in REPLAY_COLUMNS]
    rows = table.to_pylist()
    keys = [(r["seed"], r["draw"], r["perturbation_index"], r["replay"]) for r in rows]
    assert keys == sorted(keys) == list(itertools.product((0, 1), (0, 1), (0, 1, 2), (1, 2)))
    originals = {(r["seed"], r["draw"]): r for r in read_rollout_table(probe).to_pylist()}
    rollout_columns = rollout_schema(job.spec.episode_schema).names
    diverged_by_action = 0
    for row in rows:
        perturbation = SECTION.perturbations[row["perturbation_index"]]
        assert (row["perturbation"], row["perturbation_scale"]) == (perturbation.kind, perturbation.scale)
        original = originals[(row["seed"], row["draw"])]
        expected = _expected_divergence(original, row, SECTION.divergence_m)
        assert row["divergence_tick"] == expected
        if perturbation.scale == 0:
            assert row["divergence_tick"] is None
            assert {c: row[c] for c in rollout_columns} == original
        elif perturbation.kind == "state":
            assert row["divergence_tick"] == 0  # the spawn moved 1e-4 m, more than divergence_m
        else:
            assert {c: row[c] for c in TRACES} != {c: original[c] for c in TRACES}
            diverged_by_action += row["divergence_tick"] is not None
            if row["divergence_tick"] is not None:
                assert isinstance(row["divergence_tick"], int) and row["divergence_tick"] > 0
    assert diverged_by_action > 0  # the pusher reached the boat in at least one draw
    by_key = {(r["seed"], r["draw"], r["perturbation_index"], r["replay"]): r for r in rows}
    for seed, draw, slot in itertools.product((0, 1), (0, 1), (1, 2)):
        first, second = by_key[(seed, draw, slot, 1)], by_key[(seed, draw, slot, 2)]
        assert first["pusher_x_trace_m"] != second["pusher_x_trace_m"]


def test_the_replay_table_names_a_draw_missing_from_the_probe_rows(tmp_path: Path) -> None:
    probe = write_shard(_flow_job(seeds=(0,)), tmp_path / "probe.parquet", show_progress=False).path
    section = ReplaySection(1, (0, 1), (ACTION, STATE), 1e-3, (0,))
    with pytest.raises(ValueError, match=r"no probe row of seed 1, draw 0"):
        write_replay_shard(_flow_job(), section, probe, tmp_path / "replays.parquet", show_progress=False)
    assert not (tmp_path / "replays.parquet").exists()


def test_reading_a_replay_table_checks_its_columns(tmp_path: Path) -> None:
    job = _flow_job(seeds=(0,))
    probe = write_shard(job, tmp_path / "probe.parquet", show_progress=False).path
    with pytest.raises(FileNotFoundError, match="replay table not found"):
        read_replay_table(tmp_path / "missing.parquet", job.spec.episode_schema)
    with pytest.raises(ValueError, match=r"not a replay table \(missing column\(s\) perturbation_index"):
        read_replay_table(probe, job.spec.episode_schema)


def test_registered_replays_are_every_perturbation_times_replays_1_to_m() -> None:
    replays = registered_replays(SECTION)
    assert [(r.slot, r.index) for r in replays] == list(itertools.product((0, 1, 2), (1, 2)))
    assert [r.perturbation for r in replays] == [p for p in SECTION.perturbations for _ in (1, 2)]
    assert len(replays) == SECTION.replays == 6


# -- divergence ticks ---------------------------------------------------------------------------------
def _boat_row(xs: list[float], ys: list[float]) -> dict:
    return {"boat_x_trace_m": xs, "boat_y_trace_m": ys, "pusher_x_trace_m": [9.0] * len(xs)}


def test_divergence_tick_of_a_replay_that_never_leaves_its_draw_is_none() -> None:
    spec = make_job(keyed_source("ar"), TEMPERATURE).spec
    row = _boat_row([0.1, 0.2, 0.3], [0.0, -0.1, -0.2])
    assert divergence_tick(row, dict(row), spec, 1e-3) is None
    close = _boat_row([0.1, 0.2 + 9e-4, 0.3 - 9e-4], [0.0, -0.1, -0.2])
    assert divergence_tick(row, close, spec, 1e-3) is None
    at_the_threshold = _boat_row([0.0, 0.5], [0.0, 0.0])
    assert divergence_tick(_boat_row([0.0, 0.0], [0.0, 0.0]), at_the_threshold, spec, 0.5) is None
    # other columns (the pusher's) are not the object's
    assert divergence_tick(row, {**row, "pusher_x_trace_m": [0.0, 0.0, 0.0]}, spec, 1e-3) is None


def test_divergence_tick_is_the_first_tick_farther_than_the_distance_in_the_plane() -> None:
    spec = make_job(keyed_source("ar"), TEMPERATURE).spec
    original = _boat_row([0.0] * 6, [0.0] * 6)
    replay = _boat_row([0.0, 0.0, 5e-4, 0.0, 2e-3, 0.0], [0.0] * 6)
    assert divergence_tick(original, replay, spec, 1e-3) == 4
    assert divergence_tick(replay, original, spec, 1e-3) == 4
    assert divergence_tick(original, replay, spec, 1e-4) == 2
    # 0.8 mm in x and 0.8 mm in y: 1.13 mm apart, farther than 1 mm though neither axis is
    diagonal = _boat_row([0.0, 0.0, 8e-4], [0.0, 0.0, 8e-4])
    assert divergence_tick(_boat_row([0.0] * 3, [0.0] * 3), diagonal, spec, 1e-3) == 2


def test_divergence_tick_of_episodes_of_different_lengths_is_the_shorter_length() -> None:
    spec = make_job(keyed_source("ar"), TEMPERATURE).spec
    long = _boat_row([0.0] * 5, [0.0] * 5)
    short = _boat_row([0.0] * 3, [0.0] * 3)
    assert divergence_tick(long, short, spec, 1e-3) == 3
    assert divergence_tick(short, long, spec, 1e-3) == 3
    early = _boat_row([0.0, 1.0, 0.0], [0.0] * 3)
    assert divergence_tick(long, early, spec, 1e-3) == 1  # an earlier divergence comes first


def test_divergence_tick_reads_the_environments_object_columns() -> None:
    spec = pusher_spec()
    assert spec.view.object_xy == ("object_x_trace_m", "object_y_trace_m")
    original = {"object_x_trace_m": [0.1, 0.1], "object_y_trace_m": [0.2, 0.2]}
    replay = {"object_x_trace_m": [0.1, 0.1], "object_y_trace_m": [0.2, 0.25]}
    assert divergence_tick(original, replay, spec, 1e-3) == 1
    with pytest.raises(KeyError):
        divergence_tick(_boat_row([0.0], [0.0]), _boat_row([0.0], [0.0]), spec, 1e-3)


# -- the unperturbed replay oracle --------------------------------------------------------------------
def test_the_replay_oracle_passes_on_the_probe_shard_and_reports_what_it_compared(
    tmp_path: Path, pool: RolloutPool
) -> None:
    probe = write_shard(_flow_job(), tmp_path / "probe.parquet", show_progress=False).path
    job = _flow_job(seeds=(1,))  # the oracle's seeds: a subset of the shard's
    replays = registered_replays(ReplaySection(1, (0, 1), (ACTION, STATE), 1e-3, (1,)))
    report_path = tmp_path / "replay_oracle.json"
    report = run_replay_oracle(job, replays, probe, report_path, pool=pool, show_progress=False)
    assert report["pass"] is True and report["first_divergence"] is None
    assert json.loads(report_path.read_text()) == report
    assert report["oracle"] == "replay" and report["reference"]["kind"] == "probe"
    assert [case["replay"] for case in report["cases"]] == [
        {"index": 1, "slot": 0, "kind": "action", "std": 0.0},
        {"index": 1, "slot": 1, "kind": "state", "scale_m": 0.0},
    ]
    assert [case["registered"] for case in report["cases"]] == [p.to_dict() for p in (ACTION, STATE)]
    assert all(case["pass"] for case in report["cases"])
    assert report["cases"][0]["tables_sha256"] == report["cases"][1]["tables_sha256"]
    counts = report["counts"]
    assert counts["mismatched_episodes"] == 0
    assert counts["episodes"] >= len(replays) * job.group_size
    assert counts["ticks"] >= len(replays) * job.group_size * (SHORT_SIM.episode_ticks + 1)
    assert counts["actions"] == job.group_size * SHORT_SIM.episode_ticks  # second replay vs the first


def test_the_replay_oracle_fails_on_a_planted_one_ulp_mismatch_naming_the_draw(tmp_path: Path) -> None:
    probe = write_shard(_flow_job(), tmp_path / "probe.parquet", show_progress=False).path
    replays = registered_replays(ReplaySection(1, (0, 1), (ACTION, STATE), 1e-3, (0, 1)))
    hook = functools.partial(nudge_one_action, at=(1, 1, 1, 3, 0))  # seed 1, draw 1, replan 1, action 3
    report_path = tmp_path / "replay_oracle.json"
    with pytest.raises(OracleMismatchError, match=r"replay oracle failed .*seed=1 draw=1 tick") as failure:
        run_replay_oracle(_flow_job(), replays, probe, report_path, probe_hook=hook, show_progress=False)
    divergence = failure.value.divergence
    assert (divergence.seed, divergence.draw) == (1, 1)
    assert divergence.names == ("replay", "probe")
    assert divergence.tick is not None and divergence.tick >= 1 * E + 3 + 1  # not before the nudged tick
    report = json.loads(report_path.read_text())
    assert report["pass"] is False
    assert (report["first_divergence"]["seed"], report["first_divergence"]["draw"]) == (1, 1)
    assert report["first_divergence"]["tick"] == divergence.tick
    assert [case["pass"] for case in report["cases"]] == [False, False]
    assert report["counts"]["mismatched_episodes"] == len(replays)  # one episode per replay


def test_the_replay_oracle_needs_a_registered_perturbation(tmp_path: Path) -> None:
    probe = write_shard(_flow_job(seeds=(0,)), tmp_path / "probe.parquet", show_progress=False).path
    with pytest.raises(ValueError, match="at least one registered perturbation"):
        run_replay_oracle(_flow_job(seeds=(0,)), [], probe, tmp_path / "r.json", show_progress=False)
    assert not (tmp_path / "r.json").exists()
