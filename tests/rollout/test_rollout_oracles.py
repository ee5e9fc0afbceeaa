"""The parallel and draw-0 oracles: they pass on identical runs and name the first diverging tick."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_probe.policies import ar_head
from grpo_probe.policies.protocol import SAMPLING_KINDS, SamplingMode
from grpo_probe.rollout import (
    OracleMismatchError,
    PolicySource,
    RolloutPool,
    anchor_mode,
    run_draw0_oracle,
    run_parallel_oracle,
    write_shard,
)
from grpo_probe.rollout.divergence import ComparedEpisode, compare_episodes
from grpo_probe.rollout.oracles import EULER_KIND
from grpo_probe.rollout.table import ANCHOR_CELL, ROLLOUT_SCHEMA

from .rollout_cases import SHORT_SIM, keyed_source, make_job, nudge_one_action

E = SHORT_SIM.executed_actions


def test_parallel_oracle_passes_and_reports_what_it_compared(tmp_path: Path, pool: RolloutPool) -> None:
    jobs = [
        make_job(keyed_source("ar"), SamplingMode("temperature", temperature=1.6), arm="ar_arm"),
        make_job(keyed_source("flow"), SamplingMode("flow_sde", sde_a=0.5), arm="flow_arm"),
    ]
    report = run_parallel_oracle(
        jobs, tmp_path / "oracle.json", pool=pool, envs_per_worker=4, show_progress=False
    )
    assert report["pass"] is True and report["first_divergence"] is None
    assert json.loads((tmp_path / "oracle.json").read_text()) == report
    counts = report["counts"]
    assert counts["episodes"] == 12 and counts["mismatched_episodes"] == 0
    assert counts["ticks"] == 12 * (SHORT_SIM.episode_ticks + 1)
    assert counts["actions"] == 12 * SHORT_SIM.episode_ticks
    assert counts["token_ids"] > 0
    assert report["sequential"] == report["parallel"]


def test_parallel_oracle_names_the_tick_of_a_planted_one_ulp_perturbation(
    tmp_path: Path, pool: RolloutPool
) -> None:
    job = make_job(keyed_source("flow"), SamplingMode("flow_ode"), arm="flow_arm")
    hook = functools.partial(
        nudge_one_action, at=(1, 1, 1, 3, 2)
    )  # seed 1, draw 1, replan 1, action 3, dim 2
    report_path = tmp_path / "oracle.json"
    with pytest.raises(OracleMismatchError, match=r"arm=flow_arm .*seed=1 draw=1 tick 14") as failure:
        run_parallel_oracle([job], report_path, pool=pool, parallel_hook=hook, show_progress=False)
    divergence = failure.value.divergence
    assert (divergence.seed, divergence.draw, divergence.tick) == (1, 1, 1 * E + 3 + 1)
    assert divergence.field == "action[replan 1, index 3][2]"
    sequential = float.fromhex(divergence.first.split("(")[1].rstrip(")"))
    parallel = float.fromhex(divergence.second.split("(")[1].rstrip(")"))
    assert np.nextafter(np.float32(sequential), np.float32(np.inf)) == np.float32(parallel)
    report = json.loads(report_path.read_text())
    assert report["pass"] is False
    assert report["first_divergence"]["tick"] == 14 and report["counts"]["mismatched_episodes"] == 1
    assert report["sequential"]["tables_sha256"] != report["parallel"]["tables_sha256"]
    # Snakemake deletes a failed job's outputs: the error names a copy that outlives them.
    kept = tmp_path / "oracle.failed.json"
    assert f"report kept at {kept}" in str(failure.value)
    report_path.unlink()
    assert json.loads(kept.read_text()) == report
    run_parallel_oracle([job], report_path, pool=pool, show_progress=False)  # passes: the copy goes
    assert report_path.is_file() and not kept.exists()


def _row(trace: list[float], token_ids: list[list[int]]) -> dict:
    zeros = [0.0] * len(trace)
    return {
        "seed": 0,
        "distance_trace_cm": trace,
        "boat_x_trace_m": zeros,
        "boat_y_trace_m": zeros,
        "pusher_x_trace_m": zeros,
        "pusher_y_trace_m": zeros,
        "replan_logprob": [None] * len(token_ids),
        "replan_entropy_mean": None,
        "replan_n_tokens": [len(t) for t in token_ids],
        "replan_token_ids": token_ids,
        "success": False,
    }


def test_comparison_names_the_first_trace_tick_and_token_position_that_differ() -> None:
    trace = [float(t) for t in range(2 * E + 1)]
    tokens = [[5, 6, 7], [8, 9, 10]]
    bumped = list(trace)
    bumped[7] = float(np.nextafter(bumped[7], np.inf))
    diff, _ = compare_episodes(
        ComparedEpisode(_row(trace, tokens)), ComparedEpisode(_row(bumped, tokens)), executed_per_replan=E
    )
    assert diff is not None and diff[:2] == (7, "distance_trace_cm[7]")
    assert diff[2] != diff[3] and "0x1.c000000000000p+2" in diff[2]

    diff, counts = compare_episodes(
        ComparedEpisode(_row(trace, tokens)),
        ComparedEpisode(_row(bumped, [[5, 6, 7], [8, 0, 10]])),
        executed_per_replan=E,
    )
    assert diff is not None and diff[:2] == (7, "distance_trace_cm[7]")  # earlier in time than replan 1

    diff, counts = compare_episodes(
        ComparedEpisode(_row(trace, tokens)),
        ComparedEpisode(_row(trace, [[5, 6, 7], [8, 0, 10]])),
        executed_per_replan=E,
    )
    assert diff is not None and diff[:2] == (E + 1, "replan_token_ids[1][1]")
    assert counts.token_ids == 4


def test_comparison_of_identical_episodes_counts_every_tick() -> None:
    row = _row([1.0, -0.0, 2.5] + [3.0] * (2 * E - 2), [[1], [2]])
    diff, counts = compare_episodes(ComparedEpisode(row), ComparedEpisode(dict(row)), executed_per_replan=E)
    assert diff is None and counts.ticks == 2 * E + 1 and counts.token_ids == 2


def test_comparison_tells_negative_zero_from_zero() -> None:
    a = _row([1.0] + [0.0] * (2 * E), [[1], [2]])
    b = _row([1.0] + [-0.0] + [0.0] * (2 * E - 1), [[1], [2]])
    diff, _ = compare_episodes(ComparedEpisode(a), ComparedEpisode(b), executed_per_replan=E)
    assert diff is not None and diff[0] == 1


def _anchor_table(tmp_path: Path, head: str, source: PolicySource, seeds: tuple[int, ...]) -> Path:
    anchor = make_job(
        source, anchor_mode(head), seeds=seeds, group_size=1, arm=f"{head}_arm", cell=ANCHOR_CELL
    )
    return write_shard(anchor, tmp_path / f"anchors_{head}.parquet", show_progress=False).path


@pytest.mark.parametrize(
    ("head", "cell_mode"),
    [("ar", SamplingMode("temperature", temperature=1.6)), ("flow", SamplingMode("flow_ode"))],
    ids=["ar-temperature", "flow-ode"],
)
def test_draw0_oracle_reproduces_the_anchor_rows_of_tiny_trained_heads(
    tmp_path: Path, pool: RolloutPool, real_checkpoints: dict, head: str, cell_mode: SamplingMode
) -> None:
    source = PolicySource(checkpoint=str(real_checkpoints[head]))
    seeds = (0, 1)
    anchors = _anchor_table(tmp_path, head, source, seeds)
    cell = make_job(source, cell_mode, seeds=seeds, group_size=8, arm=f"{head}_arm", cell="cell_1")
    report = run_draw0_oracle(
        cell, tmp_path / "draw0.json", anchor_table=anchors, pool=pool, show_progress=False
    )
    assert report["pass"] is True and report["reference"]["kind"] == "anchor"
    assert report["counts"]["episodes"] == len(seeds)
    assert report["counts"]["ticks"] == len(seeds) * (SHORT_SIM.episode_ticks + 1)
    if head == "ar":
        assert report["counts"]["token_ids"] > 0


def test_draw0_oracle_of_an_ar_temperature_cell_exercises_the_sampler_and_catches_a_broken_noise_switch(
    tmp_path: Path, real_checkpoints: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cell's own sampler at T with its Gumbel noise off must reproduce the greedy anchor; with the
    switch broken (noise added although switched off) the oracle fails at the first replan's token ids."""
    source = PolicySource(checkpoint=str(real_checkpoints["ar"]))
    anchors = _anchor_table(tmp_path, "ar", source, (0,))
    cell = make_job(
        source, SamplingMode("temperature", temperature=1.6), seeds=(0,), arm="ar_arm", cell="c_t16"
    )
    report = run_draw0_oracle(cell, tmp_path / "draw0.json", anchor_table=anchors, show_progress=False)
    assert report["pass"] is True
    assert report["probe"]["mode"] == {
        "kind": "temperature", "temperature": 1.6, "sde_a": None, "steps": 10, "noise": False,
    }  # fmt: skip
    assert report["skipped_columns"] == [
        "cell",
        "mode",
        "temperature",
        "replan_logprob",
        "replan_entropy_mean",
    ]
    assert "token ids" in report["compared"] and "executed actions" in report["compared"]
    assert report["counts"]["token_ids"] > 0 and report["counts"]["ticks"] == SHORT_SIM.episode_ticks + 1
    assert report["action_reference"]["counts"]["actions"] == SHORT_SIM.episode_ticks

    monkeypatch.setattr(ar_head, "gumbel_noise_on", lambda mode: mode.kind == "temperature")
    with pytest.raises(
        OracleMismatchError, match=r"seed=0 draw=0 tick 1, (len\()?replan_token_ids\[0\]"
    ) as failure:
        run_draw0_oracle(cell, tmp_path / "broken.json", anchor_table=anchors, show_progress=False)
    assert failure.value.divergence.names == ("probe", "anchor")
    assert json.loads((tmp_path / "broken.json").read_text())["pass"] is False


