"""Policy servers started as processes for the tests: ``grpo-probe serve`` or ``python -m grpo_probe.serve``.

Why a process: a served policy runs in another interpreter; the tests prove the probe's bytes do not
change across that boundary. The server prints its address (port 0: a free port) once it listens; the
helper reads that line, so no port is guessed and none is shared between tests.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

READY_TIMEOUT_S = 120.0
"""Longest a server may take to load its policy and listen (importing torch alone takes seconds)."""


@contextlib.contextmanager
def policy_server(
    command: Sequence[str], log: Path, cwd: Path | None = None, env: dict | None = None
) -> Iterator[str]:
    """Run ``command`` (a server that prints ``serving policy at ws://...``) and yield its address; the
    server is stopped on exit. Its stderr goes to ``log``, named in the error if it never listens."""
    with log.open("wb") as stderr:
        proc = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=stderr, cwd=cwd, env=env)
    timer = threading.Timer(READY_TIMEOUT_S, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        timer.cancel()
        if not line.startswith("serving policy at "):
            proc.kill()
            proc.wait()
            raise RuntimeError(f"policy server {list(command)} did not start:\n{line}{log.read_text()}")
        yield line.removeprefix("serving policy at ").strip()
    finally:
        timer.cancel()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def serve_checkpoint(checkpoint: Path, log: Path, *extra: str) -> contextlib.AbstractContextManager[str]:
    """``grpo-probe serve`` of one of this package's checkpoints, by the project's own interpreter."""
    command = [sys.executable, "-m", "grpo_probe.cli", "serve", "--checkpoint", str(checkpoint)]
    return policy_server([*command, "--address", "ws://127.0.0.1:0", *extra], log)
