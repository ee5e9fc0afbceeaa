"""A wheel of the package installed into a fresh virtual environment, and the shell another machine runs it
from: what the installed-package and dispatch-level tests share (tests/session_runs.py runs the smoke
design that way once a session).

Why no download: the environment reuses the project's dependencies. A ``.pth`` line puts the project
environment's site-packages on ``sys.path``, and since a path added that way has its own ``.pth`` files
skipped, the editable install's hook to ``src/`` stays off and ``grpo_probe`` resolves to the wheel only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path

from grpo_probe.provenance.machine import LOCK_STAMP

WORKFLOW = ("workflow", "config", "prereg", "profiles")
"""What a user copies to run the workflow against an installed package: everything but ``src/``."""
PACKAGE_SOURCE = ("pyproject.toml", "README.md", "src")
"""What building the wheel reads."""
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")

BASELINE_SHELL = {
    "ATEN_CPU_CAPABILITY": "default",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "OPENBLAS_CORETYPE": "Prescott",
    "MKL_CBWR": "AUTO",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "ARROW_USER_SIMD_LEVEL": "NONE",
}
"""A shell that asks each library of the numerics setting for another dispatch level than the setting's:
its baseline kernels (PyTorch's scalar ``default`` capability, numpy without its x86-64-v3 loops,
OpenBLAS's Prescott kernels, MKL's own choice), the opposite end from the shared smoke run's shell."""


def copy_tree(names: tuple[str, ...], source: Path, dest: Path) -> Path:
    """Copy the files and folders ``names`` of ``source`` into ``dest`` (no caches); ``dest``."""
    for name in names:
        src = source / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=_SKIP)
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def run(*args: str | Path, cwd: Path, env: Mapping[str, str] | None = None, timeout: int = 300) -> str:
    """Run a command; its stdout, or AssertionError with the end of its output."""
    proc = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"{args}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def build_wheel(source: Path, out: Path) -> Path:
    """A wheel of the package sources in ``source``, built offline with the installed setuptools."""
    build = copy_tree(PACKAGE_SOURCE, source, out / "package-source")
    dist = out / "dist"
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
        "-w", dist, build, cwd=out)  # fmt: skip
    shutil.rmtree(build)  # nothing the installed package could still read
    (wheel,) = dist.glob("grpo_probe-*.whl")
    return wheel


def make_environment(wheel: Path, venv: Path) -> Path:
    """A virtual environment holding ``wheel``, the project's dependencies on its path; its python."""
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=venv.parent)
    python = venv / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = run(python, "-c", where, cwd=venv).strip()
    (Path(purelib) / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel, cwd=venv)
    # its dependencies are this environment's, installed from requirements.lock: it records the same lock
    stamp = Path(sys.prefix) / LOCK_STAMP
    if stamp.is_file():
        (venv / LOCK_STAMP).write_text(stamp.read_text(encoding="utf-8"), encoding="utf-8")
    return python


def installed_environment(venv: Path) -> dict[str, str]:
    """This process's environment as a user of the environment ``venv`` has it: its ``bin`` first on
    ``PATH``, no ``PYTHONPATH`` or user site-packages."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env |= {"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}
    env["PYTHONNOUSERSITE"] = "1"
    return env
