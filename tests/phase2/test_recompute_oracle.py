"""The replay oracle: recorded rollout log-probs recomputed under the same parameters, per token or SDE step.

It must pass on both heads (AR within float32 rounding of the KV-cached decode; flow bit for bit) and fail
on a planted mismatch, naming seed, draw, replan and position; a corrupted log-prob column in the table
fails the rollouts job before anything is trained.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from grpo_probe.phase2 import pilot_jobs as steps
from grpo_probe.phase2 import rollouts
from grpo_probe.phase2.gate import plan_from_decision, write_plan
from grpo_probe.phase2.recompute import flow_chains, load_head_model
from grpo_probe.phase2.recompute_oracle import RecomputeMismatchError, recompute_batch
from grpo_probe.phase2.rollouts import RolloutBatch, read_batch, run_iteration, write_iteration_table
from grpo_probe.policies.checkpoint import load_policy
from grpo_probe.prereg import Prereg

from .conftest import write_decision, write_design, write_source

ARMS = {"ar": "ar", "flow": "flow_teacher"}


@pytest.fixture(scope="module")
def recorded(
    tmp_path_factory: pytest.TempPathFactory, design: Prereg, heads: dict[str, Path]
) -> dict[str, Path]:
    """Iteration-0 rollouts of each tiny head, as the phase2_rollouts rule records them (sequential path)."""
    root = tmp_path_factory.mktemp("recorded")
    torch.set_num_threads(1)
    tables = {}
    for head, arm in ARMS.items():
        tables[head] = root / f"{head}.parquet"
        write_iteration_table(
            run_iteration(design, arm, heads[head], 0, workers=0, show_progress=False), tables[head]
        )
    return tables


def _plant(batch: RolloutBatch, episode: int, replan: int, position: int, delta: float) -> RolloutBatch:
    """The batch with one recorded per-token (AR) or per-step (flow) log-prob moved by ``delta``."""
    episodes = list(batch.episodes)
    e = episodes[episode]
    replans = list(e.replans)
    r = replans[replan]
    field = "token_logprobs" if batch.head == "ar" else "step_logprobs"
    values = getattr(r, field).copy()
    values[position] += delta
    replans[replan] = dataclasses.replace(r, **{field: values})
    episodes[episode] = dataclasses.replace(e, replans=tuple(replans))
    return dataclasses.replace(batch, episodes=tuple(episodes))


@pytest.mark.parametrize("head", ["ar", "flow"])
def test_replay_oracle_passes_on_the_recorded_rollouts_of_each_head(
    recorded: dict[str, Path], design: Prereg, heads: dict[str, Path], head: str
) -> None:
    batch = read_batch(recorded[head], design.run_key)
    tolerance = design.phase2.recipe(head).replay_atol  # type: ignore[union-attr]
    report = recompute_batch(load_head_model(str(heads[head])), batch, tolerance)
    assert report.passed, report.first_mismatch
    assert report.rows == len(batch.episodes) and report.replans == sum(
        len(e.replans) for e in batch.episodes
    )
    if head == "flow":
        assert report.max_abs_diff == 0.0  # same step function, same row blocks, same keyed noise
        assert report.entries == report.replans * batch.mode.steps
    else:
        assert 0.0 <= report.max_abs_diff <= tolerance  # teacher forcing vs the KV-cached decode step


@pytest.mark.parametrize(("head", "position"), [("ar", 3), ("flow", 2)])
def test_replay_oracle_names_a_planted_mismatch(
    recorded: dict[str, Path], design: Prereg, heads: dict[str, Path], head: str, position: int
) -> None:
    tolerance = design.phase2.recipe(head).replay_atol  # type: ignore[union-attr]
    batch = _plant(
        read_batch(recorded[head], design.run_key),
        episode=1,
        replan=1,
        position=position,
        delta=10 * tolerance,
    )
    report = recompute_batch(load_head_model(str(heads[head])), batch, tolerance)
    planted = batch.episodes[1]
    mismatch = report.first_mismatch
    assert mismatch is not None
    assert (mismatch.seed, mismatch.draw, mismatch.replan, mismatch.position) == (
        planted.seed,
        planted.draw,
        1,
        position,
    )
    assert mismatch.what == ("token" if head == "ar" else "step")
    assert (
        f"seed {planted.seed}, draw {planted.draw}, replan 1, {mismatch.what} {position}" in mismatch.text()
    )


def test_flow_chain_regenerated_from_the_keys_ends_at_the_chunk_the_policy_executed(
    recorded: dict[str, Path], design: Prereg, heads: dict[str, Path]
) -> None:
    """The regenerated x_t chain is the sampler's: its end, mapped to action units, is the policy's chunk."""
    batch = read_batch(recorded["flow"], design.run_key)
    episode = batch.episodes[0]
    replan = episode.replans[0]
    model = load_head_model(str(heads["flow"]))
    key = replan.key(batch.run_key, episode.seed, episode.draw)
    chain = flow_chains(model, replan.obs[None], [key], batch.mode)
    policy = load_policy(heads["flow"])
    chunk = policy.act(replan.obs[None], [key], batch.mode).actions[0]
    low, high = policy.action_low, policy.action_high  # type: ignore[attr-defined]
    from_chain = np.clip((chain[0, -1].numpy() + 1.0) * 0.5 * (high - low) + low, -1.0, 1.0).astype(
        np.float32
    )
    np.testing.assert_array_equal(from_chain, chunk)


def _corrupt_logprob_column(table: Path, out: Path, row: int, replan: int) -> tuple[int, int]:
    data = pq.read_table(table)
    values = data.column("replan_logprob").to_pylist()
    values[row][replan] += 0.5
    index = data.schema.get_field_index("replan_logprob")
    data = data.set_column(
        index, data.schema.field(index), pa.array(values, type=data.schema.field(index).type)
    )
    pq.write_table(data, out)
    return int(data.column("seed")[row].as_py()), int(data.column("draw")[row].as_py())


def test_a_corrupted_log_prob_column_fails_the_rollouts_job_naming_the_row(
    recorded: dict[str, Path],
    design_path: Path,
    design: Prereg,
    heads: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The phase2_rollouts job replays what it recorded: iteration 0's rollouts are stood in for by a table
    with one recorded log-prob moved, and the job's oracle must refuse it, naming the row."""
    monkeypatch.chdir(tmp_path)
    corrupted = tmp_path / "corrupted.parquet"
    seed, draw = _corrupt_logprob_column(recorded["flow"], corrupted, row=2, replan=1)
    monkeypatch.setattr(rollouts, "run_iteration", lambda *args, **kwargs: pq.read_table(corrupted))
    plan = tmp_path / "plan.json"
    write_plan(
        plan_from_decision(
            design, {"outcome": {"kind": "phase2_flow", "ar_arm": None, "flow_arm": "flow_teacher"}}
        ),
        plan,
    )
    report, manifest = tmp_path / "replay_oracle.json", tmp_path / "rollouts.manifest.json"
    with pytest.raises(
        RecomputeMismatchError, match=rf"seed {seed}, draw {draw}, replan 1, replan sum: recorded"
    ) as err:
        steps.phase2_rollouts(
            design_path,
            plan,
            "flow_teacher",
            write_source(tmp_path / "source.json", "flow_teacher", heads["flow"]),
            heads["flow"],
            [],
            tmp_path / "rollouts.parquet",
            report,
            manifest,
            0,
        )
    assert "nothing is trained" in str(err.value)
    assert not report.exists(), "a failed oracle leaves no report for the trainer to start from"
    assert not manifest.exists()


