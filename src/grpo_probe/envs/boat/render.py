"""Optional overhead camera frames, rendered offscreen on the CPU (EGL or OSMesa).

Why a separate module: the state-vector observation needs no OpenGL at all, so a machine without a GL
backend can run everything except camera frames; this is the one place that touches GL, and it fails
with a message that says what to install or set, instead of a segfault or an opaque GLError.
"""

from __future__ import annotations

import os

import mujoco

__all__ = ["FRAME_SIZE", "make_renderer"]

FRAME_SIZE = 96


def make_renderer(
    model: mujoco.MjModel, height: int = FRAME_SIZE, width: int = FRAME_SIZE
) -> mujoco.Renderer:
    """A ``height`` x ``width`` renderer with shadows and multisampling off (set in scene.xml's <visual>).

    The offscreen buffer is grown to the frame size when a design registers frames larger than the
    scene's default 96 x 96.
    """
    backend = os.environ.get("MUJOCO_GL", "<unset>")
    model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), width)
    model.vis.global_.offheight = max(int(model.vis.global_.offheight), height)
    try:
        return mujoco.Renderer(model, height=height, width=width)
    except Exception as exc:  # MuJoCo raises several types depending on the backend that failed
        raise RuntimeError(
            f"camera frames need an OpenGL backend, and none could be created (MUJOCO_GL={backend}): {exc}. "
            "Install EGL (Debian: libegl1) or OSMesa (libosmesa6) and set MUJOCO_GL=egl or MUJOCO_GL=osmesa, "
            "or run with the state-vector observation (camera off, the default)."
        ) from exc
