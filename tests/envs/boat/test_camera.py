"""Optional camera frames: rendered when a GL backend exists, a clear error when it does not."""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys

import pytest

from grpo_probe.envs.boat import BoatPushEnv

_RENDER = """
from grpo_probe.envs.boat import BoatPushEnv
env = BoatPushEnv(camera=True)
env.reset(1)
print(env.last_frame.shape, env.last_frame.dtype, int(env.last_frame.std() > 0))
"""


def _run(gl: str, script: str = _RENDER) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter with ``MUJOCO_GL=gl``, as if started from a clean shell.

    Without PYOPENGL_PLATFORM: importing MuJoCo here (egl, from grpo_probe.render_setup) set it in this
    process's environment, and a child that inherits ``egl`` would load PyOpenGL's EGL platform whatever
    ``gl`` says.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYOPENGL_PLATFORM"}
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**env, "MUJOCO_GL": gl},
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


_FRAMES = """
import hashlib, json
from grpo_probe.envs.boat import BoatPushEnv
env = BoatPushEnv()
out = {}
for seed in (0, 1):
    env.reset(seed)
    frame = env.render("overhead", 96, 96)
    again = env.render("overhead", 96, 96)
    assert frame.shape == (96, 96, 3) and frame.dtype.name == "uint8", (frame.shape, frame.dtype)
    assert frame.tobytes() == again.tobytes(), "two renders of one state differ"
    out[seed] = hashlib.sha256(frame.tobytes()).hexdigest()
print(json.dumps(out))
"""
_NO_BACKEND = "camera frames need an OpenGL backend"
"""The start of grpo_probe.envs.boat.render's error when no GL context can be made."""


def _frame_hashes_in_a_fresh_process() -> dict[str, str]:
    """sha256 of the overhead 96 x 96 frame at replan 0 of seeds 0 and 1, rendered by a new interpreter."""
    if ctypes.util.find_library("EGL") is None:
        pytest.skip("no libEGL on this machine (tools/gl/install-gl.sh installs Mesa's EGL)")
    proc = _run("egl", _FRAMES)
    if proc.returncode != 0 and _NO_BACKEND in proc.stderr:
        pytest.skip(
            f"libEGL is here, but no EGL context could be made: {proc.stderr.strip().splitlines()[-1]}"
        )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_overhead_frames_are_identical_across_fresh_processes_and_differ_between_seeds() -> None:
    first = _frame_hashes_in_a_fresh_process()
    second = _frame_hashes_in_a_fresh_process()
    assert first == second
    assert first["0"] != first["1"]


def test_an_unknown_camera_is_a_value_error_naming_it() -> None:
    """Checked before any renderer is built, so this needs no GL backend."""
    env = BoatPushEnv()
    env.reset(0)
    with pytest.raises(ValueError, match="'wrist'"):
        env.render("wrist", 96, 96)
