"""How a MuJoCo camera frame is set up, in the probe's process and in the environment server alike.

Why one module, at the bottom of the package: the probe draws a Gymnasium environment's cameras in its
own process (:mod:`grpo_probe.envs.gym_adapter`, the boat scene too) and the environment server draws a
served one's in its process (:mod:`grpo_probe.serve.env_cameras`), and the two must give the same bytes
(tests/envs/test_served_env_cameras.py). The server ships as grpo-probe-serve without
``grpo_probe.envs`` (serve/pyproject.toml), so what both do lives here, shipped with it as
``grpo_probe.keyed_rng`` is: the backend choice, the renderer, the free camera, where the model is, the
camera names, and the checks of a scene function's own cameras and frames.

Standard library only at import: ``grpo_probe.envs`` calls :func:`select_headless_gl` when it is
imported, which ``grpo-probe sim --help`` does, and the design layer imports that package while Snakemake
parses the rules; neither may import MuJoCo or NumPy. MuJoCo is loaded by name on first use
(:func:`_mujoco`), NumPy where a scene's frame is checked (by then the caller holds an array); the server
must import without MuJoCo too (the ``serve-stands-alone`` contract).

Why at import time: MuJoCo (and dm_control) read ``MUJOCO_GL`` once, when ``mujoco`` is first imported,
and rollout workers and the server's environments are fresh processes. When the variable is unset and
EGL is installed (the project's setup installs Mesa's EGL, which renders on the CPU), ``egl`` is
selected, so a design with cameras renders in every process without the user setting anything. A
variable the user set is kept; without EGL it stays unset, the state-vector observation needs no
OpenGL, and the first camera frame fails with a message that says what to install.

Mesa's rasterizer (llvmpipe) rasterizes in the calling thread (``LP_NUM_THREADS=0``) unless the variable
says otherwise: a rollout worker owns one core, a 96 x 96 frame is too small to split, and handing each
frame to a rasterizer thread and waiting for it cost more than the rasterizing (0.27 against 0.37 ms per
frame, ``benchmarks/render_cost.py`` run alternately with each). The frame bytes are the same for any
thread count (same sha256 with 0, 1, 2 and 4 threads).

:func:`make_renderer` is the one place a camera's renderer is built: frames must be a pure function of
the simulator state and cheap, so shadows and multisampling are off whatever the scene's XML asks for,
and a missing backend is an error that says what to install instead of a segfault or an opaque GLError.
"""

from __future__ import annotations

import ctypes.util
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "DEFAULT_CAMERA",
    "camera_names",
    "checked_frame",
    "default_camera_config",
    "free_camera",
    "make_renderer",
    "named_cameras",
    "scene_cameras",
    "select_headless_gl",
    "simulator",
]

DEFAULT_CAMERA = "default"
"""The camera name of the environment's own viewpoint (MuJoCo's free camera placed by the environment's
``default_camera_config``); a named MuJoCo camera of the same name takes precedence."""


def select_headless_gl() -> str | None:
    """Set ``MUJOCO_GL=egl`` when it is unset, on Linux, and libEGL is present; returns the value in use."""
    if "MUJOCO_GL" not in os.environ and sys.platform.startswith("linux") and ctypes.util.find_library("EGL"):
        os.environ["MUJOCO_GL"] = "egl"
    os.environ.setdefault("LP_NUM_THREADS", "0")
    return os.environ.get("MUJOCO_GL")


