"""Fixtures shared across test folders: clean copies of the repository and one smoke run per session.

Why one shared run: the smoke workflow takes a minute or two on a 2-core machine, and the end-to-end,
fault, audit and SLURM tests all need a finished results tree to read, damage (in copies) or compare
against. ``workflow_copies`` (beside this file) holds the copy and run helpers, ``session_runs`` the
runs a whole session shares, started in the background as soon as a collected test needs them; this
folder goes on ``sys.path`` so test modules and conftests import them by name.

Why an order: ``bin/test`` runs the suite on two pytest-xdist workers, one test file per worker at a
time (``--dist loadfile``), handed out in collection order. Files that take minutes go first, so that
no worker starts one while the other has nothing left to do, and those that do not read the smoke run
before those that do, so that no worker waits for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from grpo_probe import numerics

sys.path.insert(0, str(Path(__file__).parent))

import session_runs
import workflow_copies

# The numerics setting every job of the workflow runs under, here too, before a test imports numpy or
# torch (each reads its variable when it loads): in-process tests then compute the bytes a job would, and
# the pytest-xdist workers, started after this, inherit it.
numerics.apply(os.environ)

LONGEST_FIRST = (
    # a minute or more each, without a shared run: they run while the shared runs run in the background
    "e2e/test_vision_workflow.py",
    "e2e/test_user_code_in_dag.py",
    "e2e/test_user_sampler_workflow.py",
    "e2e/test_pusher_workflow.py",
    "envs/test_point_maze_workflow.py",
    "envs/test_reacher.py",
    "test_docs_examples.py",
    # a minute or more each, reading the shared smoke run
    "e2e/test_generated_unit_tests.py",
    "e2e/test_installed_package.py",
    "e2e/test_seed_order.py",
    "e2e/test_decision_paths.py",
    "faults/test_damaged_inputs.py",
    "faults/test_failed_forced_rerun.py",
    "audit/test_audit_rerun.py",
    "e2e/test_phase2_workflow.py",
    "e2e/test_example_adapter.py",
    "e2e/test_bring_your_own_checkpoint.py",
    "slurm/test_slurm_workflow.py",
    # reading the shared tiny study, which takes longest of the shared runs
    "study/test_study_workflow.py",
    "e2e/test_gradient_reads_workflow.py",
    "envs/test_planes.py",
)
"""Test files that take a minute or more (the slowest in ``--durations`` of a whole suite, and the
whole-design runs added since), or that wait for a shared run: first those that read none, while the
shared runs run in the background, then the smoke run's readers, longest first, then the tiny study's.
The other slow-marked files follow, then the rest, each group in collection order."""

_TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Sort files longest first (``LONGEST_FIRST``, then slow-marked ones); tests keep their order in
    a file, so module fixtures are set up once."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = item.path.relative_to(_TESTS).as_posix() if item.path.is_relative_to(_TESTS) else ""
        if name in LONGEST_FIRST:
            return (0, LONGEST_FIRST.index(name))
        return (1, 0) if item.get_closest_marker("slow") else (2, 0)

    files: dict[Path, tuple[int, int]] = {}
    for item in items:
        files[item.path] = min(files.get(item.path, (3, 0)), rank(item))
    order = {path: index for index, path in enumerate(sorted(files, key=lambda p: files[p]))}
    items.sort(key=lambda item: order[item.path])  # stable: a file's tests keep their order


@pytest.fixture(scope="session", autouse=True)
def _background_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Start the shared smoke run, the tiny study, and the SLURM set-up and run, in the background when
    any collected test reads them (the SLURM ones only when asked: tests/slurm/conftest.py)."""
    root = session_runs.session_root(tmp_path_factory.getbasetemp())
    slurm = session_runs.slurm_asked()  # the SLURM tests skip when not asked: they start nothing
    used = {
        name
        for item in request.session.items
        if slurm or item.get_closest_marker("slurm") is None
        for name in item.fixturenames
    }
    if "smoke_run" in used:
        session_runs.start_smoke_run(root)
    if "smoke_runs" in used:
        session_runs.start_slurm_run(root)
    if "study_run" in used:
        session_runs.start_study_run(root)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """An interrupted session ends the background runs it started; a finished one leaves them to end."""
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        session_runs.stop_unfinished()


_RENDER = """
from grpo_probe.envs.pusher.environment import PusherEnv
env = PusherEnv()
env.reset(0)
print(env.render("default", 8, 8).shape)
"""


@pytest.fixture(scope="session")
def headless_gl() -> None:
    """Skip, with the reason, where no headless GL context can be made (a design that renders camera
    frames needs one); tried once a session, in a fresh interpreter that renders the pusher."""
    proc = subprocess.run(
        [sys.executable, "-c", _RENDER], capture_output=True, text=True, env=dict(os.environ), timeout=120
    )
    if proc.returncode != 0:
        pytest.skip(f"no headless GL backend for camera frames: {proc.stderr.strip().splitlines()[-1]}")


@pytest.fixture(scope="session")
def workflow_tools() -> ModuleType:
    """Helpers to copy the repo and run Snakemake or grpo-probe in a copy (tests/workflow_copies.py)."""
    return workflow_copies


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repo copy in which the smoke workflow ran to decision.md; read only (damage a copy)."""
    try:
        return session_runs.shared_smoke_run(session_runs.session_root(tmp_path_factory.getbasetemp()))
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def study_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repo copy in which the suite's tiny validation study ran (tests/session_runs.py); read only."""
    try:
        return session_runs.shared_study_run(session_runs.session_root(tmp_path_factory.getbasetemp()))
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
