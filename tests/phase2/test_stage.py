"""A whole phase-2 stage through its steps: plan, rollouts, replay oracle, GRPO iterations, eval, report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from grpo_probe.envs.boat.spec import boat_spec
from grpo_probe.envs.demos import collect_env_demos
from grpo_probe.envs.registry import env_spec
from grpo_probe.phase2 import pilot_jobs as steps
from grpo_probe.phase2.paths import StagePaths
from grpo_probe.policies.train import train_arm
from grpo_probe.prereg import load_prereg, lock_prereg
from grpo_probe.prereg.extends import read_design
from grpo_probe.provenance import file_sha256, read_manifest, verify_chain

from .conftest import PHASE2_SECTION, REPO, TINY, write_decision, write_design, write_source

pytestmark = pytest.mark.slow

ARMS = {"ar": "ar", "flow": "flow_teacher"}
ANCHOR_MOVES = {"ar": True, "flow": False}
"""Whether the two-iteration test pilot moves the arm's anchor past its floor (2e-3). The AR pilot changes
its greedy decodes (mean |delta a| about 0.6); the flow pilot moves its SDE sampler (KL about 0.06 nats per
step, far above its floor) but its Heun anchor by about 3e-4, so its stage is "not tested"."""


def run_stage(
    workdir: Path,
    head: str,
    checkpoint: Path,
    evaluated: Path | None = None,
    design: Path | None = None,
) -> StagePaths:
    """Every phase-2 step of one stage in ``workdir`` (sequential rollouts); returns where things went.

    ``evaluated``: the checkpoint the held-out evaluation takes as the final one (theta_N by default);
    ``design``: a locked design (the boat test design by default).
    """
    design = design or write_design(workdir / "pilot.yaml")
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
        paths.oracle_report,
        paths.first_rollouts_manifest,
        0,
    )
    steps.phase2_train(
        design, plan, arm, source, checkpoint, paths.rollouts(0),
        [paths.first_rollouts_manifest], paths.metrics, paths.train_manifest, 0,
    )  # fmt: skip
    steps.phase2_eval(
        design, plan, arm, source, checkpoint, evaluated or paths.final_checkpoint, paths.rollouts(0),
        [paths.train_manifest], paths.eval_initial, paths.eval_final, paths.eval_movement,
        paths.eval_manifest, 0,
    )  # fmt: skip
    upstream = [plan_manifest, paths.first_rollouts_manifest, paths.train_manifest, paths.eval_manifest]
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
        chained = paths.iteration_manifest(i - 1) if i > 1 else paths.first_rollouts_manifest
        assert Path(chained).relative_to(tmp_path).as_posix() in [e["path"] for e in manifest["inputs"]]
    assert file_sha256(paths.checkpoint(2)) != file_sha256(heads[head])
    record = json.loads((tmp_path / "phase2.json").read_text())
    stage = record["stages"][0]
    movement = stage["movement"]
    assert movement["kl_to_initial"] > movement["kl_floor"] and movement["sampling_moved"]
    assert movement["moved"] is ANCHOR_MOVES[head] is (movement["action_change"] >= movement["action_floor"])
    verdicts = ("held", "did not hold", "not shown") if ANCHOR_MOVES[head] else ("not tested",)
    assert record["trained"] and record["prediction"]["verdict"] in verdicts and stage["verdict"] in verdicts
    assert stage["replay_oracle"]["passed"] and stage["eval"]["seeds"] == 3
    detectable = stage["eval"]["detectable"]
    differences = (
        pq.read_table(paths.eval_final).column("progress_final_cm").to_numpy()
        - pq.read_table(paths.eval_initial).column("progress_final_cm").to_numpy()
    )  # the MDE's spread is the paired differences' (the unmoved flow anchor: all exactly 0, no MDE)
    assert detectable["seeds"] == 3 and (detectable["mde"] is None) == bool(np.ptp(differences) == 0)
    assert detectable["diff_sd"] == (np.std(differences, ddof=1) if np.ptp(differences) > 0 else 0.0)
    assert ANCHOR_MOVES[head] is (detectable["mde"] is not None)
    guards = list(boat_spec().guard_names)
    assert stage["guards"] == guards and set(metrics[0]) >= {f"{g}_rate" for g in guards}
    assert [c["read"] for c in stage["eval"]["changes"] if c["guard"]] == guards
    assert all(c["seeds"] == 3 for c in stage["eval"]["changes"])
    page = (tmp_path / "phase2.md").read_text()
    assert page.startswith("# Phase 2: the GRPO pilot of smoke")
    assert "**How far the policy moved**" in page and "**What the held-out seeds can detect**" in page
    caveat = "Here the sampling distribution moved (KL above its floor) but the anchor"
    assert (caveat in page) is not ANCHOR_MOVES[head]
    chain = verify_chain(tmp_path / "phase2.manifest.json")  # every hash re-checked back to the design
    assert chain.prereg_path == "pilot.yaml"
    assert {paths.iteration_manifest(1), paths.iteration_manifest(2), paths.train_manifest} <= {
        str(tmp_path / m) for m in chain.manifests
    }


def test_a_pilot_whose_final_policy_is_the_initial_one_is_reported_not_tested(
    heads: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run_stage(tmp_path, "flow", heads["flow"], evaluated=heads["flow"])
    record = json.loads((tmp_path / "phase2.json").read_text())
    stage = record["stages"][0]
    assert stage["movement"]["action_change"] == 0.0 and not stage["movement"]["moved"]
    assert stage["movement"]["kl_to_initial"] <= stage["movement"]["kl_floor"]
    assert stage["verdict"] == "not tested" and record["prediction"]["verdict"] == "not tested"
    assert all(c["delta"] == 0.0 for c in stage["eval"]["changes"])  # the same policy, the same episodes
    page = (tmp_path / "phase2.md").read_text()
    assert "**Did the probe's prediction hold?** Not tested. GRPO on arm flow_teacher" in page
    assert (
        "the pilot did not move the anchor, the policy the held-out evaluation runs (anchor actions" in page
    )
    assert "; KL to the initial policy" in page and "the pilot **did not move** the anchor" in page


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
        files = [
            *paths.trained_checkpoints(),
            *paths.trained_rollouts(),
            paths.metrics,
            paths.eval_final,
            paths.eval_movement,
        ]
        hashes.append([file_sha256(f) for f in files])
    assert hashes[0] == hashes[1]


PUSHER_PENALTIES = {"joint_limit": 5.0, "off_table": 10.0, "swat": 2.0}


@pytest.fixture(scope="module")
def pusher_pilot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The pusher smoke design with a phase2 section (K = 4) penalising pusher guards, and a tiny flow head
    behaviour-cloned for three steps on the pusher expert's demos."""
    root = tmp_path_factory.mktemp("pusher")
    raw = read_design(
        REPO / "prereg/designs/smoke/pusher_smoke.yaml"
    )  # its shared criteria merged in: a copy elsewhere
    raw["phase2"] = {**PHASE2_SECTION, "rollouts_per_seed": 4, "reward": {"penalties": PUSHER_PENALTIES}}
    design = root / "pusher_pilot.yaml"
    design.write_text(yaml.safe_dump(raw, sort_keys=False))
    lock_prereg(design)
    prereg = load_prereg(design)
    spec = env_spec(prereg.env)
    demos = collect_env_demos(
        prereg.env, prereg.training.demo_seeds, prereg.training.demo_noise, prereg.run_key
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_arm(
            "flow", demos, root / "flow.pt", TINY["flow"], chunk_shape=(spec.chunk_length, spec.action_dims)
        )
    finally:
        torch.set_num_threads(threads)
    return design, root / "flow.pt"


def test_a_pusher_pilot_charges_and_reports_the_pusher_guards(
    pusher_pilot: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Phase 2 on an environment that is not the boat: its guards, read from its own record columns."""
    monkeypatch.chdir(tmp_path)
    design, checkpoint = pusher_pilot
    paths = run_stage(tmp_path, "flow", checkpoint, design=design)
    guards = ["joint_limit", "off_table", "away_tail", "swat"]
    rows = pq.read_table(paths.rollouts(0)).to_pylist()
    swat = load_prereg(design).analysis.swat_speed_m_s
    expected = [
        r["progress_final_cm"]
        - 5.0 * (r["joint_limit_hits"] > 0)
        - 10.0 * r["object_off_table"]
        - 2.0 * (r["max_object_speed_m_s"] > swat)
        for r in rows
    ]
    np.testing.assert_allclose([r["reward"] for r in rows], expected, rtol=0, atol=1e-12)
    metrics = pq.read_table(paths.metrics).to_pylist()
    assert [k for k in metrics[0] if k.endswith("_rate") and k != "success_rate"] == [
        f"{g}_rate" for g in guards
    ]
    record = json.loads((tmp_path / "phase2.json").read_text())
    stage = record["stages"][0]
    assert stage["guards"] == guards
    assert [c["read"] for c in stage["eval"]["changes"] if c["guard"]] == guards
    assert record["registered"]["environment"] == "pusher"
    assert {g["name"]: g["penalty_cm"] for g in record["registered"]["guards"]} == {
        "joint_limit": 5.0,
        "off_table": 10.0,
        "away_tail": None,
        "swat": 2.0,
    }
    # the tiny flow pilot moves the SDE sampler but not the Heun anchor past its floor (see ANCHOR_MOVES)
    assert stage["movement"]["sampling_moved"] and not stage["movement"]["moved"]
    assert stage["verdict"] == "not tested"
    page = (tmp_path / "phase2.md").read_text()
    assert "reward = progress_final_cm - 5 x [joint_limit] - 10 x [off_table] - 2 x [swat]" in page
