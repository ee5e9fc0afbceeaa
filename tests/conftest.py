"""Fixtures shared across test folders: clean copies of the repository and one smoke run per session.

Why one shared run: the smoke workflow takes a minute or two on a 2-core machine, and the end-to-end,
fault, audit and SLURM tests all need a finished results tree to read, damage (in copies) or compare
against. ``workflow_copies`` (beside this file) holds the helpers; this folder goes on ``sys.path`` so
test modules and conftests import it by name.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import workflow_copies


@pytest.fixture(scope="session")
def workflow_tools() -> ModuleType:
    """Helpers to copy the repo and run Snakemake or grpo-probe in a copy (tests/workflow_copies.py)."""
    return workflow_copies


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repo copy in which the smoke workflow ran to decision.md; read only (damage a copy)."""
    try:
        return workflow_copies.shared_smoke_run(tmp_path_factory.getbasetemp())
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def run_copy(smoke_run: Path, tmp_path: Path) -> Path:
    """A private copy of the finished smoke run."""
    return workflow_copies.copy_run(smoke_run, tmp_path / "run")


@pytest.fixture
def fresh_copy(tmp_path: Path) -> Path:
    """A clean copy of the repository with no results, as a fresh clone holds it."""
    return workflow_copies.copy_repo(tmp_path / "repo")


@pytest.fixture
def workflow_only(fresh_copy: Path) -> Path:
    """The same clean copy (the fault tests' name for it)."""
    return fresh_copy


@pytest.fixture(name="snakemake")
def snakemake_fixture():
    """Run ``python -m snakemake`` in a work directory: ``snakemake(workdir, *args)``."""
    return workflow_copies.snakemake


@pytest.fixture(name="grpo_probe")
def grpo_probe_fixture():
    """Run the ``grpo-probe`` command line in a work directory: ``grpo_probe(workdir, *args)``."""
    return workflow_copies.grpo_probe
