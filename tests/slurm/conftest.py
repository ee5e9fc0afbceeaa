"""A one-node SLURM for the tests, and the smoke workflow run through it next to a local run.

The SLURM tests run only when asked (GRPO_PROBE_SLURM=1; `.ci/run` asks), never merely because a SLURM
node happens to answer on the machine: a cluster something else started would get the test's jobs and
add minutes to the suite. When asked, they start their own one-node cluster with
tools/slurm/start-slurm.sh (as root), and refuse one that script did not configure.
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
OPT_IN = "GRPO_PROBE_SLURM"
SLURM_CONF = Path("/etc/slurm/slurm.conf")
CONF_MARKER = "# written by grpo-probe tools/slurm/start-slurm.sh"
# The entry point a user types: the configured design's decision.md at the repository root.
TARGET = ["decision.md"]
SMOKE = ["--config", "prereg=prereg/smoke.yaml"]
# A hung Snakemake ignores SIGTERM: `timeout -k` follows up with SIGKILL.
WORKFLOW_TIMEOUT = ["timeout", "-k", "10", "900"]
READY_STATES = {"idle", "mixed", "allocated", "completing"}
HOW_TO_RUN = f"set {OPT_IN}=1 and run as root (`sudo {OPT_IN}=1 .venv/bin/pytest tests/slurm`)"


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


def slurm_asked() -> bool:
    """Whether this test session asked for the SLURM tests (GRPO_PROBE_SLURM=1)."""
    return os.environ.get(OPT_IN, "").strip().lower() in {"1", "true", "yes"}


def _ours_or_none() -> None:
    """Fail rather than put jobs on a SLURM that tools/slurm/start-slurm.sh did not configure."""
    if SLURM_CONF.is_file() and CONF_MARKER not in SLURM_CONF.read_text(errors="replace"):
        pytest.fail(
            f"{SLURM_CONF} was not written by {START_SLURM.relative_to(REPO)}: the SLURM tests start "
            "their own one-node cluster and will not submit jobs to another one"
        )


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """The one-node SLURM of tools/slurm/start-slurm.sh on this host, started when the tests are asked."""
    if not slurm_asked():
        pytest.skip(f"the SLURM tests run only when asked: {HOW_TO_RUN}")
    if os.geteuid() != 0:
        pytest.fail(f"{OPT_IN}=1 asks for the SLURM tests, which start SLURM with {START_SLURM}: run as root")
    _ours_or_none()
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
    """Both runs at once, to save the suite's time; sharing the machine slows each, never its bytes."""
    slurm_dir = copy_repo(tmp_path_factory.mktemp("slurm") / "repo").resolve()
    local_dir = copy_repo(tmp_path_factory.mktemp("local") / "repo").resolve()
    local_log = local_dir / "snakemake.out"
    with local_log.open("w") as out:
        local = subprocess.Popen(
            _snakemake_command(*TARGET, "--cores", "2"), cwd=local_dir, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        slurm = subprocess.run(
            # The profile as shipped: its job groups, and its polling (5 s, which the one-node cluster's
            # MinJobAge of 300 s allows with squeue as the status command).
            _snakemake_command(*TARGET, "--profile", "profiles/slurm"),
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
