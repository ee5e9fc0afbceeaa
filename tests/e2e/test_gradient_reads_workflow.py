"""A design that registers the gradient reads runs them end to end: the smooth plane's positive control
with ``analysis.gradient_reads: true``, to decision.md.

Per cell the gradients job reruns the probe's episodes with the recording policy (checked against the
probe shards bit for bit), differentiates the arm's log-probs and writes the sketched Gram matrix; the AR
cell and the SDE cell get a noise scale with its interval and a half-batch cosine in decision.json and in
the page's section beside the choice std, the ODE cell says why it has none, and the job run again writes
the same bytes.

Why from the shared tiny study: its positive control is the registered smooth plane with the gradient
reads registered (tests/session_runs.py, ``GRADIENT_MEMBER``), run to decision.md as a module of the
study's workflow, so the reads cost three jobs there instead of a whole run of the design here. The rerun
works on a copy of that run, through the study's own configuration.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import workflow_copies
from session_runs import GRADIENT_MEMBER, TINY_STUDY, tiny_member

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MEMBER = tiny_member(GRADIENT_MEMBER)
R = Path("results") / MEMBER
CELLS = ("c1_ar_t1_0", "c3_teacher_ode", "c5_teacher_sde_a0_5")


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.json"))}


def test_the_gradient_reads_reach_decision_json_and_the_page(study_run: Path) -> None:
    decision = json.loads((study_run / R / "decision.json").read_text())
    assert decision["analysis"]["gradient_reads"] is True
    cells = {c["id"]: c for c in decision["cells"]}
    for cell in ("c1_ar_t1_0", "c5_teacher_sde_a0_5"):
        reads, gradient = cells[cell]["reads"], cells[cell]["gradient"]
        assert gradient["available"] and gradient["rerun_rows_compared"] == 16
        assert gradient["max_abs_logprob_diff_nats"] < 1e-3  # phase 2's recomputation of the recorded ones
        assert reads["gradient_noise_scale"] is not None and reads["gradient_noise_scale"] > 0
        assert reads["gradient_noise_scale_ci_low"] is not None
        assert -1.0 <= reads["gradient_half_cosine"] <= 1.0
    ode = cells["c3_teacher_ode"]
    assert not ode["gradient"]["available"] and ode["reads"]["gradient_noise_scale"] is None
    assert ode["gradient"]["reason"].startswith(
        "not available: the flow_ode sampler has no per-step log-prob"
    )
    page = (study_run / R / "decision.md").read_text()
    assert "## Does a GRPO step point the same way twice?" in page
    assert "- cell c1_ar_t1_0: a GRPO step needs about" in page
    assert "- cell c3_teacher_ode: not available:" in page


def test_the_gradients_job_run_again_writes_the_same_bytes(study_run: Path, tmp_path: Path) -> None:
    run = workflow_copies.copy_run(study_run, tmp_path / "run")
    folder = run / R / "gradients"
    before = _digests(folder)
    assert sorted(before) == sorted(f"{c}{suffix}" for c in CELLS for suffix in (".json", ".manifest.json"))
    again = workflow_copies.snakemake(
        run,
        *(str(R / "gradients" / f"{c}.json") for c in CELLS),
        "--cores",
        "2",
        "--forcerun",
        f"{MEMBER}_gradients",
        "--config",
        f"study={TINY_STUDY}",
        "workers=1",
    )
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert (again.stdout + again.stderr).count(f"rule {MEMBER}_gradients:") == len(CELLS)
    assert _digests(folder) == before
