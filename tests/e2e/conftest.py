"""The workflow on prereg/smoke.yaml, run once per test session in a clean copy of the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMOKE = ["--config", "prereg=prereg/smoke.yaml"]


def copy_repo(dest: Path) -> Path:
    """Copy what a fresh clone would hold (tracked and unignored files), nothing the workflow wrote."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        src = REPO / name
        if src.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def snakemake(workdir: Path, *args: str, timeout: int = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def grpo_probe(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grpo_probe.cli", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """A clean copy of the repo in which the smoke workflow has run to decision.md."""
    workdir = copy_repo(tmp_path_factory.mktemp("smoke") / "repo")
    proc = snakemake(workdir, "--cores", "2", *SMOKE)
    if proc.returncode != 0:
        pytest.fail(f"smoke workflow failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return workdir


@pytest.fixture
def fresh_copy(tmp_path) -> Path:
    return copy_repo(tmp_path / "repo")


@pytest.fixture(name="snakemake")
def snakemake_fixture():
    """Run ``python -m snakemake`` in a work directory: ``snakemake(workdir, *args)``."""
    return snakemake


@pytest.fixture(name="grpo_probe")
def grpo_probe_fixture():
    """Run the ``grpo-probe`` command line in a work directory: ``grpo_probe(workdir, *args)``."""
    return grpo_probe
