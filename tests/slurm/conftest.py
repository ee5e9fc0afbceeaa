"""A one-node SLURM for the tests, and the smoke workflow run through it next to the session's local run.

The SLURM tests run only when asked (GRPO_PROBE_SLURM=1; `.ci/run` asks), never merely because a SLURM
node happens to answer on the machine: a cluster something else started would get the test's jobs and
add minutes to the suite. When asked, they start their own one-node cluster with
tools/slurm/start-slurm.sh (as root), and refuse one that script did not configure.

The cluster's set-up and the run through it are mostly waiting (package installs, job-status polls), so
they start in the background when the tests are collected (``session_runs.start_slurm_run``, from
tests/conftest.py) and the fixtures here wait for them. The local run they are compared with is the
session's shared smoke run, a clean copy of the same tree run to the same jobs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

import session_runs

SETUP_TIMEOUT_S = 600
READY_STATES = {"idle", "mixed", "allocated", "completing"}
HOW_TO_RUN = (
    f"set {session_runs.SLURM_OPT_IN}=1 and run as root "
    f"(`sudo {session_runs.SLURM_OPT_IN}=1 .venv/bin/pytest tests/slurm`)"
)


def slurm_node_state() -> str | None:
    """This host's node state as sinfo reports it, or None when SLURM is absent or not answering."""
    if shutil.which("sinfo") is None:
        return None
    try:
        proc = subprocess.run(
            ["sinfo", "--noheader", "--format", "%T", "--nodes", os.uname().nodename.split(".")[0]],
            capture_output=True,
            text=True,
            timeout=15,
        )
    except subprocess.TimeoutExpired:
        return None
    states = proc.stdout.split()
    return states[0] if proc.returncode == 0 and states else None


@pytest.fixture(scope="session")
def slurm_run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the session's SLURM run (started here if collection did not start it)."""
    if not session_runs.slurm_asked():
        pytest.skip(f"the SLURM tests run only when asked: {HOW_TO_RUN}")
    refusal = session_runs.slurm_refusal()
    if refusal is not None:
        pytest.fail(refusal)
    root = session_runs.session_root(tmp_path_factory.getbasetemp())
    session_runs.start_slurm_run(root)
    return session_runs.slurm_folder(root)


@pytest.fixture(scope="session")
def slurm_cluster(slurm_run_folder: Path) -> str:
    """The one-node SLURM of tools/slurm/start-slurm.sh on this host, started when the tests are asked."""
    script = session_runs.START_SLURM
    setup_rc = slurm_run_folder / "setup.rc"
    try:
        session_runs.wait_for_file(slurm_run_folder, setup_rc, SETUP_TIMEOUT_S)
    except RuntimeError as exc:
        pytest.fail(f"{script}: {exc}")
    setup_log = (slurm_run_folder / "setup.log").read_text(errors="replace")
    if setup_rc.read_text().strip() != "0":
        pytest.fail(f"{script} failed:\n{setup_log[-6000:]}")
    state = slurm_node_state()
    if state not in READY_STATES:
        pytest.fail(f"{script} returned but the node is {state}:\n{setup_log[-3000:]}")
    return state


@dataclass(frozen=True)
class SmokeRuns:
    """The same smoke workflow run in two clean copies: through profiles/slurm, and locally; and what
    squeue said of every job right after the SLURM run (slurmctld forgets a job 300 s after it ends)."""

    slurm_dir: Path
    slurm_log: str
    local_dir: Path
    local_log: str
    squeue: str


def cancel_jobs_under(workdir: Path) -> None:
    """Cancel any job left queued or running from workdir, so a failed run cannot hold the node."""
    proc = subprocess.run(
        ["squeue", "--noheader", "--format", "%i %Z"], capture_output=True, text=True, timeout=30
    )
    ids = [
        line.split()[0]
        for line in proc.stdout.splitlines()
        if len(line.split()) == 2 and Path(line.split()[1]) == workdir
    ]
    if ids:
        subprocess.run(["scancel", *ids], check=False, timeout=30)


@pytest.fixture(scope="session")
def smoke_runs(slurm_cluster: str, slurm_run_folder: Path, smoke_run: Path) -> SmokeRuns:
    """The SLURM run (to the root decision.md) and the session's local smoke run (its default target:
    the same jobs, and the `all` rule, which runs locally)."""
    slurm_dir = (slurm_run_folder / "repo").resolve()
    try:
        rc, _ = session_runs.wait(slurm_run_folder, session_runs.SLURM_RUN_TIMEOUT_S + 120)
    except RuntimeError as exc:
        pytest.fail(f"smoke workflow through SLURM: {exc}")
    finally:
        cancel_jobs_under(slurm_dir)
    local_log = session_runs.smoke_run_log(smoke_run)
    if not local_log.is_file():
        pytest.fail(f"{local_log}: the local smoke run's Snakemake output is missing")
    runs = SmokeRuns(
        slurm_dir=slurm_dir,
        slurm_log=(slurm_run_folder / "run.log").read_text(errors="replace"),
        local_dir=smoke_run.resolve(),
        local_log=local_log.read_text(errors="replace"),
        squeue=(slurm_run_folder / "squeue.txt").read_text(errors="replace"),
    )
    if rc != 0:
        pytest.fail(f"smoke workflow through SLURM failed (rc {rc}):\n{runs.slurm_log[-6000:]}")
    return runs
