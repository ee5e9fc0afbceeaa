"""A one-node SLURM for the tests, and the smoke workflow run through it next to a local run.

SLURM is started only where that is safe and expected: as root on a CI machine (CI=true) or when
GRPO_PROBE_SLURM_SETUP=1; anywhere else without a running SLURM the tests skip and say how to run them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from workflow_copies import copy_repo

REPO = Path(__file__).resolve().parents[2]
START_SLURM = REPO / "tools" / "slurm" / "start-slurm.sh"
SMOKE = ["--config", "prereg=prereg/smoke.yaml"]
# A hung Snakemake ignores SIGTERM: `timeout -k` follows up with SIGKILL.
WORKFLOW_TIMEOUT = ["timeout", "-k", "10", "900"]
# Poll soon after each submission; the one-node cluster's MinJobAge (300 s) stays >= 3 x this, so the
# plugin keeps squeue as its status command.
FAST_POLLING = ["--slurm-init-seconds-before-status-checks", "2"]
READY_STATES = {"idle", "mixed", "allocated", "completing"}
HOW_TO_RUN = "run `sudo tools/slurm/start-slurm.sh`, then `pytest tests/slurm`"


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


def _may_start_slurm() -> bool:
    is_ci = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
    asked = os.environ.get("GRPO_PROBE_SLURM_SETUP") == "1"
    return os.geteuid() == 0 and (is_ci or asked)


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """A SLURM whose node on this host accepts jobs; started here only as root in CI or on request."""
    state = slurm_node_state()
    if state in READY_STATES:
        return state
    if not _may_start_slurm():
        pytest.skip(f"SLURM is not running on this machine (node state: {state}); {HOW_TO_RUN}")
    proc = subprocess.run(["bash", str(START_SLURM)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"{START_SLURM} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    state = slurm_node_state()
    if state not in READY_STATES:
        pytest.fail(f"{START_SLURM} returned but the node is {state}:\n{proc.stdout[-3000:]}")
    return state


@dataclass(frozen=True)
class SmokeRuns:
    """The same smoke workflow run in two clean copies: through profiles/slurm, and locally."""

    slurm_dir: Path
    slurm_log: str
    local_dir: Path
    local_log: str


def _snakemake_command(*args: str) -> list[str]:
    return [*WORKFLOW_TIMEOUT, sys.executable, "-m", "snakemake", *args, *SMOKE]


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
def smoke_runs(slurm_cluster: str, tmp_path_factory: pytest.TempPathFactory) -> SmokeRuns:
    """Both runs at once: the SLURM run mostly waits on polling, so the local run fits in its gaps."""
    slurm_dir = copy_repo(tmp_path_factory.mktemp("slurm") / "repo").resolve()
    local_dir = copy_repo(tmp_path_factory.mktemp("local") / "repo").resolve()
    local_log = local_dir / "snakemake.out"
    with local_log.open("w") as out:
        local = subprocess.Popen(
            _snakemake_command("--cores", "2"), cwd=local_dir, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        slurm = subprocess.run(
            _snakemake_command("--profile", "profiles/slurm", *FAST_POLLING),
            cwd=slurm_dir,
            capture_output=True,
            text=True,
        )
        local.wait(timeout=900)
    finally:
        cancel_jobs_under(slurm_dir)
        if local.poll() is None:
            local.kill()
            local.wait()
    runs = SmokeRuns(
        slurm_dir=slurm_dir,
        slurm_log=slurm.stdout + slurm.stderr,
        local_dir=local_dir,
        local_log=local_log.read_text(),
    )
    if slurm.returncode != 0:
        pytest.fail(f"smoke workflow through SLURM failed (rc {slurm.returncode}):\n{runs.slurm_log[-6000:]}")
    if local.returncode != 0:
        pytest.fail(f"local smoke workflow failed (rc {local.returncode}):\n{runs.local_log[-6000:]}")
    return runs
