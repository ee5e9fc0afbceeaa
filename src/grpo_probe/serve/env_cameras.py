"""Named cameras of a served environment, drawn on the server exactly as the probe draws them in process.

Why on the server: a camera-fed policy reads ``observation.images.<camera>``, and a served simulator's
MuJoCo model and data live in the server's process (and its own MuJoCo build), so its frames can only be
drawn there; they cross the wire as uint8 arrays (:mod:`grpo_probe.serve.env_wire`).

Why not :mod:`grpo_probe.envs.gl`: the server runs grpo-probe-serve alone (no ``grpo_probe.envs``), so
this module repeats what the in-process Gymnasium adapter does, to the byte. The cameras are those the
scene function draws itself (its ``cameras``, drawn by its ``render(camera, height, width)``: gym-pusht's
top view, a view of the lab's), then the model's named cameras in model order, then ``default``
(MuJoCo's free camera of the model with the environment's ``default_camera_config``, the view
Gymnasium's ``render()`` opens on, its pose fixed by the model alone); a renderer per frame size, made
once, with shadows and multisampling off; the backend chosen headless (EGL when present) before MuJoCo
is imported. tests/envs/test_served_env_cameras.py holds the two paths to the same bytes on Pusher-v5.

The model is found where the adapter finds it (the unwrapped environment, or the MuJoCo environment it
drives, as PointMaze drives ``point_env``) or, for a simulator driven through dm_control (gym-aloha), in
its ``physics``, whose ``model.ptr`` and ``data.ptr`` are MuJoCo's own. MuJoCo is loaded by name, when a
frame is first drawn: this package must import without it (the ``serve-stands-alone`` contract).
"""

from __future__ import annotations

import ctypes.util
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["DEFAULT_CAMERA", "MAX_SIDE", "CameraRequest", "Cameras", "read_requests", "select_headless_gl"]

DEFAULT_CAMERA = "default"
"""The camera name of the environment's own viewpoint; a named MuJoCo camera of the same name wins."""
MAX_SIDE = 4096
"""The largest frame side a design may register (``observation.cameras``), so the largest asked for."""

CameraRequest = tuple[str, int, int]
"""One frame asked for: the camera's name, the height and the width in pixels."""


def select_headless_gl() -> str | None:
    """Set ``MUJOCO_GL=egl`` when it is unset, on Linux, and libEGL is present (Mesa's rasterizer in the
    calling thread); returns the value in use. As :func:`grpo_probe.envs.gl.select_headless_gl`: MuJoCo
    (and dm_control) read the variable once, at import, so the server calls this before its factory runs."""
    if "MUJOCO_GL" not in os.environ and sys.platform.startswith("linux") and ctypes.util.find_library("EGL"):
        os.environ["MUJOCO_GL"] = "egl"
    os.environ.setdefault("LP_NUM_THREADS", "0")
    return os.environ.get("MUJOCO_GL")


def read_requests(raw: Any, cameras: Sequence[str]) -> list[CameraRequest]:
    """The frames a request asks for (``[[name, height, width], ...]``), checked against the environment's
    ``cameras``; a ``ValueError`` names the entry and, for an unknown camera, the cameras there are."""
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise ValueError(f"render: must be a list of [camera, height, width], got {type(raw).__name__}")
    out: list[CameraRequest] = []
    for index, entry in enumerate(raw):
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise ValueError(f"render[{index}]: must be [camera, height, width], got {entry!r}")
        name, height, width = entry
        if not isinstance(name, str) or name not in cameras:
            raise ValueError(
                f"render[{index}]: the served environment has no camera {name!r} "
                f"(its cameras: {', '.join(cameras) or 'none'})"
            )
        for field, value in (("height", height), ("width", width)):
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, np.integer))
                or not 1 <= value <= MAX_SIDE
            ):
                raise ValueError(
                    f"render[{index}]: {field} must be an integer in 1..{MAX_SIDE}, got {value!r}"
                )
        out.append((name, int(height), int(width)))
    return out


def _mujoco() -> Any:
    """The ``mujoco`` module, loaded by name on first use (why: see the module's docstring)."""
    return importlib.import_module("mujoco")


def _simulator(unwrapped: Any) -> Any | None:
    """What holds the MuJoCo model and data, found as the probe's adapter finds it
    (:func:`grpo_probe.envs.gym_setup.simulator`)."""

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


def _physics(unwrapped: Any) -> Any | None:
    """A dm_control ``Physics`` the environment steps (on it, or on an object it holds: gym-aloha keeps its
    ``control.Environment`` as ``_env``), or None."""
    for owner in (unwrapped, *vars(unwrapped).values()):
        physics = getattr(owner, "physics", None)
        if physics is not None and hasattr(getattr(physics, "model", None), "ptr"):
            return physics
    return None


