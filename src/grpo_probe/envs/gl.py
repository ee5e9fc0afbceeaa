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

:func:`make_renderer` is the one place a camera's renderer is built, for the boat scene and for any
Gymnasium MuJoCo scene alike: frames must be a pure function of the simulator state and cheap, so
shadows and multisampling are off whatever the scene's XML asks for, and a missing backend is an error
that says what to install instead of a segfault or an opaque GLError. MuJoCo is loaded by name on first
use (:func:`_mujoco`): the design layer imports this package while Snakemake parses the rules, and that
must not import MuJoCo.
"""

from __future__ import annotations

import ctypes.util
import importlib
import os
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["free_camera", "make_renderer", "select_headless_gl"]


def select_headless_gl() -> str | None:
    """Set ``MUJOCO_GL=egl`` when it is unset, on Linux, and libEGL is present; returns the value in use."""
    if "MUJOCO_GL" not in os.environ and sys.platform.startswith("linux") and ctypes.util.find_library("EGL"):
        os.environ["MUJOCO_GL"] = "egl"
    os.environ.setdefault("LP_NUM_THREADS", "0")
    return os.environ.get("MUJOCO_GL")


def make_renderer(model: Any, height: int, width: int) -> Any:
    """A ``height`` x ``width`` ``mujoco.Renderer`` of ``model`` with shadows and multisampling off.

    The model's offscreen buffer is grown to the frame size when it is smaller (Gymnasium's MuJoCo envs
    size it for their own ``render()``, the boat scene for 96 x 96). Multisampling is read once, when the
    renderer's GL context is made, so it is switched off for that moment and the model's setting restored:
    the environment's own ``render()`` is left as its authors made it. Raises ``RuntimeError`` naming the
    backend and what to install when no GL context can be made.
    """
    mujoco = _mujoco()
    backend = os.environ.get("MUJOCO_GL", "<unset>")
    model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), width)
    model.vis.global_.offheight = max(int(model.vis.global_.offheight), height)
    samples = int(model.vis.quality.offsamples)
    model.vis.quality.offsamples = 0
    try:
        renderer = mujoco.Renderer(model, height=height, width=width)
    except Exception as exc:  # MuJoCo raises several types depending on the backend that failed
        raise RuntimeError(
            f"camera frames need an OpenGL backend, and none could be created (MUJOCO_GL={backend}): {exc}. "
            "Install EGL (Debian: libegl1) or OSMesa (libosmesa6) and set MUJOCO_GL=egl or MUJOCO_GL=osmesa, "
            "or run with the state-vector observation (camera off, the default)."
        ) from exc
    finally:
        model.vis.quality.offsamples = samples
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
    return renderer


def free_camera(model: Any, config: Mapping[str, Any] | None = None) -> Any:
    """MuJoCo's default free camera of ``model`` (``mjv_defaultFreeCamera``), then ``config`` set on it.

    ``config`` takes the form of a Gymnasium MuJoCo env's ``default_camera_config`` (attribute -> value,
    arrays copied into place), as Gymnasium's viewer applies it. The pose depends on the model alone.
    """
    mujoco = _mujoco()
    camera = mujoco.MjvCamera()
    mujoco.mjv_defaultFreeCamera(model, camera)
    for key, value in (config or {}).items():
        if hasattr(value, "__len__"):
            getattr(camera, key)[:] = value
        else:
            setattr(camera, key, value)
    return camera


def _mujoco() -> Any:
    """The ``mujoco`` module, loaded by name on first use (why: see the module's docstring)."""
    return importlib.import_module("mujoco")
