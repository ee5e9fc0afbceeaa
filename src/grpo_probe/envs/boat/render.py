"""Optional overhead camera frames, rendered offscreen on the CPU (EGL or OSMesa).

Why a separate module: the state-vector observation needs no OpenGL at all, so a machine without a GL
backend can run everything except camera frames; the scene's frame size lives here, and the renderer is
built by :func:`grpo_probe.render_setup.make_renderer` (as every camera's renderer is, in process and
served), which fails with a message that says what to install or set, instead of a segfault or an
opaque GLError.
"""

from __future__ import annotations

import mujoco

from grpo_probe import render_setup

__all__ = ["FRAME_SIZE", "make_renderer"]

FRAME_SIZE = 96


def make_renderer(
    model: mujoco.MjModel, height: int = FRAME_SIZE, width: int = FRAME_SIZE
) -> mujoco.Renderer:
    """A ``height`` x ``width`` renderer with shadows and multisampling off (scene.xml's <visual> already
    says so); built by :func:`grpo_probe.render_setup.make_renderer`, as every camera's renderer is."""
    renderer: mujoco.Renderer = render_setup.make_renderer(model, height, width)
    return renderer
