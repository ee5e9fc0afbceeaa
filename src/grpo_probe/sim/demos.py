"""Behaviour-cloning demonstrations: (observation, chunk) pairs from scripted-expert episodes.

Why pairs per replan rather than per tick: the policies map one observation to one 50 x 6 chunk, so a
demonstration is exactly what the expert saw at a replan and the chunk it planned there, including the
20 actions that were planned but not executed. Demos for an image-conditioned policy also hold the
frames each registered camera showed at that replan (``images``), the frames the policy would see.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from grpo_probe.atomic_io import atomic_path
from grpo_probe.sim.env import OBS_DIM, BoatPushEnv
from grpo_probe.sim.expert import ScriptedExpert
from grpo_probe.sim.params import SimParams
from grpo_probe.sim.record import EpisodeRecord

__all__ = ["IMAGE_MEMBER_PREFIX", "Demos", "collect_demos"]

_IMAGE_KEY_PREFIX = "observation.images."
"""The frames' key prefix, :data:`grpo_probe.envs.observation.IMAGE_PREFIX` (the sim sits below envs)."""
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
    records: tuple[EpisodeRecord, ...] = ()
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
    def load(cls, path: str | os.PathLike[str], obs_dim: int | None = OBS_DIM) -> Demos:
        """Read a file written by :meth:`save`; errors name the file and the array.

        ``obs_dim``: the observation width the demos must have (the boat's by default; another
        environment's demos are read with its ``spec.obs_dim``, or ``None`` for any width).
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


def collect_demos(params: SimParams, seeds: Sequence[int], noise: float, run_key: int = 0) -> Demos:
    """Run the expert on every seed; the noise stream is keyed by (run_key, seed, replan)."""
    env = BoatPushEnv(params)
    expert = ScriptedExpert(params, noise=noise)
    obs_rows: list[np.ndarray] = []
    chunk_rows: list[np.ndarray] = []
    seed_rows: list[int] = []
    records: list[EpisodeRecord] = []
    for seed in seeds:
        obs = env.reset(int(seed))
        while not env.done:
            chunk = expert.act(obs, (run_key, int(seed), env.replan_index))
            obs_rows.append(obs)
            chunk_rows.append(chunk)
            seed_rows.append(int(seed))
            obs = env.execute_chunk(chunk)
        records.append(env.record())
    return Demos(
        obs=np.stack(obs_rows).astype(np.float32),
        chunks=np.stack(chunk_rows).astype(np.float32),
        seeds=np.asarray(seed_rows, dtype=np.int64),
        records=tuple(records),
    )
