"""An arm bound to a user checkpoint through an adapter runs the same probe as the arm trained in place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SMOKE = ["--config", "prereg=prereg/smoke.yaml"]


def _bind_ar(workdir: Path, checkpoint: Path) -> Path:
    config = workdir / "byo.yaml"
    binding = {
        "source": "checkpoint",
        "path": str(checkpoint),
        "adapter": "grpo_probe.policies.checkpoint:load_policy",
    }
    config.write_text(yaml.safe_dump({"arms": {"ar": binding}}))
    return config


def test_a_bound_checkpoint_replaces_training_in_the_dag(fresh_copy: Path, tmp_path: Path, snakemake) -> None:
    checkpoint = tmp_path / "er60k.pt"
    checkpoint.write_bytes(b"placeholder bytes: a dry run never reads them")
    config = _bind_ar(fresh_copy, checkpoint)
    proc = snakemake(fresh_copy, "-n", "--configfile", str(config), *SMOKE)
    assert proc.returncode == 0, proc.stderr
    assert "rule bind_checkpoint:" in proc.stdout
    assert "results/smoke/arms/ar/policy.pt" not in proc.stdout


def test_the_probe_on_a_bound_copy_of_the_trained_arm_decides_the_same(
    smoke_run: Path, bound_run: Path
) -> None:
    """The session's bound run (tests/e2e/conftest.py) binds both arms to the smoke run's checkpoints."""
    results = bound_run / "results/elsewhere/smoke"
    source = json.loads((results / "arms/ar/source.json").read_text())
    assert source["factory"] == "grpo_probe.policies.checkpoint:load_policy"  # bound, not trained
    bound = json.loads((results / "decision.json").read_text())
    trained = json.loads((smoke_run / "results/smoke/decision.json").read_text())
    assert bound["cells"] == trained["cells"]
    assert bound["outcome"] == trained["outcome"]
