"""What the LeRobot adapter does to a row that needs no torch: its seed, its keys, its chunk, its bounds.

Why apart from the torch code: these are the rules the probe's oracles hold the adapter to (a row's
draws from its key alone, the probe's camera keys onto the checkpoint's, the chunk the design
registers, actions in [-1, 1]); kept numpy-only they are tested in the probe's own environment, without
LeRobot, and read the same in the lab's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "IMAGE_PREFIX",
    "ActionBounds",
    "CameraMap",
    "cut_chunk",
    "frame_to_chw",
    "parse_camera",
    "row_seed",
    "stack_history",
]

IMAGE_PREFIX = "observation.images."
"""The probe's camera keys: ``observation.images.<camera>``, uint8 [B, H, W, 3]."""

_SEED_DOMAIN = 0x4C65526F
"""Mixed into every row's seed ("LeRo"), so the adapter's streams are not those of another user of the
same four integers."""


def row_seed(run_key: int, seed: int, replan: int, draw: int) -> int:
    """One 64-bit seed from a row's key: the same key gives the same seed in every process, and a
    different draw or replan a different one (numpy's ``SeedSequence`` mixes the five integers)."""
    words = [_SEED_DOMAIN, run_key, seed, replan, draw]
    for name, value in zip(("run_key", "seed", "replan", "draw"), words[1:], strict=True):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"row key field {name} must be a non-negative integer, got {value!r}")
    return int(np.random.SeedSequence([int(w) for w in words]).generate_state(1, np.uint64)[0])


def parse_camera(spec: str) -> tuple[str, str]:
    """``CAMERA=CHECKPOINT_KEY`` (``--camera``) as (the probe's key, the checkpoint's key)."""
    camera, sep, key = spec.partition("=")
    if not sep or not camera or not key or "." in camera:
        raise ValueError(
            f"--camera {spec!r}: expected CAMERA=CHECKPOINT_KEY, e.g. top=observation.image "
            "(CAMERA: the design's camera name, without dots)"
        )
    return f"{IMAGE_PREFIX}{camera}", key


@dataclass(frozen=True)
class CameraMap:
    """The probe's camera keys for each of the checkpoint's image features.

    A checkpoint key ``observation.images.<camera>`` is the probe's key as it is; any other (LeRobot's
    single-camera ``observation.image``) must be named by a ``--camera CAMERA=KEY``.
    """

    probe_to_checkpoint: Mapping[str, str]

    @classmethod
    def build(cls, image_features: Iterable[str], cameras: Sequence[str] = ()) -> CameraMap:
        """The map for a checkpoint's ``image_features`` and the ``--camera`` specs given; a
        ``ValueError`` naming the flag for a feature left unmapped or a spec naming no feature."""
        features = list(image_features)
        mapped: dict[str, str] = {}
        for spec in cameras:
            probe, key = parse_camera(spec)
            if key not in features:
                raise ValueError(
                    f"--camera {spec!r}: the checkpoint has no image feature {key!r} "
                    f"(its image features: {features or 'none'})"
                )
            if probe in mapped or key in mapped.values():
                raise ValueError(f"--camera {spec!r}: camera or image feature mapped twice")
            mapped[probe] = key
        for key in features:
            if key in mapped.values():
                continue
            if not key.startswith(IMAGE_PREFIX):
                raise ValueError(
                    f"the checkpoint's image feature {key!r} is not one of the probe's camera keys "
                    f"({IMAGE_PREFIX}<camera>): name the design's camera for it with --camera CAMERA={key}"
                )
            if key in mapped:
                raise ValueError(f"camera key {key!r} is mapped to {mapped[key]!r} and is a feature too")
            mapped[key] = key
        return cls(dict(sorted(mapped.items())))


def stack_history(value: np.ndarray, n_obs_steps: int) -> np.ndarray:
    """[1, ...] as [1, n_obs_steps, ...]: the observation repeated, as LeRobot fills a fresh policy's
    history at an episode's first step. The probe hands one observation per replan and a row's chunk
    may depend on nothing else (not on calls before it), so every replan is such a first step."""
    if n_obs_steps < 1:
        raise ValueError(f"n_obs_steps must be >= 1, got {n_obs_steps}")
    return np.repeat(np.asarray(value)[:, None], n_obs_steps, axis=1)


