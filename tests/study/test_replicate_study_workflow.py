"""Pilot replicates and the sampled policy's gain in the suite's tiny study, one Snakemake run from a clean
copy (tests/session_runs.py: each member's pilot cut to one iteration, ``phase2.replicates: 2``,
``phase2.sampled_draws: 2``, and the study ranking the sampled policy's gain).

The run shows the rules hold together: each arm's second replicate trains in a job of its own, the
evaluation scores both policies of both replicates, phase2.json and the study page carry both gains with
the replicates' spread, a replicate's job and the evaluation rerun to the same bytes (``grpo-probe
audit``), and ``grpo-probe study verify`` walks every chain, the replicates' manifests included. The
tiny study's members are its controls, which never count, so its reliability is not the replicates'
ICC(1,k): tests/study/test_replicate_gains.py computes that one on subject arms.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from session_runs import tiny_member

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FOLDER = Path("results/studies/validation_tiny")
MEMBERS = (tiny_member("smooth_plane_smoke"), tiny_member("luck_plane_smoke"))


def test_a_study_with_replicates_and_a_sampled_gain_runs_and_verifies(study_run: Path, grpo_probe) -> None:
    record = json.loads((study_run / FOLDER / "validation.json").read_text())
    assert record["study"]["gain_policy"] == "sampled"
    assert len(record["rows"]) == 4 and all(len(r["replicate_gains"]) == 2 for r in record["rows"])
    assert all(set(r["policy_gains"]) == {"anchor", "sampled"} for r in record["rows"])
    for member in MEMBERS:
        results = study_run / "results" / member
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
    assert "## What GRPO trains and what a lab deploys" in (study_run / FOLDER / "validation.md").read_text()
    # the replicate's job and the evaluation that scores it rerun to the same bytes
    stage = Path("results") / MEMBERS[0] / "phase2" / "flow_teacher"
    for produced, rule in (
        (stage / "replicate-1" / "policy.pt", "phase2_replicate"),
        (stage / "eval" / "sampled-final-1.parquet", "phase2_eval"),
    ):
        audit = grpo_probe(study_run, "audit", str(produced), "--cores", "2")
        assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]
        assert f"(rule {rule})" in audit.stdout
        assert audit.stdout.strip().splitlines()[-1].startswith("IDENTICAL")
