"""What a policy sees: observations as a mapping in LeRobot's keys, and the design's registered cameras.

Why a mapping: vision-language-action policies act from camera frames, proprioception and a task
string, and the libraries they come from name those inputs ``observation.state``,
``observation.images.<camera>`` and ``task``. A policy declares the keys it consumes
(``input_keys``); the rollout engine renders only the cameras some bound policy declares, at the
resolution the design registers (``observation.cameras``), and hands the policy an
:class:`ObservationBatch` holding exactly those keys. Reading a key the policy did not declare is an
error naming the key, so a policy can never depend on an input the design did not register for it.

A policy that declares only ``observation.state`` (or nothing: the reference heads) keeps receiving
the float32 ``[B, obs_dim]`` array it always did.

Frames are part of the determinism contract: :func:`frame_sha256` is the digest of every frame a
policy saw at one replan, which the rollout table records per replan and the oracles compare.

This module imports neither MuJoCo nor torch: the prereg reads it while Snakemake parses the rules.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grpo_probe.envs.protocol import OBSERVATION_STATE

__all__ = [
    "IMAGE_PREFIX",
    "OBSERVATION_STATE",
    "TASK",
    "CameraConfig",
    "ObservationBatch",
    "ObservationConfig",
    "UndeclaredObservationKeyError",
    "camera_of",
    "frame_sha256",
    "image_key",
    "observation_problems",
    "policy_input_keys",
]

IMAGE_PREFIX = "observation.images."
"""Prefix of a camera frame's key: ``observation.images.<camera>``, uint8 [H, W, 3]."""
TASK = "task"
"""The key of the registered task string (one per design, the same for every row)."""
_CAMERA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def image_key(camera: str) -> str:
    """``observation.images.<camera>``."""
    return f"{IMAGE_PREFIX}{camera}"


def camera_of(key: str) -> str | None:
    """The camera an ``observation.images.<camera>`` key names; None for any other key."""
    return key[len(IMAGE_PREFIX) :] if key.startswith(IMAGE_PREFIX) else None


@dataclass(frozen=True)
class CameraConfig:
    """One registered camera: the environment's camera name and the frame size policies receive."""

    name: str
    height: int
    width: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _CAMERA_NAME.match(self.name):
            raise ValueError(f"camera name must be an identifier, got {self.name!r}")
        for attr in ("height", "width"):
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 4096:
                raise ValueError(f"camera {self.name!r}: {attr} must be an integer in 1..4096, got {value!r}")

    @property
    def key(self) -> str:
        """The observation key of this camera's frames."""
        return image_key(self.name)


@dataclass(frozen=True)
class ObservationConfig:
    """A design's ``observation:`` section: the task string and the cameras policies may read.

    The default (no section) registers no camera and an empty task: state-only policies need neither.
    """

    task: str = ""
    cameras: tuple[CameraConfig, ...] = field(default_factory=tuple)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None, where: str = "observation") -> ObservationConfig:
        """Build from the prereg section; errors name ``where`` and the field."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ValueError(f"{where}: must be a mapping, got {type(raw).__name__}")
        task = raw.get("task", "")
        if not isinstance(task, str):
            raise ValueError(f"{where}.task: must be a string, got {task!r}")
        cameras_raw = raw.get("cameras", {}) or {}
        if not isinstance(cameras_raw, Mapping):
            raise ValueError(f"{where}.cameras: must map camera names to {{height, width}}")
        cameras = []
        for name, size in cameras_raw.items():
            if not isinstance(size, Mapping) or set(size) != {"height", "width"}:
                raise ValueError(f"{where}.cameras.{name}: must be {{height: H, width: W}}, got {size!r}")
            try:
                cameras.append(CameraConfig(str(name), size["height"], size["width"]))
            except ValueError as exc:
                raise ValueError(f"{where}.cameras.{name}: {exc}") from None
        return cls(task=task, cameras=tuple(sorted(cameras, key=lambda c: c.name)))

    def to_dict(self) -> dict[str, Any]:
        """The plain form manifests and oracle reports record."""
        return {
            "task": self.task,
            "cameras": {c.name: {"height": c.height, "width": c.width} for c in self.cameras},
        }

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key a policy may declare under this design: state, each camera, and the task if any."""
        return (OBSERVATION_STATE, *(c.key for c in self.cameras), *((TASK,) if self.task else ()))

    def camera(self, name: str) -> CameraConfig:
        """The registered camera ``name``; a ``KeyError`` names the registered ones."""
        for c in self.cameras:
            if c.name == name:
                return c
        raise KeyError(name)


