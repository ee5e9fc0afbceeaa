"""The suite's tiny validation study as one Snakemake run (tests/session_runs.py writes it: the registered
prereg/studies/validation_smoke.yaml with each member's pilot cut to one iteration).

Why end to end: the study's members run as modules of the same workflow (their rules prefixed with the
design's name), each to its phase-2 pilot on every arm, and the study rule reads their records. This run
shows that the module wiring, the phase-2 checkpoint inside a module and the study's manifest chain hold
together from a clean copy: the page exists, each control is judged, and ``grpo-probe study verify``
walks every member's chain back to its locked design. The run is shared with tests/envs/test_planes.py,
which reads the luck plane's decision from it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FOLDER = Path("results/studies/validation_tiny")
MEMBERS = {"smooth_plane_tiny": "positive_control", "luck_plane_tiny": "negative_control"}


def test_the_tiny_validation_study_runs_and_verifies(study_run: Path, grpo_probe) -> None:
    # The shared run names no target: the study's page is the default one.
    run = study_run
    record = json.loads((run / FOLDER / "validation.json").read_text())
    roles = {m["name"]: m["role"] for m in record["members"]}
    assert roles == MEMBERS
    assert len(record["rows"]) == 4 and {r["arm"] for r in record["rows"]} == {"ar", "flow_teacher"}
    assert all(
        r["pilot_verdict"] in {"held", "did not hold", "not shown", "not tested"} for r in record["rows"]
    )
    assert any(line.startswith("Positive control smooth_plane_tiny:") for line in record["controls"])
    assert any(line.startswith("Negative control luck_plane_tiny:") for line in record["controls"])
    page = (run / FOLDER / "validation.md").read_text()
    assert page.startswith("# Does the probe predict? Study validation_tiny")
    # Controls never enter the correlation, and the tiny study has no subject: it answers nothing, and
    # says why, rather than ranking the two planes against each other.
    assert record["counted"] == 0 and not record["reached_size"]
    assert "Not answered: 0 counted subject arm(s)" in record["answer"]
    assert "Power: not simulated" in page
    assert all(r["engagement"] is not None and not r["counted"] for r in record["rows"])
    assert (run / FOLDER / "probe_vs_gain.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in MEMBERS:
        phase2 = json.loads((run / "results" / name / "phase2.json").read_text())
        assert {s["arm"] for s in phase2["stages"]} == {"ar", "flow_teacher"}, "every arm is piloted"
        assert all(s["replay_oracle"]["passed"] for s in phase2["stages"])
    verify = grpo_probe(run, "study", "verify", str(FOLDER / "validation.manifest.json"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "4 member chains" in verify.stdout
    assert "study verify: ok" in verify.stdout
