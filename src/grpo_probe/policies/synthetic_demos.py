"""Synthetic demonstrations: smooth random chunks that depend on a random observation.

Why: the heads, their tokenizer and their training must be testable without running the simulator. A
chunk here is a sum of a few low-frequency cosines whose amplitudes are a fixed smooth function of the
observation plus keyed noise, so a policy can learn the obs -> chunk map and FAST compresses it the way
it compresses real expert chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpo_probe.keyed_rng import numpy_generator, tag

__all__ = ["SyntheticDemos", "synthetic_demos"]


@dataclass
class SyntheticDemos:
    """Same fields as the simulator's ``Demos``: obs float32 [N, obs_dim], chunks float32 [N, 50, 6]."""

    obs: np.ndarray
    chunks: np.ndarray


def synthetic_demos(
    n: int, run_key: int = 0, obs_dim: int = 17, length: int = 50, dims: int = 6
) -> SyntheticDemos:
    """``n`` (obs, chunk) pairs; chunks lie in [-1, 1] and vary smoothly in time."""
    rng = numpy_generator(run_key, tag("synthetic_demos"), n)
    obs = rng.uniform(-1.0, 1.0, size=(n, obs_dim))
    mixing = numpy_generator(run_key, tag("synthetic_demos_map")).normal(size=(obs_dim, 4, dims)) / np.sqrt(
        obs_dim
    )
    amplitudes = (
        np.tanh(np.einsum("no,okd->nkd", obs, mixing)) * np.array([0.5, 0.25, 0.12, 0.06])[None, :, None]
    )
    amplitudes += 0.02 * rng.normal(size=amplitudes.shape)
    time = (np.arange(length) + 0.5) / length
    basis = np.cos(np.pi * np.arange(4)[:, None] * time[None, :])  # [4, T]
    chunks = np.einsum("nkd,kt->ntd", amplitudes, basis)
    return SyntheticDemos(obs=obs.astype(np.float32), chunks=np.clip(chunks, -1.0, 1.0).astype(np.float32))