class Cameras:
    """The cameras of one served environment (and of its scene): their names, and their frames now."""

    def __init__(self, env: Any, scene: Any = None) -> None:
        self._scene = scene
        self._drawn = _scene_cameras(scene)
        self._unwrapped = getattr(env, "unwrapped", env)
        self._sim = _simulator(self._unwrapped)
        self._physics = None if self._sim is not None else _physics(self._unwrapped)
        self._renderers: dict[tuple[int, int], Any] = {}
        self._free_camera: Any = None
        self._model: Any = None
        model = self._model_and_data()
        found: list[str] = (
            [] if model is None else [model[0].camera(i).name for i in range(int(model[0].ncam))]
        )
        found = [n for n in found if n]
        self._named = frozenset(found)
        drawn_by_mujoco = (
            () if model is None else (*found, *(() if DEFAULT_CAMERA in found else (DEFAULT_CAMERA,)))
        )
        self.names: tuple[str, ...] = (*self._drawn, *(c for c in drawn_by_mujoco if c not in self._drawn))

    def _model_and_data(self) -> tuple[Any, Any] | None:
        """MuJoCo's model and data now (read at every frame: dm_control may rebuild its physics)."""
        if self._sim is not None:
            return self._sim.model, self._sim.data
        if self._physics is not None:
            return self._physics.model.ptr, self._physics.data.ptr
        return None

    def render(self, requests: Sequence[CameraRequest]) -> list[np.ndarray]:
        """Each asked-for frame at the current state, uint8 [height, width, 3], in the order asked."""
        frames = []
        for name, height, width in requests:
            if name in self._drawn:
                frames.append(self._scene_frame(name, height, width))
                continue
            found = self._model_and_data()
            if found is None:
                raise ValueError("the served environment has no MuJoCo model to render cameras from")
            model, data = found
            if model is not self._model:  # a rebuilt model: its renderers and free camera go with the old one
                self.close()
                self._model = model
            renderer = self._renderers.get((height, width))
            if renderer is None:
                renderer = self._renderers[(height, width)] = _make_renderer(model, height, width)
            renderer.update_scene(data, camera=name if name in self._named else self._default_view(model))
            frames.append(np.ascontiguousarray(renderer.render(), dtype=np.uint8).copy())
        return frames

    def _scene_frame(self, camera: str, height: int, width: int) -> np.ndarray:
        """The scene's own frame of ``camera``, checked as the adapter checks it in process."""
        frame = self._scene.render(camera, height, width)
        if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.shape != (height, width, 3):
            found = (
                f"{frame.dtype} {list(frame.shape)}"
                if isinstance(frame, np.ndarray)
                else type(frame).__name__
            )
            raise ValueError(
                f"render({camera!r}, {height}, {width}) of the scene {type(self._scene).__name__} returned "
                f"{found}; it must return a numpy uint8 array [{height}, {width}, 3] (RGB)"
            )
        return np.ascontiguousarray(frame)

    def _default_view(self, model: Any) -> Any:
        """MuJoCo's free camera of the model, then the environment's ``default_camera_config`` on it (as
        the adapter's ``_default_view``): a pose that depends on the model alone. Built once per model."""
        if self._free_camera is None:
            owner = getattr(self._sim, "mujoco_renderer", None) or getattr(
                self._unwrapped, "mujoco_renderer", None
            )
            self._free_camera = _free_camera(model, getattr(owner, "default_cam_config", None))
        return self._free_camera

    def close(self) -> None:
        """Release the renderers (and their GL contexts)."""
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()
        self._free_camera = None


def _scene_cameras(scene: Any) -> tuple[str, ...]:
    """The cameras a scene function draws itself (its ``cameras``), checked as the adapter checks them:
    distinct non-empty names, and a ``render`` to draw them; a ``ValueError`` names the scene."""
    value = getattr(scene, "cameras", ()) if scene is not None else ()
    label = f"the scene {type(scene).__name__}"
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise ValueError(f"{label}: cameras must be a list of camera names, got {value!r}")
    names = tuple(value)
    if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise ValueError(
            f"{label}: cameras must name distinct cameras by non-empty strings, got {list(names)}"
        )
    if names and not callable(getattr(scene, "render", None)):
        raise ValueError(
            f"{label} names cameras {list(names)} but has no render(camera, height, width) method to "
            "draw them"
        )
    return names


def _make_renderer(model: Any, height: int, width: int) -> Any:
    """A ``mujoco.Renderer`` as :func:`grpo_probe.envs.gl.make_renderer` makes one: the offscreen buffer
    grown to the frame, multisampling off while its context is made (the model's setting restored),
    shadows off; a ``RuntimeError`` naming the backend and what to install when no context can be made."""
    mujoco = _mujoco()
    model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), width)
    model.vis.global_.offheight = max(int(model.vis.global_.offheight), height)
    samples = int(model.vis.quality.offsamples)
    model.vis.quality.offsamples = 0
    try:
        renderer = mujoco.Renderer(model, height=height, width=width)
    except Exception as exc:  # MuJoCo raises several types depending on the backend that failed
        raise RuntimeError(
            f"the environment server cannot draw camera frames: no OpenGL context "
            f"(MUJOCO_GL={os.environ.get('MUJOCO_GL', '<unset>')}): {exc}. Install EGL (Debian: libegl1) or "
            "OSMesa (libosmesa6) where the server runs and set MUJOCO_GL=egl or MUJOCO_GL=osmesa"
        ) from exc
    finally:
        model.vis.quality.offsamples = samples
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
    return renderer


def _free_camera(model: Any, config: Mapping[str, Any] | None) -> Any:
    """MuJoCo's default free camera of ``model``, ``config`` (a Gymnasium ``default_camera_config``) set
    on it as Gymnasium's viewer sets it (as :func:`grpo_probe.envs.gl.free_camera`)."""
    mujoco = _mujoco()
    camera = mujoco.MjvCamera()
    mujoco.mjv_defaultFreeCamera(model, camera)
    for key, value in (config or {}).items():
        if hasattr(value, "__len__"):
            getattr(camera, key)[:] = value
        else:
            setattr(camera, key, value)
    return camera
