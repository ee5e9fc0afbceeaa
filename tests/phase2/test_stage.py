"""A whole phase-2 stage through its steps: plan, rollouts, replay oracle, GRPO iterations, eval, report."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from grpo_probe.phase2 import steps
from grpo_probe.phase2.paths import StagePaths
from grpo_probe.provenance import file_sha256, read_manifest, verify_chain

from .conftest import write_decision, write_design, write_source

pytestmark = pytest.mark.slow

ARMS = {"ar": "ar", "flow": "flow_teacher"}


def run_stage(workdir: Path, head: str, checkpoint: Path) -> StagePaths:
    """Every phase-2 step of one stage in ``workdir`` (sequential rollouts); returns where things went."""
    design = write_design(workdir / "pilot.yaml")
    arm = ARMS[head]
    kind = {"ar": "phase2_ar", "flow": "phase2_flow"}[head]
    decision = write_decision(workdir / "decision.json", kind, **{f"{head}_arm": arm})
    source = write_source(workdir / "source.json", arm, checkpoint)
    root = workdir / "phase2"
    paths = StagePaths(str(root), arm, 2)
    plan, plan_manifest = root / "plan.json", root / "plan.manifest.json"
    steps.phase2_plan(design, decision, [], plan, plan_manifest)
    steps.phase2_rollouts(
        design,
        plan,
        arm,
        source,
        checkpoint,
        [plan_manifest],
        paths.rollouts(0),
        paths.first_rollouts_manifest,
        0,
    )
    steps.phase2_replay_oracle(
        design, plan, arm, source, checkpoint, paths.rollouts(0), [paths.first_rollouts_manifest],
        paths.oracle_report, paths.oracle_manifest,
    )  # fmt: skip
    steps.phase2_train(
        design, plan, arm, source, checkpoint, paths.rollouts(0),
        [paths.oracle_manifest, paths.first_rollouts_manifest], paths.metrics, paths.train_manifest, 0,
    )  # fmt: skip
    steps.phase2_eval(
        design, plan, arm, source, checkpoint, paths.final_checkpoint, [paths.train_manifest],
        paths.eval_initial, paths.eval_final, paths.eval_manifest, 0,
    )  # fmt: skip
    upstream = [plan_manifest, paths.oracle_manifest, paths.train_manifest, paths.eval_manifest]
    steps.phase2_report(
        design, plan, decision, upstream, workdir / "phase2.md", workdir / "phase2.json",
        workdir / "phase2_figures", workdir / "phase2.manifest.json",
    )  # fmt: skip
    return paths


@pytest.mark.parametrize("head", ["ar", "flow"])
def test_a_stage_trains_writes_chained_checkpoints_and_reports_the_held_out_change(
    head: str, heads: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    paths = run_stage(tmp_path, head, heads[head])
    metrics = pq.read_table(paths.metrics).to_pylist()
    assert [m["iteration"] for m in metrics] == [0, 1]
    assert all(m["updates"] > 0 for m in metrics), "every iteration kept a group and stepped the optimizer"
    assert metrics[1]["approx_kl"] > 0  # the second iteration's rollouts came from the updated policy
    for i, m in enumerate(metrics, start=1):
        assert m["checkpoint_sha256"] == file_sha256(paths.checkpoint(i))
        manifest = read_manifest(paths.iteration_manifest(i))
        assert manifest["extra"]["checkpoint_sha256"] == m["checkpoint_sha256"]
        chained = paths.iteration_manifest(i - 1) if i > 1 else paths.oracle_manifest
        assert Path(chained).relative_to(tmp_path).as_posix() in [e["path"] for e in manifest["inputs"]]
    assert file_sha256(paths.checkpoint(2)) != file_sha256(heads[head])
    record = json.loads((tmp_path / "phase2.json").read_text())
    assert record["trained"] and record["prediction"]["verdict"] in ("held", "did not hold", "not shown")
    stage = record["stages"][0]
    assert stage["replay_oracle"]["passed"] and stage["eval"]["seeds"] == 3
    assert (tmp_path / "phase2.md").read_text().startswith("# Phase 2: the GRPO pilot of smoke")
    chain = verify_chain(tmp_path / "phase2.manifest.json")  # every hash re-checked back to the design
    assert chain.prereg_path == "pilot.yaml"
    assert {paths.iteration_manifest(1), paths.iteration_manifest(2), paths.train_manifest} <= {
        str(tmp_path / m) for m in chain.manifests
    }


def test_training_a_stage_twice_writes_the_same_bytes(
    heads: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic single-threaded training: same checkpoints, rollouts and metrics, byte for byte."""
    hashes = []
    for run in ("one", "two"):
        workdir = tmp_path / run
        workdir.mkdir()
        monkeypatch.chdir(workdir)
        paths = run_stage(workdir, "flow", heads["flow"])
        files = [*paths.trained_checkpoints(), *paths.trained_rollouts(), paths.metrics, paths.eval_final]
        hashes.append([file_sha256(f) for f in files])
    assert hashes[0] == hashes[1]
