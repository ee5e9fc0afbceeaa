"""Pick a headless OpenGL backend for camera frames before MuJoCo is imported.

Why at import time (``grpo_probe.envs.boat`` calls it): MuJoCo reads ``MUJOCO_GL`` once, when ``mujoco`` is
first imported, and rollout workers are fresh processes. When the variable is unset and EGL is
installed (the project's setup installs Mesa's EGL, which renders on the CPU), this selects ``egl``,
so a design with cameras renders in every process without the user setting anything. A variable the
user set is kept; without EGL it stays unset, the state-vector observation needs no OpenGL, and the
first camera frame fails with a message that says what to install (:mod:`grpo_probe.envs.boat.render`).

Mesa's rasterizer (llvmpipe) rasterizes in the calling thread (``LP_NUM_THREADS=0``) unless the variable
says otherwise: a rollout worker owns one core, a 96 x 96 frame is too small to split, and handing each
frame to a rasterizer thread and waiting for it cost more than the rasterizing (0.27 against 0.37 ms per
frame, ``benchmarks/render_cost.py`` run alternately with each). The frame bytes are the same for any
thread count (same sha256 with 0, 1, 2 and 4 threads).
"""

from __future__ import annotations

import ctypes.util
import os
import sys

__all__ = ["select_headless_gl"]


def select_headless_gl() -> str | None:
    """Set ``MUJOCO_GL=egl`` when it is unset, on Linux, and libEGL is present; returns the value in use."""
    if "MUJOCO_GL" not in os.environ and sys.platform.startswith("linux") and ctypes.util.find_library("EGL"):
        os.environ["MUJOCO_GL"] = "egl"
    os.environ.setdefault("LP_NUM_THREADS", "0")
    return os.environ.get("MUJOCO_GL")
