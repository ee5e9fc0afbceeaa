"""A tiny study with pilot replicates and a sampled gain, as one Snakemake run from a clean copy.

Two plane designs (the registered smoke planes with their pilot cut to one iteration of 2 seeds x K = 2
on 3 held-out seeds) pilot each arm twice (``phase2.replicates: 2``) and score the sampled policy beside
the anchor (``phase2.sampled_draws: 2``); the study registers the sampled policy's gain. The run shows the
rules hold together: each arm's second replicate trains in a job of its own, the evaluation scores both
policies of both replicates, phase2.json and the study page carry both gains with the replicates' spread,
the gains' reliability is the replicates' ICC(1,k), a replicate's job and the evaluation rerun to the
same bytes (``grpo-probe audit``), and ``grpo-probe study verify`` walks every chain, the replicates'
manifests included.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

STUDY = "prereg/studies/replicates_tiny.yaml"
MEMBERS = ("smooth_plane_smoke", "luck_plane_smoke")
PILOT = {
    "train_seeds": {"first": 2000, "count": 4},
    "eval_seeds": {"first": 3000, "count": 3},
    "iterations": 1,
    "seeds_per_iteration": 2,
    "rollouts_per_seed": 2,
    "replicates": 2,
    "sampled_draws": 2,
}


def _write_study(workdir: Path) -> None:
    from grpo_probe.prereg import lock_prereg
    from grpo_probe.prereg.extends import read_design
    from grpo_probe.study.design import lock_study

    members = []
    for design in MEMBERS:
        # the shared criteria written out (an audit's scratch copy holds the design, not prereg/rules/)
        raw = read_design(workdir / "prereg" / f"{design}.yaml")
        name = design.removesuffix("_smoke") + "_replicated"
        raw.update(name=name, amendments=[])
        raw["phase2"].update(PILOT)
        raw["phase2"]["pilot"] = "every_arm"
        path = workdir / "prereg" / f"{name}.yaml"
        path.write_text(yaml.safe_dump(raw, sort_keys=False))
        lock_prereg(path)
        cells = {"ar": "c1_ar_t1_0", "flow_teacher": "c5_teacher_sde_a0_5"}
        members.append({"design": f"prereg/{name}.yaml", "role": "subject", "cells": cells})
    study = {
        "name": "replicates_tiny",
        "description": "Does the machinery of replicates and the sampled gain run end to end?",
        "members": members,
        "predictor": "choice_std_cm",
        "reads": ["choice_std_cm", "chaos_share"],
        "gain": {"read": "progress_final_cm", "policy": "sampled"},
        "bootstrap": {"resamples": 200, "confidence": 0.9, "seed": 7, "levels": "designs_then_arms"},
        "power": {"rho": 0.6, "reliability": 0.9, "simulations": 20, "resamples": 100, "seed": 8},
    }
    (workdir / STUDY).write_text(yaml.safe_dump(study, sort_keys=False))
    with contextlib.chdir(workdir):
        lock_study(STUDY)


def test_a_study_with_replicates_and_a_sampled_gain_runs_and_verifies(
    fresh_copy: Path, snakemake, grpo_probe
) -> None:
    _write_study(fresh_copy)
    run = snakemake(fresh_copy, "--cores", "2", "--config", f"study={STUDY}", "workers=1", timeout=1500)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    folder = fresh_copy / "results" / "studies" / "replicates_tiny"
    record = json.loads((folder / "validation.json").read_text())
    assert record["study"]["gain_policy"] == "sampled"
    assert len(record["rows"]) == 4 and all(len(r["replicate_gains"]) == 2 for r in record["rows"])
    for member in ("smooth_plane_replicated", "luck_plane_replicated"):
        results = fresh_copy / "results" / member
        phase2 = json.loads((results / "phase2.json").read_text())
        for stage in phase2["stages"]:
            gains = {(g["policy"], g["read"]): g for g in stage["held_out"]["gains"]}
            assert {p for p, _ in gains} == {"anchor", "sampled"}
            sampled = gains[("sampled", "progress_final_cm")]
            assert [r["replicate"] for r in sampled["replicates"]] == [0, 1] and sampled["draws"] == 2
            row = next(r for r in record["rows"] if r["design"] == member and r["arm"] == stage["arm"])
            assert row["gain"] == sampled["gain"]
            assert (results / "phase2" / stage["arm"] / "replicate-1" / "policy.pt").is_file()
        assert (
            "**Held-out gain by policy and replicate** (2 replicate(s)" in (results / "phase2.md").read_text()
        )
    page = (folder / "validation.md").read_text()
    assert "ICC(1,k) of the one-way random-effects model" in page
    assert "## What GRPO trains and what a lab deploys" in page
    assert all(set(r["policy_gains"]) == {"anchor", "sampled"} for r in record["rows"])
    assert record["reliability"]["replicates"] == 2
    # the replicate's job and the evaluation that scores it rerun to the same bytes
    stage = Path("results/smooth_plane_replicated/phase2/flow_teacher")
    for produced, rule in (
        (stage / "replicate-1" / "policy.pt", "phase2_replicate"),
        (stage / "eval" / "sampled-final-1.parquet", "phase2_eval"),
    ):
        audit = grpo_probe(fresh_copy, "audit", str(produced), "--cores", "2")
        assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]
        assert f"(rule {rule})" in audit.stdout
        assert audit.stdout.strip().splitlines()[-1].startswith("IDENTICAL")
    verify = grpo_probe(
        fresh_copy, "study", "verify", str(folder.relative_to(fresh_copy) / "validation.manifest.json")
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "study verify: ok" in verify.stdout
