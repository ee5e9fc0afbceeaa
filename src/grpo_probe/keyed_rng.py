"""Keyed random streams: every random draw in the project comes from a generator keyed by integers.

Why: a draw must not depend on which process computes it, on how many other rows share a batch, or on
what ran before it. So no global RNG and no Python ``hash()`` (salted per process); a stream is named by
a tuple of non-negative integers, e.g. ``(run_key, tag("ar_gumbel"), seed, replan, draw, position)``,
and numpy's ``SeedSequence`` turns that tuple into well-mixed generator state.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

__all__ = ["key_seed", "numpy_generator", "tag", "torch_generator"]


def tag(name: str) -> int:
    """A stable 32-bit integer for a stream name (domain separation between uses of the same key)."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "little")


def _check(parts: tuple[int, ...]) -> tuple[int, ...]:
    if not parts:
        raise ValueError("a key needs at least one integer part")
    for i, p in enumerate(parts):
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 0:
            raise ValueError(f"key part {i} must be a non-negative integer, got {p!r}")
    return tuple(int(p) for p in parts)


def key_seed(*parts: int) -> int:
    """A 63-bit seed derived from the key tuple (fits torch's ``manual_seed``)."""
    state = np.random.SeedSequence(list(_check(parts))).generate_state(2, dtype=np.uint32)
    return (int(state[0]) | (int(state[1]) << 32)) & ((1 << 63) - 1)


def numpy_generator(*parts: int) -> np.random.Generator:
    """A PCG64 generator whose stream is a pure function of the key tuple."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(list(_check(parts)))))


def torch_generator(*parts: int) -> torch.Generator:
    """A CPU torch generator keyed like :func:`numpy_generator` (CPU, so draws are device-invariant)."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(key_seed(*parts))
    return gen
