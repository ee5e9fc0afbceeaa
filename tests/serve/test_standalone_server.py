"""grpo-probe-serve alone, in an environment of another Python without torch, serves the in-process bytes.

The distribution (serve/pyproject.toml) is installed with numpy, websockets and msgpack only into a
fresh virtual environment of Python 3.13 or 3.12 (the first found), with no dependency resolution, so
nothing else (torch least of all) can come in. The numpy-only policy of tests/serve/numpy_policy.py is
served from there and its rows compared with the same policy's rows in this interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grpo_probe.policies.protocol import RowKey, SamplingMode
from grpo_probe.policies.served import ServedPolicy
from serve.numpy_policy import NumpyFlowPolicy
from serve_processes import lab_environment, policy_server


@pytest.fixture(scope="module")
def lab_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment of another Python with grpo-probe-serve and its three dependencies only."""
    lab, reason = lab_environment(tmp_path_factory.mktemp("lab"))
    if lab is None:
        pytest.skip(reason)
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


@pytest.mark.slow
def test_the_keyed_streams_import_alone_and_draw_the_in_process_bytes(lab_python: Path) -> None:
    """check-policy's fix sends a served policy to grpo_probe.keyed_rng: it imports from grpo-probe-serve
    alone (no grpo_probe/__init__.py there) and draws the bytes it draws here."""
    from grpo_probe.keyed_rng import key_seed, numpy_generator, tag

    script = (
        "import sys, grpo_probe, grpo_probe.keyed_rng as k\n"
        "assert getattr(grpo_probe, '__file__', None) is None, grpo_probe.__file__\n"
        "draws = k.numpy_generator(k.tag('lab-noise'), 7, 0, 2, 3).standard_normal(5)\n"
        "sys.stdout.write(draws.tobytes().hex())\n"
        "sys.stdout.write(' %d' % k.key_seed(7, 0, 2, 3))\n"
    )
    alone = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # not this process's package
    done = subprocess.run(
        [str(lab_python), "-c", script], capture_output=True, text=True, check=True, env=alone
    )
    draws, seed = done.stdout.split()
    assert draws == numpy_generator(tag("lab-noise"), 7, 0, 2, 3).standard_normal(5).tobytes().hex()
    assert int(seed) == key_seed(7, 0, 2, 3)
