"""A design that registers the gradient reads runs them end to end: the smooth plane's positive control
with ``analysis.gradient_reads: true``, to decision.md.

Per cell the gradients job reruns the probe's episodes with the recording policy (checked against the
probe shards bit for bit), differentiates the arm's log-probs and writes the sketched Gram matrix; the AR
cell and the SDE cell get a noise scale with its interval and a half-batch cosine in decision.json and in
the page's section beside the choice std, the ODE cell says why it has none, and the job run again writes
the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import workflow_copies

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DESIGN = "prereg/smooth_plane_gradients.yaml"
R = Path("results/smooth_plane_gradients")
CONFIG = ("--cores", "2", "--config", f"prereg={DESIGN}")


@pytest.fixture(scope="module")
def gradient_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean copy of the repository where the gradient design ran to decision.md."""
    workdir = workflow_copies.copy_repo(tmp_path_factory.mktemp("gradients") / "repo")
    text = (workdir / "prereg/designs/controls/smooth_plane_smoke.yaml").read_text()
    text = text.replace("name: smooth_plane_smoke", "name: smooth_plane_gradients")
    text = text.replace(
        "  operating_characteristics:", "  gradient_reads: true\n  operating_characteristics:", 1
    )
    (workdir / DESIGN).write_text(text)
    # a design derived from another, its history kept on purpose
    lock = workflow_copies.grpo_probe(workdir, "prereg", "lock", "--keep-amendments", DESIGN)
    assert lock.returncode == 0, lock.stdout + lock.stderr
    run = workflow_copies.snakemake(workdir, *CONFIG)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return workdir


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.json"))}


def test_the_gradient_reads_reach_decision_json_and_the_page(gradient_run: Path) -> None:
    decision = json.loads((gradient_run / R / "decision.json").read_text())
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
    page = (gradient_run / R / "decision.md").read_text()
    assert "## Does a GRPO step point the same way twice?" in page
    assert "- cell c1_ar_t1_0: a GRPO step needs about" in page
    assert "- cell c3_teacher_ode: not available:" in page


def test_the_gradients_job_run_again_writes_the_same_bytes(gradient_run: Path) -> None:
    folder = gradient_run / R / "gradients"
    before = _digests(folder)
    assert sorted(before) == sorted(
        f"{c}{suffix}"
        for c in ("c1_ar_t1_0", "c3_teacher_ode", "c5_teacher_sde_a0_5")
        for suffix in (".json", ".manifest.json")
    )
    again = workflow_copies.snakemake(gradient_run, *CONFIG, "--forcerun", "gradients")
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert _digests(folder) == before
