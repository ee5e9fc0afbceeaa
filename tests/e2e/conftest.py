"""Fixtures of the end-to-end tests: the smoke design run once more with both arms bound, and once from an
installed wheel under a shell that asks for other kernels.

Why shared: binding the smoke run's trained checkpoints and running the design again under another
``results:`` answers two questions with one run, whether a bound arm decides as the arm trained in
place, and whether the pages are the same bytes in another folder; each took a run of its own. So does
the installed run: whether the package finds its data without the source tree, and whether the numerics
setting holds whatever kernels the shell asks for.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import session_runs


@pytest.fixture(scope="session")
def bound_run(smoke_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repo copy where the smoke design ran to decision.md with both arms bound (read only)."""
    root = session_runs.session_root(tmp_path_factory.getbasetemp())
    try:
        return session_runs.bound_smoke_run(root, smoke_run)
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def installed_run(smoke_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workflow copy without ``src/`` where the smoke design ran from an installed wheel under the
    baseline shell (tests/session_runs.py, ``installed_smoke_run``); read only."""
    root = session_runs.session_root(tmp_path_factory.getbasetemp())
    try:
        return session_runs.installed_smoke_run(root, smoke_run)
    except RuntimeError as exc:
        pytest.fail(str(exc))
