"""Two Snakemake runs on one results directory: the second is refused while the first runs (its lock)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from grpo_probe.provenance import file_sha256

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_a_second_run_is_refused_while_the_first_holds_the_lock_and_the_first_completes(
    run_copy: Path, workflow_tools
) -> None:
    shard = workflow_tools.SHARD
    target = f"{shard}.manifest.json"
    recorded = json.loads((run_copy / target).read_text())["outputs"][0]["sha256"]
    for suffix in (".parquet", ".manifest.json"):
        (run_copy / f"{shard}{suffix}").unlink()
    # Retraining the shard's arm first keeps the first run busy for tens of seconds (training, the
    # parallel oracle and the arm's anchors come before the shard), far longer than the second needs to
    # start and meet the lock, however loaded the machine is.
    shutil.rmtree(run_copy / workflow_tools.RESULTS / "arms" / "ar")
    first = workflow_tools.start_snakemake(run_copy, target, "--cores", "2", *workflow_tools.SMOKE)
    try:
        locks = run_copy / ".snakemake" / "locks"
        deadline = time.monotonic() + 120
        while not (locks.is_dir() and any(locks.iterdir())):
            assert first.poll() is None, (
                f"the first run ended before locking:\n{first.communicate()[0][-3000:]}"
            )
            assert time.monotonic() < deadline, "the first run never took its lock"
            time.sleep(0.05)

        second = workflow_tools.snakemake(run_copy, target, "--cores", "2", *workflow_tools.SMOKE)
        assert first.poll() is None, "the first run finished before the second tried: nothing was tested"
        assert second.returncode != 0
        out = second.stdout + second.stderr
        assert "LockException" in out and "Directory cannot be locked" in out

        first_out = first.communicate(timeout=600)[0]
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate()
    assert first.returncode == 0, first_out[-3000:]
    assert file_sha256(run_copy / f"{shard}.parquet") == recorded
    verify = workflow_tools.grpo_probe(run_copy, "verify", target)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert not locks.exists() or not any(locks.iterdir()), "the first run must release its lock"
