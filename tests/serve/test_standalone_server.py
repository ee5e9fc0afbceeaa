"""grpo-probe-serve alone, in an environment of another Python without torch, serves the in-process bytes.

The distribution (serve/pyproject.toml) is installed with numpy, websockets and msgpack only into a
fresh virtual environment of Python 3.13 or 3.12 (the first found), with no dependency resolution, so
nothing else (torch least of all) can come in. The numpy-only policy of tests/serve/numpy_policy.py is
served from there and its rows compared with the same policy's rows in this interpreter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grpo_probe.policies.protocol import RowKey, SamplingMode
from grpo_probe.policies.served import ServedPolicy
from serve.numpy_policy import NumpyFlowPolicy
from serve_processes import policy_server

REPO = Path(__file__).resolve().parents[2]
VERSIONS = ((3, 13), (3, 12))
"""Pythons the lab's side is tested on, the newest found first (one is enough for the property)."""


def _other_python() -> tuple[str, str] | tuple[None, str]:
    """An interpreter of a version in VERSIONS that runs (pyenv shims of absent versions do not)."""
    candidates: list[str] = []
    for major, minor in VERSIONS:
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
        if done.returncode == 0 and done.stdout.strip() in {str(v) for v in VERSIONS}:
            return path, done.stdout.strip()
    return None, "no Python 3.12 or 3.13 found (~/.pyenv/versions, python3.13, python3.12 on PATH)"


@pytest.fixture(scope="module")
def lab_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment of another Python with grpo-probe-serve and its three dependencies only."""
    python, found = _other_python()
    if python is None:
        pytest.skip(found)
    root = tmp_path_factory.mktemp("lab")
    # the distribution reads ../src/grpo_probe/serve: copy both, so the build writes nothing in the checkout
    shutil.copytree(
        REPO / "serve", root / "tree" / "serve", ignore=shutil.ignore_patterns("build", "*.egg-info")
    )
    shutil.copytree(REPO / "src" / "grpo_probe" / "serve", root / "tree" / "src" / "grpo_probe" / "serve")
    subprocess.run([python, "-m", "venv", str(root / "venv")], check=True, capture_output=True)
    lab = root / "venv" / "bin" / "python"
    pip = [
        str(lab),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--only-binary",
        ":all:",
    ]
    deps = subprocess.run(
        [*pip, "numpy", "websockets", "msgpack"], capture_output=True, text=True, check=False
    )
    if deps.returncode != 0:
        pytest.skip(f"the package index gave no numpy, websockets, msgpack for {found}: {deps.stderr[-500:]}")
    own = subprocess.run(
        [str(lab), "-m", "pip", "install", "--quiet", "--no-deps", str(root / "tree" / "serve")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert own.returncode == 0, own.stderr
    return lab


@pytest.mark.slow
def test_the_helper_installs_alone_and_serves_the_in_process_bytes(lab_python: Path, tmp_path: Path) -> None:
    listed = subprocess.run(
        [str(lab_python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    )
    installed = {line.split("==")[0].lower() for line in listed.stdout.split()}
    assert "torch" not in installed and "grpo-probe" not in installed
    assert {"grpo-probe-serve", "numpy", "websockets", "msgpack"} <= installed
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}  # the policy module, as a lab's own
    command = [
        str(lab_python),
        "-m",
        "grpo_probe.serve",
        "numpy_policy:make_policy",
        "--address",
        "ws://127.0.0.1:0",
    ]
    obs = np.random.default_rng(3).standard_normal((3, 17)).astype(np.float32)
    keys = [RowKey(7, seed, 2, draw) for seed, draw in ((0, 0), (0, 1), (5, 3))]
    with policy_server(command, tmp_path / "server.log", cwd=tmp_path, env=env) as address:
        served = ServedPolicy(address, timeout_s=30)
        for mode in (SamplingMode("flow_ode"), SamplingMode("flow_sde", sde_a=0.5)):
            remote, local = served.act(obs, keys, mode), NumpyFlowPolicy().act(obs, keys, mode)
            assert remote.actions.tobytes() == local.actions.tobytes()
            assert [d.logprob for d in remote.diagnostics] == [d.logprob for d in local.diagnostics]
        served.close()
    assert sys.version_info[:2] == (3, 11)  # the probe's side stays on its own Python
