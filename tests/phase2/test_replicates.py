"""A stage with pilot replicates and the sampled policy's held-out score, through its steps.

Replicate 1 trains from the same theta_0 on its own block of training seeds; the evaluation scores the
initial policy and both replicates' final ones by the anchor and by the sampler (two keyed draws a seed);
phase2.json's ``held_out`` block holds both policies' gains, each the mean of the two replicates with the
spread between them, and replicate 0's anchor gain is the stage's own held-out change.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from grpo_probe.phase2 import pilot_jobs as steps
from grpo_probe.phase2.paths import stage_paths
from grpo_probe.phase2.replicate_jobs import phase2_replicate
from grpo_probe.prereg import load_prereg
from grpo_probe.prereg.phase2 import Phase2Error
from grpo_probe.provenance import file_sha256, read_manifest, verify_chain

from .conftest import run_pilot, write_design

pytestmark = pytest.mark.slow

ARM = "ar"


def test_replicates_train_on_their_own_seeds_and_both_policies_are_scored(
    heads: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    design = write_design(
        tmp_path / "pilot.yaml", train_seeds={"first": 2000, "count": 8}, replicates=2, sampled_draws=2
    )
    prereg = load_prereg(design)
    assert prereg.phase2 is not None
    assert prereg.phase2.iteration_seeds(0, 1) == (2004, 2005)
    assert prereg.phase2.iteration_seeds(1, 0) == (2002, 2003)  # replicate 0: the seeds it always had
    checkpoint = heads["ar"]
    run = run_pilot(design, ARM, checkpoint, tmp_path)
    decision, source, plan, plan_manifest, paths = (
        run.decision,
        run.source,
        run.plan,
        run.plan_manifest,
        run.paths,
    )
    phase2_replicate(
        design, plan, ARM, 1, source, checkpoint, [plan_manifest],
        paths.replicate_final(1), paths.replicate_metrics(1), paths.replicate_manifest(1), 0,
    )  # fmt: skip
    again = tmp_path / "again"
    phase2_replicate(
        design, plan, ARM, 1, source, checkpoint, [plan_manifest],
        again / "policy.pt", again / "metrics.parquet", again / "train.manifest.json", 0,
    )  # fmt: skip
    kept = {"policy.pt": paths.replicate_final(1), "metrics.parquet": paths.replicate_metrics(1)}
    for name, path in kept.items():
        assert file_sha256(again / name) == file_sha256(path), f"a replicate's {name} must be byte-identical"
    with pytest.raises(ValueError, match="no replicate 2"):
        phase2_replicate(
            design, plan, ARM, 2, source, checkpoint, [plan_manifest],
            tmp_path / "x.pt", tmp_path / "x.parquet", tmp_path / "x.json", 0,
        )  # fmt: skip
    steps.phase2_eval(
        design, plan, ARM, source, checkpoint, paths.final_checkpoint, paths.rollouts(0),
        [paths.train_manifest], paths.eval_initial, paths.eval_final, paths.eval_movement,
        paths.eval_manifest, 0,
    )  # fmt: skip
    upstream = [plan_manifest, paths.first_rollouts_manifest, paths.train_manifest, paths.eval_manifest]
    steps.phase2_report(
        design, plan, decision, upstream, tmp_path / "phase2.md", tmp_path / "phase2.json",
        tmp_path / "phase2_figures", tmp_path / "phase2.manifest.json",
    )  # fmt: skip

    replicate = read_manifest(paths.replicate_manifest(1))["extra"]
    assert replicate["first_train_seed"] == 2004
    assert (
        replicate["final_checkpoint_sha256"]
        != pq.read_table(paths.metrics).column("checkpoint_sha256").to_pylist()[-1]
    ), "replicate 1 trained on other spawns, so it ends elsewhere"
    sampled = pq.read_table(paths.eval_table("sampled", "final-1")).to_pydict()
    assert len(sampled["seed"]) == 3 * 2 and sorted(set(sampled["draw"])) == [0, 1]

    record = json.loads((tmp_path / "phase2.json").read_text())
    stage = record["stages"][0]
    assert record["registered"]["replicates"] == 2 and record["registered"]["sampled_draws"] == 2
    held = stage["held_out"]
    assert held["replicates"] == 2
    gains = {(g["policy"], g["read"]): g for g in held["gains"]}
    assert {p for p, _ in gains} == {"anchor", "sampled"}
    anchor = gains[("anchor", "progress_final_cm")]
    change = next(c for c in stage["eval"]["changes"] if c["read"] == "progress_final_cm")
    assert anchor["replicates"][0]["gain"] == pytest.approx(change["delta"], abs=1e-12)
    for g in held["gains"]:
        each = [r["gain"] for r in g["replicates"]]
        assert [r["replicate"] for r in g["replicates"]] == [0, 1]
        assert g["gain"] == pytest.approx(np.mean(each))
        assert g["replicate_sd"] == pytest.approx(np.std(each, ddof=1))
        assert g["se"] == pytest.approx(g["replicate_sd"] / np.sqrt(2))
    sampled_gain = gains[("sampled", "progress_final_cm")]
    initial = pq.read_table(paths.eval_table("sampled", "initial")).to_pydict()
    final = pq.read_table(paths.eval_table("sampled", "final-0")).to_pydict()
    expected = np.mean(final["progress_final_cm"]) - np.mean(initial["progress_final_cm"])
    assert sampled_gain["replicates"][0]["gain"] == pytest.approx(expected)
    page = (tmp_path / "phase2.md").read_text()
    assert "**Held-out gain by policy and replicate** (2 replicate(s)" in page
    assert "sampled policy (the phase-2 sampler: what GRPO trains)" in page
    chain = verify_chain(tmp_path / "phase2.manifest.json")
    assert str(tmp_path / paths.replicate_manifest(1)) in {str(tmp_path / m) for m in chain.manifests}


def test_a_design_with_replicates_needs_a_block_of_training_seeds_per_replicate(tmp_path: Path) -> None:
    with pytest.raises(Phase2Error, match=r"replicates x iterations x seeds_per_iteration = 2 x 2 x 2 = 8"):
        write_design(tmp_path / "pilot.yaml", replicates=2)


def test_a_design_without_the_new_fields_keeps_its_paths_and_record_fields(design_path: Path) -> None:
    prereg = load_prereg(design_path)
    assert prereg.phase2 is not None
    assert (prereg.phase2.replicates, prereg.phase2.sampled_draws) == (1, None)
    paths = stage_paths(prereg.phase2, "phase2", ARM)
    assert paths.extra_eval_tables() == {} and paths.replicate_finals() == {}
    assert paths.eval_table("anchor", "final-0") == paths.eval_final


def test_the_estimate_prices_every_replicate_and_the_sampled_score(tmp_path: Path) -> None:
    from grpo_probe.compute.accounting import estimate_phase2

    prereg = load_prereg(
        write_design(
            tmp_path / "pilot.yaml", train_seeds={"first": 2000, "count": 8}, replicates=2, sampled_draws=2
        )
    )
    bench = tmp_path / "benchmarks" / "phase2_train"
    bench.mkdir(parents=True)
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    (bench / "flow_teacher.tsv").write_text(header + "5.0\t0:00:05\t1.0\t1\t1\t1\t0\t0\t50\t42.0\n")
    priced = estimate_phase2(prereg, 0.5, tmp_path / "benchmarks")
    assert priced is not None
    flow = priced["heads"]["flow"]
    # 2 replicates x 2 iterations x 2 seeds x K = 2; initial + 2 finals x 3 seeds x (anchor + 2 draws)
    assert (flow["train_episodes"], flow["eval_episodes"]) == (16, 27)
    assert flow["rollout_cpu_s"] == pytest.approx((16 + 27) * 0.5)
    assert flow["update_cpu_s"] == pytest.approx(2 * 42.0)
