"""Behaviour-cloning demonstrations, of any environment: (observation, chunk) pairs and their files.

Why pairs per replan rather than per tick: the policies map one observation to one 50 x 6 chunk, so a
demonstration is exactly what the expert saw at a replan and the chunk it planned there, including the
20 actions that were planned but not executed. Demos for an image-conditioned policy also hold the
frames each registered camera showed at that replan (``images``), the frames the policy would see.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grpo_probe.atomic_io import atomic_path
from grpo_probe.envs.observation import IMAGE_PREFIX

__all__ = ["IMAGE_MEMBER_PREFIX", "Demos"]

_IMAGE_KEY_PREFIX = IMAGE_PREFIX
IMAGE_MEMBER_PREFIX = "images."
"""The .npz member of camera ``c``'s frames is ``images.c``."""


@dataclass(frozen=True)
class Demos:
    """``obs`` float32 [N, obs_dim], ``chunks`` float32 [N, chunk_length, action_dims], ``seeds`` [N].

    ``images``: per camera key ``observation.images.<camera>``, uint8 frames [N, H, W, 3], row i being
    what the camera showed when the expert planned chunk i; empty for state-only demos.
    """

    obs: np.ndarray
    chunks: np.ndarray
    seeds: np.ndarray
    records: tuple[Any, ...] = ()
    images: Mapping[str, np.ndarray] = field(default_factory=dict)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write an uncompressed .npz atomically (fixed member order, so the bytes are reproducible).

        Members: ``obs``, ``chunks``, ``seeds``, then one ``images.<camera>`` per camera in key order;
        state-only demos write no image member, so their bytes are those they always were.
        """
        members = {"obs": self.obs, "chunks": self.chunks, "seeds": self.seeds}
        for key in sorted(self.images):
            members[_image_member(key, path)] = _checked_frames(self.images[key], key, len(self.obs), path)
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **members)  # type: ignore[arg-type]

    @classmethod
    def load(cls, path: str | os.PathLike[str], obs_dim: int | None = None) -> Demos:
        """Read a file written by :meth:`save`; errors name the file and the array.

        ``obs_dim``: the observation width the demos must have (the environment's ``spec.obs_dim``; ``None``,
        the default, for any width).
        """
        try:
            with np.load(path) as data:
                arrays = {name: data[name] for name in ("obs", "chunks", "seeds")}
                frames = {
                    _IMAGE_KEY_PREFIX + name[len(IMAGE_MEMBER_PREFIX) :]: data[name]
                    for name in sorted(data.files)
                    if name.startswith(IMAGE_MEMBER_PREFIX)
                }
        except KeyError as exc:
            raise ValueError(f"{path}: demos file lacks array {exc}") from exc
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable demos .npz ({exc})") from exc
        obs, chunks = arrays["obs"], arrays["chunks"]
        if obs.ndim != 2 or chunks.ndim != 3 or len(chunks) != len(obs):
            raise ValueError(f"{path}: obs {obs.shape} and chunks {chunks.shape} do not pair up")
        if obs_dim is not None and obs.shape[1] != obs_dim:
            raise ValueError(f"{path}: obs has {obs.shape[1]} columns, the environment observes {obs_dim}")
        images = {key: _checked_frames(value, key, len(obs), path) for key, value in frames.items()}
        return cls(obs=obs, chunks=chunks, seeds=arrays["seeds"], images=images)


def _image_member(key: str, path: str | os.PathLike[str]) -> str:
    """``observation.images.<camera>`` -> the .npz member ``images.<camera>``."""
    camera = key[len(_IMAGE_KEY_PREFIX) :] if key.startswith(_IMAGE_KEY_PREFIX) else ""
    if not camera:
        raise ValueError(f"{path}: demos images must be keyed '{_IMAGE_KEY_PREFIX}<camera>', got {key!r}")
    return IMAGE_MEMBER_PREFIX + camera


def _checked_frames(frames: object, key: str, n_rows: int, path: str | os.PathLike[str]) -> np.ndarray:
    """``frames`` if it is uint8 [n_rows, H, W, 3]; else a ``ValueError`` naming the file and the array."""
    if (
        not isinstance(frames, np.ndarray)
        or frames.dtype != np.uint8
        or frames.ndim != 4
        or frames.shape[0] != n_rows
        or frames.shape[3] != 3
    ):
        found = f"{getattr(frames, 'dtype', type(frames).__name__)} {getattr(frames, 'shape', '')}"
        raise ValueError(f"{path}: demos images {key!r} must be uint8 [{n_rows}, H, W, 3], got {found}")
    return frames
