"""docs/lerobot.md run as written, with LeRobot's own Diffusion and ACT policies served by
``grpo-probe-serve lerobot`` and probed on PushT.

Why: the page is a lab's whole path from a LeRobot checkpoint to decision.md, and the shipped adapter is
the lab's whole LeRobot side, so both are tested against LeRobot itself, not a stand-in, and the page's
commands are the test's. Every fenced ``bash`` block of the page runs as a shell runs it (``bash -e``),
in page order, in the repository root of a fresh copy of the checkout: bin/bootstrap's ``.venv`` and
LeRobot's environment linked in as the page expects them, neither on ``PATH``; a block that starts a server
runs in the background until the page is done (a server on a port a running one holds replaces it, as
the page says); a block titled with a file name is written to that file. Nothing is changed but the
ports, which become free ones so that two runs on one machine do not collide. The checkpoints are
random-weight Diffusion and ACT folders (lerobot_checkpoints.py, LeRobot's config classes and
save_pretrained), saved where the page's serve commands read a lab's. Each runs to decision.md in its own
results folder with the parallel, draw-0 and replay oracles passing over the wire, ``check-policy`` finds
its draws keyed (ACT's latent is drawn from the key: LeRobot's z = 0 would make every draw the same), and
the page's stand-in of section 8 passes ``check-policy`` from LeRobot's environment.

Asked for only (GRPO_PROBE_LEROBOT_VENV=1; .ci/run asks): the environment is several GB. It is built
once under ~/.cache/grpo-probe/lerobot-venv (GRPO_PROBE_LEROBOT_VENV_DIR elsewhere) and kept between
runs; the page's own step 2 reinstalls grpo-probe-serve into it from the copy.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import workflow_copies
from grpo_probe.policies.protocol import RowKey, SamplingMode
from grpo_probe.policies.served import ServedPolicy
from grpo_probe.user_code import tree_sha256
from lerobot_page import ARM, REPO, Step, page_steps
from serve_processes import policy_server

OPT_IN = "GRPO_PROBE_LEROBOT_VENV"
VENV = Path(os.environ.get("GRPO_PROBE_LEROBOT_VENV_DIR", Path.home() / ".cache/grpo-probe/lerobot-venv"))
UNSERVED = ("No matching distribution found", "Could not find a version that satisfies")
"""pip's words when the package index cannot serve LeRobot's pins (the one reason to skip once asked)."""

CHECKPOINTS = {
    "diffusion": "outputs/train/diffusion_pusht/checkpoints/last/pretrained_model",
    "act": "outputs/train/act_pusht/checkpoints/last/pretrained_model",
}
"""Where the page's two servers (sections 3 and 6) read a checkpoint folder; the test saves its own there."""
RUNS = {"diffusion": "results/pusht_lerobot", "act": "results/act/pusht_lerobot"}
"""Each checkpoint's results folder, as the page's run configs (lab.yaml, lab-act.yaml) place it."""
CHECKS = ("diffusion", "act", "stand-in")
"""What each of the page's ``check-policy`` commands checks, in page order (sections 4, 6 and 8)."""
SERVER = re.compile(r"grpo-probe-serve lerobot |-m grpo_probe\.serve ")
PORT = re.compile(r"(?:--port |ws://127\.0\.0\.1:)(\d+)")
READY_S = 300.0
"""Longest a page's server may take to import LeRobot and torch and listen (on a loaded machine)."""

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get(OPT_IN) != "1",
        reason=f"LeRobot's environment is several GB: set {OPT_IN}=1 to build it and run (.ci/run does)",
    ),
]


