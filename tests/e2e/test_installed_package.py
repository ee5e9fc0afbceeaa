"""A wheel of the package, installed without the source tree, runs the smoke design to the same decision.

Why: the workflow's jobs import ``grpo_probe``, which reads its schemas, its decision.md template and the
boat scene as package data. An editable install would hide a lookup that walks up from the package into
the repository (``workflow/schemas``, ``reports/``), so this test builds a wheel, installs it into a
fresh virtual environment, and runs Snakemake from a copy of the workflow that has no ``src/``. The
environment reuses the project's dependencies without downloading anything: a ``.pth`` line puts the
project environment's site-packages on ``sys.path``, and since a path added that way has its own ``.pth``
files skipped, the editable install's hook to ``src/`` stays off and ``grpo_probe`` resolves to the wheel
only. The strong check: the installed run's decision.json holds the same bytes as the editable run's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest

from grpo_probe.provenance.machine import LOCK_STAMP

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SMOKE = ["--config", "prereg=prereg/smoke.yaml"]
DECISION = Path("results/smoke/decision.json")
WORKFLOW = ("workflow", "config", "prereg", "profiles")
"""What a user copies to run the workflow against an installed package: everything but ``src/``."""
PACKAGE_SOURCE = ("pyproject.toml", "README.md", "src")
"""What building the wheel reads."""
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


def _copy(names: tuple[str, ...], source: Path, dest: Path) -> Path:
    for name in names:
        src = source / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=_SKIP)
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: int = 300) -> str:
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, f"{args}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _wheel(source: Path, out: Path) -> Path:
    """A wheel of the package sources in ``source``, built offline with the installed setuptools."""
    build = _copy(PACKAGE_SOURCE, source, out / "package-source")
    dist = out / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", dist, build, cwd=out)  # fmt: skip
    shutil.rmtree(build)  # nothing the installed package could still read
    (wheel,) = dist.glob("grpo_probe-*.whl")
    return wheel


def _environment(wheel: Path, venv: Path) -> Path:
    """A virtual environment holding ``wheel``, the project's dependencies on its path; its python."""
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=venv.parent)
    python = venv / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = _run(python, "-c", where, cwd=venv).strip()
    (Path(purelib) / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel, cwd=venv)
    # its dependencies are this environment's, installed from requirements.lock: it records the same lock
    stamp = Path(sys.prefix) / LOCK_STAMP
    if stamp.is_file():
        (venv / LOCK_STAMP).write_text(stamp.read_text(encoding="utf-8"), encoding="utf-8")
    return python


def test_an_installed_wheel_runs_the_smoke_design_from_a_workflow_copy_without_src(
    smoke_run: Path, tmp_path: Path, workflow_tools: ModuleType
) -> None:
    wheel = _wheel(workflow_tools.REPO, tmp_path)  # the sources the editable run imported
    venv = tmp_path / "venv"
    python = _environment(wheel, venv)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env |= {"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}
    env["PYTHONNOUSERSITE"] = "1"
    workdir = _copy(WORKFLOW, smoke_run, tmp_path / "workflow-copy")
    assert not (workdir / "src").exists()

    found = _run(python, "-c", "import grpo_probe; print(grpo_probe.__file__)", cwd=workdir, env=env).strip()
    assert Path(found).resolve().is_relative_to(venv.resolve()), f"grpo_probe imported from {found}"

    proc = subprocess.run(
        [str(python), "-m", "snakemake", "--cores", "2", *SMOKE],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    for name in (DECISION, DECISION.with_suffix(".md")):
        assert (workdir / name).is_file(), name
        assert (workdir / name).read_bytes() == (smoke_run / name).read_bytes(), f"{name} differs"
