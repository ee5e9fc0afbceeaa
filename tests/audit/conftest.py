"""Fixtures of the audit tests: the session's finished smoke run (shared with tests/faults) and copies."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def load_workflow_copies() -> ModuleType:
    """tests/faults/workflow_copies.py, loaded once under one name for tests/faults and tests/audit."""
    name = "grpo_probe_tests_workflow_copies"
    if name not in sys.modules:
        path = Path(__file__).parents[1] / "faults" / "workflow_copies.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


workflow_copies = load_workflow_copies()


@pytest.fixture(scope="session")
def workflow_tools() -> ModuleType:
    """Helpers to copy the repo and run Snakemake or grpo-probe in a copy (faults/workflow_copies.py)."""
    return workflow_copies


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repo copy in which the smoke workflow ran to decision.md (shared with tests/faults)."""
    try:
        return workflow_copies.shared_smoke_run(tmp_path_factory.getbasetemp())
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def run_copy(smoke_run: Path, tmp_path: Path) -> Path:
    """A private copy of the finished smoke run."""
    return workflow_copies.copy_run(smoke_run, tmp_path / "run")
