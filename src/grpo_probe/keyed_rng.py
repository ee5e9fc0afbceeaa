"""Keyed random streams: every random draw in the project comes from a generator keyed by integers.

Why: a draw must not depend on which process computes it, on how many other rows share a batch, or on
what ran before it. So no global RNG and no Python ``hash()`` (salted per process); a stream is named by
a tuple of non-negative integers, e.g. ``(run_key, tag("ar_gumbel"), seed, replan, draw, position)``,
and numpy's ``SeedSequence`` turns that tuple into well-mixed generator state.

Two ways to draw from a key:

- :func:`numpy_generator` (and :func:`grpo_probe.policies.keyed_torch.torch_generator`, on the torch side
  so this module loads without torch): a full generator per key tuple. Building one costs
  tens of microseconds, fine for a draw per episode or per replan.
- :func:`counter_uniforms`: a counter-based stream (SplitMix64; Steele, Lea and Flood 2014, "Fast
  splittable pseudorandom number generators", OOPSLA), where the ``i``-th number of a stream is a pure
  function ``mix64(key + (i + 1) * GAMMA)`` of the stream's 64-bit key (:func:`stream_key`) and the
  counter ``i``. No state is carried, so the numbers of many streams at many counters come out of one
  vectorised numpy call, and each number still depends only on its own (key, counter), never on which
  other streams are computed with it. The AR head uses this for its Gumbel noise, where a generator
  per row and token position was most of the decode loop's cost.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

__all__ = [
    "COUNTER_STRIDE",
    "counter_uniforms",
    "key_seed",
    "mix64",
    "numpy_generator",
    "stream_key",
    "tag",
]

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
"""SplitMix64's Weyl increment (the odd integer closest to 2**64 / golden ratio)."""
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

COUNTER_STRIDE = 1 << 16
"""Counters of one stream are ``position * COUNTER_STRIDE + index`` with ``index < COUNTER_STRIDE``."""


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


def stream_key(*parts: int) -> int:
    """A 64-bit key of a counter-based stream, derived from the key tuple like :func:`key_seed`."""
    state = np.random.SeedSequence(list(_check(parts))).generate_state(2, dtype=np.uint32)
    return int(state[0]) | (int(state[1]) << 32)


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function (Stafford's "Mix13"): a bijection on uint64 with full avalanche."""
    z = np.array(z, dtype=np.uint64)  # a copy, mixed in place below
    shifted = np.empty_like(z)
    with np.errstate(over="ignore"):
        np.right_shift(z, np.uint64(30), out=shifted)
        z ^= shifted
        z *= _M1
        np.right_shift(z, np.uint64(27), out=shifted)
        z ^= shifted
        z *= _M2
    np.right_shift(z, np.uint64(31), out=shifted)
    z ^= shifted
    return z


def counter_uniforms(keys: np.ndarray | Sequence[int], position: int, n: int) -> np.ndarray:
    """Uniforms float64 [len(keys), n] in the open interval (0, 1), one stream per key.

    Entry ``[r, i]`` is number ``position * COUNTER_STRIDE + i`` of the SplitMix64 stream with key
    ``keys[r]``: ``mix64(keys[r] + (counter + 1) * GAMMA)``, its top 52 bits ``k`` mapped to
    ``(k + 0.5) / 2**52`` (exact in float64, never 0 or 1, so ``log(u)`` and ``log(-log(u))`` are finite).
    Row ``r`` depends on ``keys[r]``, ``position`` and ``i`` only: the same bytes whichever rows share the
    call.
    """
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or position < 0:
        raise ValueError(f"position must be a non-negative integer, got {position!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 < n <= COUNTER_STRIDE:
        raise ValueError(f"n must be an integer in [1, {COUNTER_STRIDE}], got {n!r}")
    key_array = np.asarray(keys, dtype=np.uint64).reshape(-1, 1)
    counters = np.arange(n, dtype=np.uint64)
    counters += np.uint64(int(position) * COUNTER_STRIDE + 1)
    with np.errstate(over="ignore"):
        counters *= _GAMMA
        z = mix64(key_array + counters)
    # 1 + k / 2**52 in [1, 2) by setting the exponent bits; minus (1 - 2**-53) is exactly (k + 0.5) / 2**52.
    z >>= np.uint64(12)
    z |= np.uint64(0x3FF0000000000000)
    u = z.view(np.float64)
    u -= 1.0 - 2.0**-53
    return u