@pytest.fixture(scope="module")
def lerobot_python() -> Path:
    """LeRobot's environment, built by the script the page gives (kept between runs)."""
    pytest.importorskip("gym_pusht", reason="gym-pusht is not installed (pip install -e '.[pusht]')")
    done = subprocess.run(
        ["bash", str(REPO / "tools" / "make_lerobot_venv.sh"), str(VENV)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode == 2 or any(words in done.stderr for words in UNSERVED):
        pytest.skip(f"LeRobot's environment cannot be built here: {done.stderr[-800:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def checkpoints(lerobot_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Random-weight Diffusion and ACT checkpoint folders, written by LeRobot's save_pretrained."""
    out = tmp_path_factory.mktemp("checkpoints")
    builder = Path(__file__).with_name("lerobot_checkpoints.py")
    done = subprocess.run(
        [str(lerobot_python), str(builder), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def _reader_environment() -> dict[str, str]:
    """This process's environment as a reader's shell has it: no pytest worker's variables, and neither
    the probe's environment nor LeRobot's activated or on PATH (the page names both by path)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "VIRTUAL_ENV"}
    venvs = {(REPO / ".venv" / "bin").resolve(), (VENV / "bin").resolve()}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() not in venvs
    )
    return env


@contextlib.contextmanager
def _servers() -> Iterator[dict[str, subprocess.Popen]]:
    """The page's running servers by port; each stopped, with everything it started, on exit."""
    running: dict[str, subprocess.Popen] = {}
    try:
        yield running
    finally:
        for proc in running.values():
            _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _start_server(text: str, workdir: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    """A page's server block started as the reader starts it in a terminal of its own; returned once it
    prints that it listens (its log is named if it never does)."""
    with log.open("wb") as stderr:
        proc = subprocess.Popen(
            ["bash", "-e", "-c", text],
            cwd=workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    timer = threading.Timer(READY_S, lambda: os.killpg(proc.pid, signal.SIGKILL))
    timer.start()
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    timer.cancel()
    if not line.startswith("serving policy at "):
        _stop(proc)
        raise AssertionError(f"the page's server did not start:\n{text}\n{line}{log.read_text()}")
    return proc


@pytest.fixture(scope="module")
def page_run(checkpoints: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every step of the page, verbatim but for the ports, in a fresh copy of the checkout."""
    root = tmp_path_factory.mktemp("page")
    workdir = workflow_copies.copy_repo(root / "repo")
    (workdir / ".venv").symlink_to(REPO / ".venv")  # what bin/bootstrap installed
    (workdir / ".venvs").mkdir(exist_ok=True)
    (workdir / ".venvs" / "lerobot").symlink_to(VENV)  # the page's step 2 finds it built
    for kind, folder in CHECKPOINTS.items():
        shutil.copytree(checkpoints / kind, workdir / folder)
    steps = page_steps()
    ports = {
        port: _free_port()
        for step in steps
        if step.language == "bash" and SERVER.search(step.text)
        for port in PORT.findall(step.text)
    }
    assert ports, "docs/lerobot.md starts no server"

    def local(text: str) -> str:
        return re.sub(rf"\b({'|'.join(ports)})\b", lambda m: ports[m[1]], text)

    env = _reader_environment()
    ran: list[tuple[Step, subprocess.CompletedProcess[str], float]] = []
    with _servers() as running:
        for i, step in enumerate(steps):
            text = local(step.text)
            if step.path is not None:
                (workdir / step.path).write_text(text)
            elif step.language != "bash":
                continue
            elif SERVER.search(text):
                for port in PORT.findall(text):  # the page's new server replaces one on its port
                    if port in running:
                        _stop(running.pop(port))
                proc = _start_server(text, workdir, env, root / f"server-{i}.log")
                running.update(dict.fromkeys(PORT.findall(text), proc))
            else:
                start = time.monotonic()
                done = subprocess.run(
                    ["bash", "-e", "-c", text],
                    cwd=workdir,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=1800,
                    check=False,
                )
                ran.append((step, done, time.monotonic() - start))
                logs = "".join(f.read_text()[-2000:] for f in sorted(root.glob("server-*.log")))
                assert done.returncode == 0, (
                    f"docs/lerobot.md, section {step.section!r}:\n{text}\n"
                    f"{done.stdout[-3000:]}{done.stderr[-3000:]}\nservers:\n{logs}"
                )
    return {"workdir": workdir, "ran": ran, "checkpoints": checkpoints}


def _snakemake_log(page_run: dict[str, Any], kind: str) -> str:
    (log,) = [
        done.stderr
        for step, done, _seconds in page_run["ran"]
        for line in step.text.splitlines()
        if line.startswith(".venv/bin/snakemake") and ("lab-act.yaml" in line) == (kind == "act")
    ]
    return log


def _checks(page_run: dict[str, Any]) -> dict[str, subprocess.CompletedProcess[str]]:
    found = [
        done for step, done, _ in page_run["ran"] for line in step.text.splitlines() if "check-policy" in line
    ]
    assert len(found) == len(CHECKS), f"docs/lerobot.md runs check-policy {len(found)} times"
    return dict(zip(CHECKS, found, strict=True))


def test_every_command_block_of_the_page_ran(page_run: dict[str, Any]) -> None:
    sections = {step.section.split(".")[0] for step, _, _ in page_run["ran"]}
    assert sections == {"2", "4", "5", "6", "8"}, sections  # 3's server runs in the background
    assert all(done.returncode == 0 for _, done, _ in page_run["ran"])


@pytest.mark.parametrize("kind", list(CHECKPOINTS))
def test_the_served_checkpoint_reaches_the_decision_with_every_oracle_passing(
    page_run: dict[str, Any], kind: str
) -> None:
    run = page_run["workdir"] / RUNS[kind]
    log = _snakemake_log(page_run, kind)
    assert "rule bind_server:" in log and "rule train:" not in log
    assert (run / "decision.md").read_text().startswith("# GRPO signal probe: decision")
    replays = sorted((run / "oracles/replay").glob("*.json"))
    assert replays, "no replay oracle report"
    for report in [*workflow_copies.oracle_reports(run), *replays]:  # parallel, draw-0 per cell, replay
        assert json.loads(report.read_text())["pass"] is True, report
    parallel = json.loads((run / "oracles/parallel.json").read_text())
    assert parallel["counts"]["frames"] > 0  # both state parts' digests, compared over the wire
    compute = json.loads((run / "compute.json").read_text())
    assert [s["cpu_s"] is not None for s in compute["servers"]] == [True]  # the server's CPU is counted
    assert compute["cpu_within_gate"] is True  # the CPU part of the gate; no GPU is measured here


@pytest.mark.parametrize("kind", list(CHECKPOINTS))
def test_the_hello_names_the_adapter_the_checkpoint_and_its_lerobot(
    page_run: dict[str, Any], kind: str
) -> None:
    source = json.loads((page_run["workdir"] / RUNS[kind] / f"arms/{ARM}/source.json").read_text())
    assert source["policy"] == "grpo_probe.serve.lerobot.adapter:LeRobotAdapter" and source["head"] == "flow"
    assert source["capabilities"]["kinds"] == ["flow_ode"]
    server = source["server"]  # the hello's metadata
    assert server["checkpoint_sha256"] == tree_sha256(page_run["checkpoints"] / kind)  # as the probe does
    assert server["lerobot_type"] == kind and server["chunk_length"] == 8
    assert server["versions"]["lerobot"].startswith("0.6.") and server["threads"] == 1
    assert server["sampler"]["name"] == {"diffusion": "DDPM", "act": "ACT latent"}[kind]


@pytest.mark.parametrize("kind", list(CHECKPOINTS))
def test_the_page_names_the_served_arm_its_checkpoint_and_its_own_sampler(
    page_run: dict[str, Any], kind: str
) -> None:
    """decision.md says what the served arm is and what its draws are (DDPM steps, ACT's latent), go or
    park, not the ODE sampler the design's mode names."""
    page = " ".join((page_run["workdir"] / RUNS[kind] / "decision.md").read_text().split())
    sha = tree_sha256(page_run["checkpoints"] / kind)[:16]
    name = {"diffusion": "DDPM", "act": "ACT latent"}[kind]
    assert (
        f"reads the served arm `{ARM}`: a LeRobot `{kind}` policy, checkpoint sha256 `{sha}`. "
        f"Its draws are its server's sampler, {name}:"
    ) in page


@pytest.mark.parametrize("kind", CHECKS)
def test_check_policy_finds_the_draws_keyed(page_run: dict[str, Any], kind: str) -> None:
    check = _checks(page_run)[kind]
    assert re.search(r"ok +flow_ode\(steps=10\): draws differ by key", check.stdout), check.stdout
    assert "key-ignored" not in check.stdout + check.stderr


@pytest.mark.parametrize("kind", ["diffusion_image", "vqbet_image"])
def test_a_camera_fed_checkpoint_reads_the_probes_camera_through_the_mapping(
    kind: str, lerobot_python: Path, checkpoints: Path, tmp_path: Path
) -> None:
    """LeRobot's single-camera key ``observation.image`` fed by the design's camera ``top``
    (``--camera top=observation.image``), over the wire, for Diffusion and VQ-BeT (whose chunk comes
    from its queues): keyed, repeatable, and the frames change the chunk."""
    command = [
        str(lerobot_python.parent / "grpo-probe-serve"),
        "lerobot",
        str(checkpoints / kind),
        "--camera",
        "top=observation.image",
        "--port",
        "0",
    ]
    rng = np.random.default_rng(0)
    obs = {
        "observation.state": rng.uniform(0, 512, (2, 2)).astype(np.float32),
        "observation.images.top": rng.integers(0, 256, (2, 48, 64, 3), dtype=np.uint8),
    }
    keys = [RowKey(13, 1000, 0, 0), RowKey(13, 1000, 0, 1)]
    mode = SamplingMode("flow_ode", steps=10)
    with policy_server(command, tmp_path / "server.log", cwd=tmp_path) as address:
        served = ServedPolicy(address, timeout_s=120)
        assert served.input_keys == ("observation.state", "observation.images.top")
        first = served.act(obs, keys, mode).actions
        assert first.shape == (2, 8, 2) and np.all(np.abs(first) <= 1.0)
        assert first.tobytes() == served.act(obs, keys, mode).actions.tobytes()
        assert first[0].tobytes() != first[1].tobytes()  # draws differ by key
        dark = {**obs, "observation.images.top": obs["observation.images.top"] // 4}
        assert served.act(dark, keys, mode).actions.tobytes() != first.tobytes()  # the frames are read
        served.close()
