"""A wheel of the package, installed without the source tree, runs the smoke design to the same decision.

Why: the workflow's jobs import ``grpo_probe``, which reads its schemas, its decision.md template and the
boat scene as package data. An editable install would hide a lookup that walks up from the package into
the repository (``workflow/schemas``, ``reports/``), so the run this test reads builds a wheel, installs
it into a fresh virtual environment, and runs Snakemake from a copy of the workflow that has no ``src/``
(tests/installed_wheel.py; the environment reuses the project's dependencies without downloading
anything). The strong check: the installed run's decision.json holds the same bytes as the editable
run's. The same run also asks for other kernels than the shared run's shell does, for
tests/e2e/test_dispatch_levels.py (tests/session_runs.py, ``installed_smoke_run``): if only that test
fails too, the difference is the numerics setting's, not the package's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from installed_wheel import installed_environment, run

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DECISION = Path("results/smoke/decision.json")


def test_an_installed_wheel_runs_the_smoke_design_from_a_workflow_copy_without_src(
    smoke_run: Path, installed_run: Path
) -> None:
    workdir = installed_run
    assert not (workdir / "src").exists()
    venv = workdir.parent / "venv"
    where = "import grpo_probe; print(grpo_probe.__file__)"
    found = run(venv / "bin" / "python", "-c", where, cwd=workdir, env=installed_environment(venv)).strip()
    assert Path(found).resolve().is_relative_to(venv.resolve()), f"grpo_probe imported from {found}"
    for name in (DECISION, DECISION.with_suffix(".md")):
        assert (workdir / name).is_file(), name
        assert (workdir / name).read_bytes() == (smoke_run / name).read_bytes(), f"{name} differs"