def observation_problems(
    declared: Sequence[str], config: ObservationConfig, env_cameras: Sequence[str], who: str
) -> list[str]:
    """Why a policy (``who``) declaring ``declared`` cannot run under ``config`` in an environment that
    renders ``env_cameras``; empty when it can."""
    problems = []
    for key in declared:
        camera = camera_of(key)
        if key == OBSERVATION_STATE:
            continue
        if key == TASK:
            if not config.task:
                problems.append(f"{who} reads {TASK!r}, but the design registers no observation.task")
            continue
        if camera is None:
            problems.append(
                f"{who} declares {key!r}, which is not an observation key "
                f"({OBSERVATION_STATE!r}, '{IMAGE_PREFIX}<camera>' or {TASK!r})"
            )
            continue
        if camera not in {c.name for c in config.cameras}:
            registered = ", ".join(c.name for c in config.cameras) or "none"
            problems.append(
                f"{who} reads {key!r}, but the design registers no camera {camera!r} "
                f"(observation.cameras: {registered})"
            )
        elif camera not in env_cameras:
            problems.append(
                f"{who} reads {key!r}, but the environment renders no camera {camera!r} "
                f"(its cameras: {', '.join(env_cameras) or 'none'})"
            )
    return problems


def policy_input_keys(policy: Any) -> tuple[str, ...]:
    """The keys a policy declares (``input_keys``); a policy that declares none reads the state alone."""
    declared = getattr(policy, "input_keys", None)
    if declared is None:
        return (OBSERVATION_STATE,)
    if isinstance(declared, str) or not all(isinstance(k, str) for k in declared):
        raise ValueError(
            f"policy (head {getattr(policy, 'head', '?')!r}): input_keys must be a sequence of key strings, "
            f"got {declared!r}"
        )
    return tuple(declared)


class UndeclaredObservationKeyError(KeyError):
    """A policy read an observation key it did not declare in ``input_keys``."""

    def __str__(self) -> str:  # KeyError quotes its argument; the message should read as a sentence
        return str(self.args[0])


class ObservationBatch(Mapping[str, Any]):
    """One replan's observations of a batch of rows, holding exactly the keys the policy declared.

    ``batch["observation.state"]`` float32 [B, obs_dim]; ``batch["observation.images.<camera>"]``
    uint8 [B, H, W, 3]; ``batch["task"]`` a tuple of B strings. Reading any other key raises
    :class:`UndeclaredObservationKeyError` naming the key and the declared ones.
    """

    def __init__(self, values: Mapping[str, Any], head: str) -> None:
        self._values = dict(values)
        self._head = head

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise UndeclaredObservationKeyError(
                f"policy (head {self._head!r}) read observation key {key!r}, which it did not declare in "
                f"input_keys (declared: {', '.join(self._values)}); declare it so the engine renders it"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def batch_size(self) -> int:
        """Rows in the batch."""
        return (
            len(self._values[OBSERVATION_STATE])
            if OBSERVATION_STATE in self._values
            else len(next(iter(self._values.values())))
        )


def frame_sha256(frames: Mapping[str, np.ndarray]) -> str:
    """sha256 of one row's frames at one replan: each camera's key, shape and bytes, in key order."""
    h = hashlib.sha256()
    for key in sorted(frames):
        frame = np.ascontiguousarray(frames[key])
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"{key}: a frame must be uint8 [H, W, 3], got {frame.dtype} {frame.shape}")
        h.update(f"{key}|{frame.shape[0]}x{frame.shape[1]}|".encode())
        h.update(frame.tobytes())
    return h.hexdigest()
