"""The one function every pilot stage trains by (:func:`grpo_probe.phase2.stage.train_stage`).

Replicate 0 run by it in a work folder, iteration 0's rollouts included, is the stage's own pilot (the
``phase2_rollouts`` and ``phase2_train`` jobs) byte for byte: the same rollouts, the same theta_1..theta_N
and the same metrics, so a replicate or a calibration candidate differs from the pilot by its seeds or its
design alone. The work folder is emptied before a stage and removed after it, and kept when it fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.phase2.stage import train_stage, work_folder, write_stage_metrics
from grpo_probe.provenance import file_sha256

from .conftest import run_pilot, write_design

pytestmark = pytest.mark.slow

ARM = "ar"


def test_replicate_zero_in_a_work_folder_is_the_pilot_byte_for_byte(
    heads: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    design = write_design(tmp_path / "pilot.yaml")
    checkpoint = heads["ar"]
    run = run_pilot(design, ARM, checkpoint, tmp_path)
    prereg, paths = run.prereg, run.paths
    assert prereg.phase2 is not None
    n = prereg.phase2.iterations

    read: list[int] = []
    updated: list[int] = []
    stale = tmp_path / "work" / "left-by-an-earlier-run"
    stale.parent.mkdir()
    stale.write_text("x")
    with work_folder(tmp_path / "work") as files:
        assert not stale.exists(), "a stage starts from an empty work folder"
        rows = train_stage(
            prereg,
            ARM,
            checkpoint,
            files,
            on_batch=lambda _policy, batch: read.append(batch.iteration),
            on_iteration=lambda _policy, i, _row, _report: updated.append(i),
        )
        for i in range(n):
            assert file_sha256(files.rollouts(i)) == file_sha256(paths.rollouts(i)), f"rollouts {i}"
            assert file_sha256(files.checkpoint(i + 1)) == file_sha256(paths.checkpoint(i + 1)), (
                f"theta {i + 1}"
            )
    assert not (tmp_path / "work").exists(), "the work folder is removed once the stage completes"
    assert read == updated == list(range(n))
    write_stage_metrics(prereg, rows, tmp_path / "metrics.parquet")
    assert file_sha256(tmp_path / "metrics.parquet") == file_sha256(paths.metrics)


def test_a_stage_that_fails_leaves_its_work_folder(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="an update failed"), work_folder(tmp_path / "work") as files:
        files.checkpoint(1).write_bytes(b"theta_1")
        raise RuntimeError("an update failed")
    assert (tmp_path / "work" / "theta-1.pt").read_bytes() == b"theta_1"