def test_draw0_oracle_names_seed_and_tick_where_the_anchor_rows_differ(
    tmp_path: Path, pool: RolloutPool
) -> None:
    source = keyed_source("ar")
    anchors = _anchor_table(tmp_path, "ar", source, (0, 1))
    table = pq.read_table(anchors)
    rows = table.to_pylist()
    rows[1]["boat_y_trace_m"][5] = float(np.nextafter(rows[1]["boat_y_trace_m"][5], np.inf))
    pq.write_table(pa.Table.from_pylist(rows, schema=ROLLOUT_SCHEMA), anchors)
    cell = make_job(
        source, SamplingMode("temperature", temperature=1.0), seeds=(0, 1), arm="ar_arm", cell="cell_2"
    )
    with pytest.raises(OracleMismatchError, match=r"seed=1 draw=0 tick 5, boat_y_trace_m\[5\]") as failure:
        run_draw0_oracle(cell, tmp_path / "draw0.json", anchor_table=anchors, pool=pool, show_progress=False)
    assert failure.value.divergence.names == ("probe", "anchor")
    assert json.loads((tmp_path / "draw0.json").read_text())["first_divergence"]["tick"] == 5


def test_draw0_oracle_requires_anchor_rows_for_every_seed(tmp_path: Path) -> None:
    source = keyed_source("flow")
    anchors = _anchor_table(tmp_path, "flow", source, (0,))
    cell = make_job(source, SamplingMode("flow_ode"), seeds=(0, 1), arm="flow_arm")
    with pytest.raises(ValueError, match=r"anchors_flow.parquet: no anchor row .* for seeds \[1\]"):
        run_draw0_oracle(cell, tmp_path / "draw0.json", anchor_table=anchors, show_progress=False)


def test_draw0_oracle_of_an_sde_cell_compares_against_the_euler_sampler(
    tmp_path: Path, real_checkpoints: dict
) -> None:
    cell = make_job(
        PolicySource(checkpoint=str(real_checkpoints["flow"])),
        SamplingMode("flow_sde", sde_a=0.5),
        seeds=(0,),
    )
    if EULER_KIND not in SAMPLING_KINDS:
        with pytest.raises(ValueError, match="no 'flow_euler' sampling kind"):
            run_draw0_oracle(cell, tmp_path / "draw0.json", show_progress=False)
        assert not (tmp_path / "draw0.json").exists()
        return
    report = run_draw0_oracle(cell, tmp_path / "draw0.json", show_progress=False)
    assert report["pass"] is True and report["reference"]["kind"] == "euler"
