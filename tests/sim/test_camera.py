"""Optional camera frames: rendered when a GL backend exists, a clear error when it does not."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_RENDER = """
from grpo_probe.sim import BoatPushEnv
env = BoatPushEnv(camera=True)
env.reset(1)
print(env.last_frame.shape, env.last_frame.dtype, int(env.last_frame.std() > 0))
"""


def _run(gl: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _RENDER],
        capture_output=True,
        text=True,
        env={**os.environ, "MUJOCO_GL": gl},
        timeout=120,
    )


def test_camera_frame_is_an_overhead_rgb_image() -> None:
    proc = _run("egl")
    if proc.returncode != 0:
        pytest.skip(f"no EGL on this machine: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.stdout.strip() == "(96, 96, 3) uint8 1"


def test_a_missing_gl_backend_gives_a_clear_error() -> None:
    proc = _run("osmesa")
    if proc.returncode == 0:
        pytest.skip("OSMesa is installed here, so there is no missing backend to report")
    assert "MUJOCO_GL=osmesa" in proc.stderr
    assert "unset MUJOCO_GL" in proc.stderr
