"""``results:`` may be any folder: the jobs write there, and the manifests verify from the workflow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.e2e
def test_results_outside_the_workflow_folder_run_and_verify(fresh_copy: Path, tmp_path: Path) -> None:
    results = tmp_path / "elsewhere" / "results"
    target = results / "smoke/demos/demos.manifest.json"
    options = ["--cores", "2", "--config", "prereg=prereg/smoke.yaml", f"results={results}"]
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", str(target), *options],
        cwd=fresh_copy, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    manifest = json.loads(target.read_text())
    assert manifest["outputs"][0]["path"] == "../elsewhere/results/smoke/demos/demos.npz"
    assert manifest["prereg_path"] == "prereg/smoke.yaml"
    verify = subprocess.run(
        [sys.executable, "-m", "grpo_probe.cli", "verify", str(target)],
        cwd=fresh_copy, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    assert "verify: ok: 2 manifests" in verify.stdout
