"""Named cameras of a served environment, drawn on the server exactly as the probe draws them in process.

Why on the server: a camera-fed policy reads ``observation.images.<camera>``, and a served simulator's
MuJoCo model and data live in the server's process (and its own MuJoCo build), so its frames can only be
drawn there; they cross the wire as uint8 arrays (:mod:`grpo_probe.serve.env_wire`).

What it shares with the in-process Gymnasium adapter, to the byte, is in :mod:`grpo_probe.render_setup`
(shipped with grpo-probe-serve, which has no ``grpo_probe.envs``). The cameras are those the scene
function draws itself (its ``cameras``, drawn by its ``render(camera, height, width)``: gym-pusht's top
view, a view of the lab's), then the model's named cameras in model order, then ``default`` (MuJoCo's
free camera of the model with the environment's ``default_camera_config``, the view Gymnasium's
``render()`` opens on, its pose fixed by the model alone); a renderer per frame size, made once, with
shadows and multisampling off; the backend chosen headless (EGL when present) before MuJoCo
is imported. tests/envs/test_served_env_cameras.py holds the two paths to the same bytes on Pusher-v5.

The model is found where the adapter finds it (the unwrapped environment, or the MuJoCo environment it
drives, as PointMaze drives ``point_env``) or, for a simulator driven through dm_control (gym-aloha), in
its ``physics``, whose ``model.ptr`` and ``data.ptr`` are MuJoCo's own. MuJoCo is loaded by name, when a
frame is first drawn: this package must import without it (the ``serve-stands-alone`` contract).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from grpo_probe.render_setup import (
    camera_names,
    checked_frame,
    default_camera_config,
    free_camera,
    make_renderer,
    named_cameras,
    scene_cameras,
    simulator,
)

__all__ = ["MAX_SIDE", "CameraRequest", "Cameras", "read_requests"]

MAX_SIDE = 4096
"""The largest frame side a design may register (``observation.cameras``), so the largest asked for."""

CameraRequest = tuple[str, int, int]
"""One frame asked for: the camera's name, the height and the width in pixels."""


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
        self._drawn = scene_cameras(scene, f"the scene {type(scene).__name__}")
        self._unwrapped = getattr(env, "unwrapped", env)
        self._sim = simulator(self._unwrapped)
        self._physics = None if self._sim is not None else _physics(self._unwrapped)
        self._renderers: dict[tuple[int, int], Any] = {}
        self._free_camera: Any = None
        self._model: Any = None
        model = self._model_and_data()
        self._named = frozenset(() if model is None else named_cameras(model[0]))
        self.names: tuple[str, ...] = camera_names(None if model is None else model[0], self._drawn)

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
                renderer = self._renderers[(height, width)] = make_renderer(
                    model, height, width, place="where the environment server runs"
                )
            renderer.update_scene(data, camera=name if name in self._named else self._default_view(model))
            frames.append(np.ascontiguousarray(renderer.render(), dtype=np.uint8).copy())
        return frames

    def _scene_frame(self, camera: str, height: int, width: int) -> np.ndarray:
        """The scene's own frame of ``camera``, checked as the adapter checks it in process."""
        frame = self._scene.render(camera, height, width)
        call = f"render({camera!r}, {height}, {width}) of the scene {type(self._scene).__name__}"
        checked: np.ndarray = checked_frame(frame, height, width, call)
        return checked

    def _default_view(self, model: Any) -> Any:
        """MuJoCo's free camera of the model, then the environment's ``default_camera_config`` on it (as
        the adapter's ``_default_view``): a pose that depends on the model alone. Built once per model."""
        if self._free_camera is None:
            self._free_camera = free_camera(model, default_camera_config(self._sim, self._unwrapped))
        return self._free_camera

    def close(self) -> None:
        """Release the renderers (and their GL contexts)."""
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()
        self._free_camera = None
