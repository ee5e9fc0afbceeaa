"""The registered tiny validation study (prereg/studies/validation_smoke.yaml) as one Snakemake run.

Why end to end: the study's members run as modules of the same workflow (their rules prefixed with the
design's name), each to its phase-2 pilot on every arm, and the study rule reads their records. This run
shows that the module wiring, the phase-2 checkpoint inside a module and the study's manifest chain hold
together from a clean copy: the page exists, each control is judged, and ``grpo-probe study verify``
walks every member's chain back to its locked design.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

STUDY = "prereg/studies/validation_smoke.yaml"
FOLDER = Path("results/studies/validation_smoke")


def test_the_tiny_validation_study_runs_and_verifies(fresh_copy: Path, workflow_tools, grpo_probe) -> None:
    # No target: the study's page is the default one.
    proc = workflow_tools.snakemake(fresh_copy, "--cores", "2", "--config", f"study={STUDY}", timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((fresh_copy / FOLDER / "validation.json").read_text())
    roles = {m["name"]: m["role"] for m in record["members"]}
    assert roles == {"smooth_plane_smoke": "positive_control", "luck_plane_smoke": "negative_control"}
    assert len(record["rows"]) == 4 and {r["arm"] for r in record["rows"]} == {"ar", "flow_teacher"}
    assert all(
        r["pilot_verdict"] in {"held", "did not hold", "not shown", "not tested"} for r in record["rows"]
    )
    assert any(line.startswith("Positive control smooth_plane_smoke:") for line in record["controls"])
    assert any(line.startswith("Negative control luck_plane_smoke:") for line in record["controls"])
    page = (fresh_copy / FOLDER / "validation.md").read_text()
    assert page.startswith("# Does the probe predict? Study validation_smoke")
    assert (fresh_copy / FOLDER / "probe_vs_gain.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in ("smooth_plane_smoke", "luck_plane_smoke"):
        phase2 = json.loads((fresh_copy / "results" / name / "phase2.json").read_text())
        assert {s["arm"] for s in phase2["stages"]} == {"ar", "flow_teacher"}, "every arm is piloted"
        assert all(s["replay_oracle"]["passed"] for s in phase2["stages"])
    verify = grpo_probe(fresh_copy, "study", "verify", str(FOLDER / "validation.manifest.json"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "4 member chains" in verify.stdout
    assert "study verify: ok" in verify.stdout
