"""Two Snakemake runs on one results directory: the second is refused while the first runs (its lock)."""

from __future__ import annotations

import json
import os
import signal
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
        # The first run paused (its whole session: Snakemake and the shard's job) while the second starts
        # and meets the lock: it is still running, however long the second takes to start on a loaded
        # machine, and it goes on where it stopped.
        os.killpg(first.pid, signal.SIGSTOP)
        try:
            assert first.poll() is None, "the first run finished before the second tried: nothing was tested"
            second = workflow_tools.snakemake(run_copy, target, "--cores", "2", *workflow_tools.SMOKE)
        finally:
            os.killpg(first.pid, signal.SIGCONT)
        assert second.returncode != 0
        out = second.stdout + second.stderr
        assert "LockException" in out and "Directory cannot be locked" in out

        first_out = first.communicate(timeout=600)[0]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.communicate()
    assert first.returncode == 0, first_out[-3000:]
    assert file_sha256(run_copy / f"{shard}.parquet") == recorded
    verify = workflow_tools.grpo_probe(run_copy, "verify", target)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert not locks.exists() or not any(locks.iterdir()), "the first run must release its lock"