def test_a_design_whose_decision_parks_trains_nothing(
    heads: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    design_path = write_design(tmp_path / "pilot.yaml")  # manifests record paths under the working folder
    decision = write_decision(tmp_path / "decision.json", "park")
    plan, phase2_dir = tmp_path / "phase2" / "plan.json", tmp_path / "phase2"
    steps.phase2_plan(design_path, decision, [], plan, tmp_path / "phase2" / "plan.manifest.json")
    source = write_source(tmp_path / "source.json", "flow_teacher", heads["flow"])
    with pytest.raises(
        ValueError,
        match=r"phase 2 does not train arm 'flow_teacher': the plan trains none \(the decision parks",
    ):
        steps.phase2_rollouts(
            design_path,
            plan,
            "flow_teacher",
            source,
            heads["flow"],
            [],
            tmp_path / "t.parquet",
            tmp_path / "r.json",
            tmp_path / "t.json",
            0,
        )
    md, record = tmp_path / "phase2.md", tmp_path / "phase2.json"
    steps.phase2_report(
        design_path, plan, decision, [tmp_path / "phase2" / "plan.manifest.json"], md, record,
        tmp_path / "phase2_figures", tmp_path / "phase2.manifest.json",
    )  # fmt: skip
    assert (
        "**Did the probe's prediction hold?** Not tested: nothing was trained, because the decision parks"
        in md.read_text()
    )
    assert sorted(p.name for p in phase2_dir.iterdir()) == ["plan.json", "plan.manifest.json"]
    assert not any(tmp_path.rglob("*.pt")) and not any(tmp_path.rglob("*.parquet"))
    assert json.loads(record.read_text())["trained"] is False