def make_renderer(model: Any, height: int, width: int, *, place: str = "here") -> Any:
    """A ``height`` x ``width`` ``mujoco.Renderer`` of ``model`` with shadows and multisampling off.

    The model's offscreen buffer is grown to the frame size when it is smaller (Gymnasium's MuJoCo envs
    size it for their own ``render()``, the boat scene for 96 x 96). Multisampling is read once, when the
    renderer's GL context is made, so it is switched off for that moment and the model's setting restored:
    the environment's own ``render()`` is left as its authors made it. Raises ``RuntimeError`` naming the
    backend and what to install ``place`` (where the frames are drawn: the environment server says
    "where the environment server runs") when no GL context can be made.
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
            f"camera frames need an OpenGL backend, and none could be created {place} "
            f"(MUJOCO_GL={backend}): {exc}. Install EGL (Debian: libegl1) or OSMesa (libosmesa6) {place} "
            "and set MUJOCO_GL=egl or MUJOCO_GL=osmesa, or run with the state-vector observation "
            "(camera off, the default)."
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


def default_camera_config(*holders: Any) -> Mapping[str, Any] | None:
    """The ``default_camera_config`` of the first of ``holders`` (the simulator, then the unwrapped
    environment; None skipped) whose Gymnasium ``mujoco_renderer`` is set; None when none is."""
    for holder in holders:
        owner = getattr(holder, "mujoco_renderer", None)
        if owner:
            config: Mapping[str, Any] | None = getattr(owner, "default_cam_config", None)
            return config
    return None


def simulator(unwrapped: Any) -> Any | None:
    """The object holding the MuJoCo model and data (and ``set_state``): the unwrapped environment, or
    the MuJoCo environment it drives (PointMaze's ``point_env``, AntMaze's ``ant_env``); None when there
    is none to read."""

    def simulates(obj: Any) -> bool:
        return all(hasattr(obj, name) for name in ("model", "data", "set_state"))

    if simulates(unwrapped):
        return unwrapped
    for value in vars(unwrapped).values():
        if simulates(value):
            return value
    if hasattr(unwrapped, "model") and hasattr(unwrapped, "data"):
        return unwrapped
    return None


def named_cameras(model: Any) -> tuple[str, ...]:
    """The model's named ``<camera>``s, in model order (an unnamed one cannot be asked for)."""
    return tuple(name for name in (model.camera(i).name for i in range(int(model.ncam))) if name)


def camera_names(model: Any | None, drawn: Sequence[str] = ()) -> tuple[str, ...]:
    """The cameras an environment offers, in the order the probe and the server both list them: those its
    scene function draws itself (``drawn``), then the named cameras of ``model`` in model order, then
    ``default``; a name the scene draws is not repeated, and without a model (None) there are the
    scene's alone."""
    named = () if model is None else named_cameras(model)
    by_mujoco = () if model is None else (*named, *(() if DEFAULT_CAMERA in named else (DEFAULT_CAMERA,)))
    return (*drawn, *(c for c in by_mujoco if c not in drawn))


def scene_cameras(scene: Any, label: str) -> tuple[str, ...]:
    """The cameras a scene function draws itself (its ``cameras``, none by default): distinct non-empty
    names, and a ``render`` to draw them; else a ``ValueError`` naming ``label`` (the scene)."""
    value = getattr(scene, "cameras", ())
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise ValueError(f"{label}.cameras must be a list of camera names, got {value!r}")
    names = tuple(value)
    if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise ValueError(
            f"{label}.cameras must name distinct cameras by non-empty strings, got {list(names)}"
        )
    if names and not callable(getattr(scene, "render", None)):
        raise ValueError(
            f"{label} names cameras {list(names)} but has no render(camera, height, width) method to "
            "draw them"
        )
    return names


def checked_frame(frame: Any, height: int, width: int, call: str) -> Any:
    """``frame``, a scene's ``render`` result, as a C-ordered array once it is a numpy uint8
    [``height``, ``width``, 3]; else a ``ValueError`` saying what ``call`` (the call, named) returned."""
    np = importlib.import_module("numpy")
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.shape != (height, width, 3):
        found = (
            f"{frame.dtype} {list(frame.shape)}" if isinstance(frame, np.ndarray) else type(frame).__name__
        )
        raise ValueError(
            f"{call} returned {found}; it must return a numpy uint8 array [{height}, {width}, 3] (RGB)"
        )
    return np.ascontiguousarray(frame)


def _mujoco() -> Any:
    """The ``mujoco`` module, loaded by name on first use (why: see the module's docstring)."""
    return importlib.import_module("mujoco")
