"""A rollout job killed with SIGKILL mid-run leaves nothing Snakemake or verify accepts; the rerun matches."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from grpo_probe.provenance import file_sha256

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _has_torch(pid: int) -> bool:
    """Whether the process has mapped libtorch (it is building the policy or running episodes)."""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text(errors="replace")
    except OSError:
        return False


def _rollouts_running(proc: subprocess.Popen[str], workflow_tools, timeout: float = 120) -> dict[int, str]:
    """Wait until the probe job's script has loaded torch; its processes, rollout workers included.

    The smoke's shard (2 seeds x K = 2) is one task of lockstep envs, which the job runs in its own
    process (``rollout.run_in_process``): from the moment torch is loaded until the table is written it
    is importing torch, building the policy or running episodes, seconds in all. A larger shard also
    runs on worker processes, which are returned too.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"snakemake ended before the rollouts started:\n{proc.communicate()[0][-3000:]}")
        running = workflow_tools.session_processes(proc.pid)
        script = {pid: cmd for pid, cmd in running.items() if "probe.py" in cmd}
        workers = {pid: cmd for pid, cmd in running.items() if "multiprocessing.spawn" in cmd}
        if script and any(_has_torch(pid) for pid in script):
            return {**script, **workers}
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail("the probe job never loaded torch")


def _start_shard(run: Path, workflow_tools) -> tuple[subprocess.Popen[str], str]:
    """Delete the first probe shard, start the run that remakes it; returns the run and recorded sha256."""
    shard = workflow_tools.SHARD
    recorded = json.loads((run / f"{shard}.manifest.json").read_text())["outputs"][0]["sha256"]
    for suffix in (".parquet", ".manifest.json"):
        (run / f"{shard}{suffix}").unlink()
    return workflow_tools.start_snakemake(
        run, f"{shard}.manifest.json", "--cores", "2", *workflow_tools.SMOKE
    ), recorded


def _no_shard_files(run: Path, shard: Path) -> list[str]:
    folder = run / shard.parent
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _assert_rerun_matches(run: Path, workflow_tools, recorded: str) -> None:
    shard = workflow_tools.SHARD
    proc = workflow_tools.snakemake(run, f"{shard}.manifest.json", "--cores", "2", *workflow_tools.SMOKE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert file_sha256(run / f"{shard}.parquet") == recorded
    verify = workflow_tools.grpo_probe(run, "verify", f"{shard}.manifest.json")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_killed_probe_job_leaves_no_output_and_its_rerun_writes_the_same_bytes(
    run_copy: Path, workflow_tools
) -> None:
    """The job's processes die (an OOM kill, a cluster preemption); Snakemake itself survives."""
    shard = workflow_tools.SHARD
    proc, recorded = _start_shard(run_copy, workflow_tools)
    for pid in _rollouts_running(proc, workflow_tools):
        os.kill(pid, signal.SIGKILL)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode != 0
    assert "SIGKILL" in out and "Error in rule probe" in out
    assert _no_shard_files(run_copy, shard) == [], "no table, manifest or temporary file may survive"

    verify = workflow_tools.grpo_probe(run_copy, "verify", "results/smoke/join/c1_ar_t1_0.manifest.json")
    assert verify.returncode == 1
    assert f"{shard}.manifest.json" in verify.stderr and "missing" in verify.stderr
    dry = workflow_tools.snakemake(run_copy, f"{shard}.manifest.json", "-n", *workflow_tools.SMOKE)
    assert dry.returncode == 0, dry.stderr
    assert f"reason: Missing output files: {shard}" in dry.stdout, "Snakemake must schedule the job again"
    _assert_rerun_matches(run_copy, workflow_tools, recorded)


def test_killed_run_is_marked_incomplete_and_reruns_after_unlock_with_the_same_bytes(
    run_copy: Path, workflow_tools
) -> None:
    """Snakemake and the job die together (a lost node): the outputs are marked incomplete, the lock stays."""
    shard = workflow_tools.SHARD
    proc, recorded = _start_shard(run_copy, workflow_tools)
    _rollouts_running(proc, workflow_tools)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert _no_shard_files(run_copy, shard) == []
    incomplete = {
        base64.b64decode(p.name).decode() for p in (run_copy / ".snakemake" / "incomplete").iterdir()
    }
    assert {f"{shard}.parquet", f"{shard}.manifest.json"} <= incomplete

    refused = workflow_tools.snakemake(
        run_copy, f"{shard}.manifest.json", "--cores", "2", *workflow_tools.SMOKE
    )
    assert refused.returncode != 0
    assert "LockException" in refused.stdout + refused.stderr
    unlock = workflow_tools.snakemake(run_copy, "--unlock", *workflow_tools.SMOKE)
    assert unlock.returncode == 0, unlock.stderr
    _assert_rerun_matches(run_copy, workflow_tools, recorded)
