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

LeRobot's key convention, registered in the design (``observation.convention: lerobot``): the policy
input carries ``observation.state`` (the agent's own state), ``observation.environment_state`` (the
object, the goal, the rest of the environment) and ``observation.images.<camera>``, instead of the whole
state packed into ``observation.state``. The environment still returns the packed state (its named
entries, ``EnvSpec.state_entries``, concatenated); the design says which entries are the agent's
(``observation.state``) and which the environment's (``observation.environment_state``), and the engine
hands a policy the two parts (:class:`StateSplit`). A policy whose ``obs_dim`` is the packed width (the
project's own heads, cloned on demos of the packed state) keeps reading the packed state: the two parts
concatenated in the registered order. Under the convention the per-replan digest
(:func:`observation_sha256`) covers every array the policy saw, both state parts with the frames.

This module imports neither MuJoCo nor torch: the prereg reads it while Snakemake parses the rules.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grpo_probe.envs.protocol import OBSERVATION_ENVIRONMENT_STATE, OBSERVATION_STATE

__all__ = [
    "CONVENTIONS",
    "IMAGE_PREFIX",
    "OBSERVATION_ENVIRONMENT_STATE",
    "OBSERVATION_STATE",
    "TASK",
    "CameraConfig",
    "ObservationBatch",
    "ObservationConfig",
    "StateSplit",
    "UndeclaredObservationKeyError",
    "camera_of",
    "frame_sha256",
    "image_key",
    "observation_problems",
    "observation_sha256",
    "policy_input_keys",
    "split_problems",
]

IMAGE_PREFIX = "observation.images."
"""Prefix of a camera frame's key: ``observation.images.<camera>``, uint8 [H, W, 3]."""
TASK = "task"
"""The key of the registered task string (one per design, the same for every row)."""
_CAMERA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

CONVENTIONS: dict[str, str] = {
    "packed": "the whole state in observation.state",
    "lerobot": (
        "LeRobot's keys: the agent's state in observation.state, the environment's in "
        "observation.environment_state"
    ),
}
"""The registered observation key conventions (``observation.convention``) and what each means."""


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
    convention: str = "packed"
    """How the state reaches a policy (:data:`CONVENTIONS`): ``packed`` or ``lerobot``."""
    state: tuple[str, ...] = ()
    """Under ``lerobot``: the environment's state entries that are the agent's own (``observation.state``)."""
    environment_state: tuple[str, ...] = ()
    """Under ``lerobot``: the entries that are the environment's (``observation.environment_state``)."""

    def __post_init__(self) -> None:
        if self.convention not in CONVENTIONS:
            raise ValueError(f"convention: must be one of {', '.join(CONVENTIONS)}, got {self.convention!r}")
        if self.convention == "packed":
            for name in ("state", "environment_state"):
                if getattr(self, name):
                    raise ValueError(
                        f"{name}: names the entries of LeRobot's split; only with convention: lerobot"
                    )
            return
        for name in ("state", "environment_state"):
            entries = getattr(self, name)
            if not entries:
                raise ValueError(
                    f"{name}: convention: lerobot splits the environment's state into observation.state and "
                    "observation.environment_state; list the entries of each (state: the agent's own, e.g. "
                    "[observation]; environment_state: the object's and the goal's, e.g. [achieved_goal, "
                    "desired_goal])"
                )
            if len(set(entries)) != len(entries) or not all(isinstance(e, str) and e for e in entries):
                raise ValueError(f"{name}: must be distinct entry names, got {list(entries)!r}")
        both = sorted(set(self.state) & set(self.environment_state))
        if both:
            raise ValueError(
                f"environment_state: {', '.join(both)} is also in state; each entry is the agent's or the "
                "environment's"
            )

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
        split = {}
        for name in ("state", "environment_state"):
            entries = raw.get(name, ())
            if isinstance(entries, str) or not isinstance(entries, (list, tuple)):
                raise ValueError(f"{where}.{name}: must be a list of state entry names, got {entries!r}")
            split[name] = tuple(entries)
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
        try:
            return cls(
                task=task,
                cameras=tuple(sorted(cameras, key=lambda c: c.name)),
                convention=raw.get("convention", "packed"),
                **split,
            )
        except ValueError as exc:
            raise ValueError(f"{where}.{exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """The plain form manifests and oracle reports record (the split only under ``lerobot``, so the
        records of a packed design are what they always were)."""
        split = (
            {}
            if self.convention == "packed"
            else {
                "convention": self.convention,
                "state": list(self.state),
                "environment_state": list(self.environment_state),
            }
        )
        return {
            "task": self.task,
            "cameras": {c.name: {"height": c.height, "width": c.width} for c in self.cameras},
            **split,
        }

    @property
    def lerobot(self) -> bool:
        """True when the design registers LeRobot's split of the state."""
        return self.convention == "lerobot"

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key a policy may declare under this design: state (and under LeRobot's keys the
        environment state), each camera, and the task if any."""
        return (
            OBSERVATION_STATE,
            *((OBSERVATION_ENVIRONMENT_STATE,) if self.lerobot else ()),
            *(c.key for c in self.cameras),
            *((TASK,) if self.task else ()),
        )

    def camera(self, name: str) -> CameraConfig:
        """The registered camera ``name``; a ``KeyError`` names the registered ones."""
        for c in self.cameras:
            if c.name == name:
                return c
        raise KeyError(name)

    def split(self, state_entries: Sequence[tuple[str, int, int]], env_id: str) -> StateSplit | None:
        """The registered split of an environment's state (None when packed); a ``ValueError`` names the
        field and what the environment offers when the split does not fit its entries."""
        if not self.lerobot:
            return None
        problems = split_problems(self, state_entries, env_id)
        if problems:
            raise ValueError("; ".join(problems))
        where = {name: (start, stop) for name, start, stop in state_entries}
        index = {
            part: np.concatenate([np.arange(*where[e]) for e in getattr(self, part)]).astype(np.intp)
            for part in ("state", "environment_state")
        }
        return StateSplit(index["state"], index["environment_state"])


def split_problems(
    config: ObservationConfig, state_entries: Sequence[tuple[str, int, int]], env_id: str
) -> list[str]:
    """Why the design's LeRobot split does not fit an environment's named state entries (``observation.*``
    fields); empty when it does, or when the design packs the state."""
    if not config.lerobot:
        return []
    names = [name for name, _, _ in state_entries]
    if not names:
        return [
            f"observation.convention: lerobot splits the state by its named entries, and environment "
            f"{env_id!r} names none (its observation.state is one vector; a Dict observation names its "
            "entries: wrap it into one, or leave the convention packed)"
        ]
    problems = []
    for part in ("state", "environment_state"):
        unknown = [e for e in getattr(config, part) if e not in names]
        if unknown:
            problems.append(
                f"observation.{part}: environment {env_id!r} has no state entry "
                f"{', '.join(map(repr, unknown))} (its entries: {', '.join(names)})"
            )
    left = [n for n in names if n not in config.state and n not in config.environment_state]
    if left:
        problems.append(
            f"observation.environment_state: entry {', '.join(map(repr, left))} of environment {env_id!r} is "
            "in neither observation.state nor observation.environment_state; name each entry in one of them"
        )
    return problems


@dataclass(frozen=True)
class StateSplit:
    """Where LeRobot's two keys lie in the packed state: ``state_index`` (``observation.state``, the agent's
    entries in the registered order) and ``environment_index`` (``observation.environment_state``)."""

    state_index: np.ndarray
    environment_index: np.ndarray

    @property
    def state_dim(self) -> int:
        """Numbers in ``observation.state`` under the split (the agent's own)."""
        return int(self.state_index.size)

    @property
    def packed_dim(self) -> int:
        """Numbers in the packed state (both parts)."""
        return int(self.state_index.size + self.environment_index.size)

    def parts(self, packed: np.ndarray) -> dict[str, np.ndarray]:
        """A batch of packed states [B, packed_dim] as LeRobot's two keys, each float32 [B, n]."""
        packed = np.asarray(packed, dtype=np.float32)
        return {
            OBSERVATION_STATE: np.ascontiguousarray(packed[:, self.state_index]),
            OBSERVATION_ENVIRONMENT_STATE: np.ascontiguousarray(packed[:, self.environment_index]),
        }

    def packed(self, state: np.ndarray, environment_state: np.ndarray) -> np.ndarray:
        """The two keys' arrays back as the packed state: the registered order, concatenated."""
        state = np.asarray(state, dtype=np.float32)
        out = np.empty((state.shape[0], self.packed_dim), dtype=np.float32)
        out[:, self.state_index] = state
        out[:, self.environment_index] = np.asarray(environment_state, dtype=np.float32)
        return out


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
        if key == OBSERVATION_ENVIRONMENT_STATE:
            if not config.lerobot:
                problems.append(
                    f"{who} reads {key!r}, but the design registers no split of the state into LeRobot's "
                    "keys (observation.convention: lerobot, with observation.state and "
                    "observation.environment_state)"
                )
            continue
        if key == TASK:
            if not config.task:
                problems.append(f"{who} reads {TASK!r}, but the design registers no observation.task")
            continue
        if camera is None:
            problems.append(
                f"{who} declares {key!r}, which is not an observation key "
                f"({OBSERVATION_STATE!r}, {OBSERVATION_ENVIRONMENT_STATE!r}, '{IMAGE_PREFIX}<camera>' "
                f"or {TASK!r})"
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


def observation_sha256(values: Mapping[str, np.ndarray]) -> str:
    """sha256 of one row's observation at one replan under LeRobot's keys: each array's key, dtype, shape
    and bytes, in key order (the state parts as float32, the frames as uint8)."""
    h = hashlib.sha256()
    for key in sorted(values):
        array = np.ascontiguousarray(values[key])
        h.update(f"{key}|{array.dtype.str}|{'x'.join(map(str, array.shape))}|".encode())
        h.update(array.tobytes())
    return h.hexdigest()
