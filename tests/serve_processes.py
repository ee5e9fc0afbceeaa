"""Servers started as processes for the tests: ``grpo-probe serve`` or ``python -m grpo_probe.serve``.

Why a process: a served policy or simulator runs in another interpreter; the tests prove the probe's
bytes do not change across that boundary. The server prints its address (port 0: a free port) once it
listens; the helper reads that line, so no port is guessed and none is shared between tests. A served
simulator that cannot live in the probe's environment runs from its own venv (:func:`sim_venv_python`).
"""

from __future__ import annotations

import contextlib
import os
import runpy
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

READY_TIMEOUT_S = 120.0
"""Longest a server may take to load its policy and listen (importing torch alone takes seconds)."""


@contextlib.contextmanager
def _server(
    command: Sequence[str], log: Path, what: str, cwd: Path | None = None, env: dict | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """Run ``command``, a server that prints ``serving <what> at ws://...`` once it listens, and yield
    that address and the process; the server is stopped on exit. Its stderr goes to ``log``, named in the
    error if it never listens (or gets no further than READY_TIMEOUT_S)."""
    with log.open("wb") as stderr:
        proc = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=stderr, cwd=cwd, env=env)
    timer = threading.Timer(READY_TIMEOUT_S, proc.kill)
    timer.start()
    ready = f"serving {what} at "
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        timer.cancel()
        if not line.startswith(ready):
            proc.kill()
            proc.wait()
            raise RuntimeError(f"{what} server {list(command)} did not start:\n{line}{log.read_text()}")
        yield line.removeprefix(ready).strip(), proc
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@contextlib.contextmanager
def policy_server(
    command: Sequence[str], log: Path, cwd: Path | None = None, env: dict | None = None
) -> Iterator[str]:
    """Run ``command`` (a server that prints ``serving policy at ws://...``) and yield its address; the
    server is stopped on exit. Its stderr goes to ``log``, named in the error if it never listens."""
    with _server(command, log, "policy", cwd, env) as (address, _):
        yield address


def serve_checkpoint(checkpoint: Path, log: Path, *extra: str) -> contextlib.AbstractContextManager[str]:
    """``grpo-probe serve`` of one of this package's checkpoints, by the project's own interpreter."""
    command = [sys.executable, "-m", "grpo_probe.cli", "serve", "--checkpoint", str(checkpoint)]
    return policy_server([*command, "--address", "ws://127.0.0.1:0", *extra], log)


OTHER_VERSIONS = ((3, 13), (3, 12))
"""Pythons the lab's side is tested on, the newest found first (one is enough for the property)."""


def other_python() -> tuple[str, str] | tuple[None, str]:
    """An interpreter of a version in OTHER_VERSIONS that runs (pyenv shims of absent versions do not),
    with its version; or None and why none was found."""
    candidates: list[str] = []
    for major, minor in OTHER_VERSIONS:
        candidates += sorted(
            str(p) for p in (Path.home() / ".pyenv/versions").glob(f"{major}.{minor}.*/bin/python")
        )
        candidates += [p for p in (shutil.which(f"python{major}.{minor}"),) if p]
    for path in candidates:
        done = subprocess.run(
            [path, "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 0 and done.stdout.strip() in {str(v) for v in OTHER_VERSIONS}:
            return path, done.stdout.strip()
    return None, "no Python 3.12 or 3.13 found (~/.pyenv/versions, python3.13, python3.12 on PATH)"


SERVE_SOURCES = tuple(runpy.run_path(str(REPO / "tools" / "serve_sources.py"))["serve_sources"](REPO))
"""What serve/pyproject.toml packages, beside serve/ itself (tools/serve_sources.py reads it): the served
package, the keyed streams and the camera set-up."""


def copy_serve_sources(tree: Path) -> Path:
    """serve/ and the sources it packages, copied under ``tree`` (so a build writes nothing in the
    checkout); the copy's serve/ folder, ready for ``pip install`` or ``pip wheel``."""
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(REPO / "serve", tree / "serve", ignore=ignore)
    for source in SERVE_SOURCES:
        if (REPO / source).is_dir():
            shutil.copytree(REPO / source, tree / source, ignore=ignore)
        else:
            (tree / source).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / source, tree / source)
    return tree / "serve"


def lab_environment(root: Path) -> tuple[Path | None, str]:
    """A virtual environment of another Python under ``root`` with grpo-probe-serve and its three
    dependencies only (no dependency resolution, so torch cannot come in): its python and its version,
    or None and why it could not be made (no such interpreter, or no wheels for it)."""
    python, found = other_python()
    if python is None:
        return None, found
    copy_serve_sources(root / "tree")
    subprocess.run([python, "-m", "venv", str(root / "venv")], check=True, capture_output=True)
    lab = root / "venv" / "bin" / "python"
    pip = [str(lab), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    deps = subprocess.run(
        [*pip, "--only-binary", ":all:", "numpy", "websockets", "msgpack"],
        capture_output=True,
        text=True,
        check=False,
    )
    if deps.returncode != 0:
        return None, f"the package index gave no numpy, websockets, msgpack for {found}: {deps.stderr[-500:]}"
    own = subprocess.run(
        [*pip, "--no-deps", str(root / "tree" / "serve")], capture_output=True, text=True, check=False
    )
    if own.returncode != 0:
        raise RuntimeError(f"grpo-probe-serve did not install under {found}: {own.stderr}")
    return lab, found


SIM_VENV_VARIABLE = "GRPO_PROBE_SIM_VENV"
"""Set to 1 (as `.ci/run` does) to build the simulators' own venvs and run the tests that serve from them."""


def sim_venv_python(simulator: str) -> str:
    """The python of ``simulator``'s own venv (``tools/make_sim_venv.sh SIMULATOR``: built on first use,
    then reused from .venvs/), for a module fixture; a skip with the reason unless SIM_VENV_VARIABLE is 1,
    since the first build downloads the simulator, its MuJoCo and Gymnasium from the package index."""
    if os.environ.get(SIM_VENV_VARIABLE) != "1":
        pytest.skip(
            f"the served-simulator tests run when asked: {SIM_VENV_VARIABLE}=1 (builds {simulator}'s own "
            f"venv with tools/make_sim_venv.sh {simulator})"
        )
    proc = subprocess.run(
        ["bash", str(REPO / "tools/make_sim_venv.sh"), simulator],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


@contextlib.contextmanager
def env_server_process(
    python: str | Path,
    factory: str,
    log: Path,
    *,
    scene: str | None = None,
    extra_path: Sequence[Path] = (),
    port: int = 0,
) -> Iterator[tuple[str, subprocess.Popen]]:
    """``python -m grpo_probe.serve env FACTORY`` on ``port`` (0: a free one) by ``python`` (the project's
    or a simulator's own); yields its address and process (a test may kill it), stopped on exit.
    ``extra_path`` goes on the server's ``PYTHONPATH`` (where a scene module of the tests lies)."""
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join([*map(str, extra_path), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
    command = [str(python), "-m", "grpo_probe.serve", "env", factory, "--port", str(port)]
    if scene is not None:
        command += ["--scene", scene]
    with _server(command, log, "environment", env=env) as served:
        yield served