def frame_to_chw(frames: np.ndarray, key: str, shape: Sequence[int]) -> np.ndarray:
    """uint8 frames [1, H, W, 3] as float32 [1, 3, H, W] in [0, 1], as LeRobot's environments hand a
    policy its images; a ``ValueError`` naming the probe's ``key`` when the size is not the checkpoint's
    feature ``shape`` (C, H, W)."""
    frames = np.asarray(frames)
    expected = (1, shape[1], shape[2], shape[0]) if len(shape) == 3 else None
    if frames.dtype != np.uint8 or expected is None or frames.shape != expected:
        raise ValueError(
            f"{key}: frames {frames.dtype} {list(frames.shape[1:])}, the checkpoint expects uint8 "
            f"[H, W, C] = {[*shape[1:], shape[0]] if len(shape) == 3 else list(shape)}: register the "
            "camera at the checkpoint's size"
        )
    return np.array(frames.transpose(0, 3, 1, 2), dtype=np.float32) / np.float32(255.0)


def cut_chunk(actions: np.ndarray, chunk_length: int, source: str) -> np.ndarray:
    """The first ``chunk_length`` actions of a [1, T, A] chunk; a ``ValueError`` naming ``source`` when
    the policy returns fewer."""
    if actions.ndim != 3 or actions.shape[0] != 1:
        raise ValueError(f"{source} returned actions of shape {actions.shape}, expected [1, T, action_dim]")
    if actions.shape[1] < chunk_length:
        raise ValueError(
            f"{source} returned {actions.shape[1]} actions per chunk, fewer than the chunk length "
            f"{chunk_length} (--chunk-length): register a chunk of at most {actions.shape[1]}"
        )
    return actions[:, :chunk_length]


@dataclass(frozen=True)
class ActionBounds:
    """The policy's actions (the environment's units) onto the probe's [-1, 1], per action dimension.

    Why: the probe maps [-1, 1] back onto the environment's action space, so these must be the
    environment's bounds. They default to the checkpoint's action statistics (``min``, ``max``), which
    are the environment's bounds where the dataset reached them; ``--action-low`` and ``--action-high``
    set them where it did not (PushT: 0 and 512).
    """

    low: np.ndarray
    high: np.ndarray

    @classmethod
    def build(
        cls,
        action_dim: int,
        stats: Mapping[str, np.ndarray] | None,
        low: Sequence[float] | None = None,
        high: Sequence[float] | None = None,
    ) -> ActionBounds:
        """Bounds from ``low``/``high`` (one value, or one per dimension) where given, else from the
        statistics' ``min``/``max``; a ``ValueError`` naming the flag when neither says."""
        stats = stats or {}
        values = []
        for name, given, stat in (("--action-low", low, "min"), ("--action-high", high, "max")):
            if given is not None:
                value = np.asarray(given, dtype=np.float64).reshape(-1)
                source = name
            elif stat in stats:
                value = np.asarray(stats[stat], dtype=np.float64).reshape(-1)
                source = f"the checkpoint's action statistics ({stat})"
            else:
                raise ValueError(
                    f"the checkpoint's action statistics have no {stat!r}: give the environment's "
                    f"action bounds with {name}"
                )
            if value.size == 1:
                value = np.full(action_dim, value[0])
            if value.shape != (action_dim,) or not np.all(np.isfinite(value)):
                raise ValueError(
                    f"{source}: expected 1 or {action_dim} finite values (the action's dimensions), "
                    f"got {value.tolist()}"
                )
            values.append(value)
        if not np.all(values[1] > values[0]):
            raise ValueError(
                f"action bounds: every high must exceed its low, got low {values[0].tolist()} "
                f"high {values[1].tolist()}"
            )
        return cls(values[0], values[1])

    def to_unit(self, actions: np.ndarray) -> np.ndarray:
        """float32 actions in [-1, 1] (clipped), from actions in the environment's units."""
        scaled = 2.0 * (np.asarray(actions, dtype=np.float64) - self.low) / (self.high - self.low) - 1.0
        return np.clip(scaled, -1.0, 1.0).astype(np.float32)
