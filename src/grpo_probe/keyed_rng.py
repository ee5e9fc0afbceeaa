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
  splittable pseudorandom number generators", OOPSLA), where the ``i``-th output of a stream is a pure
  function ``mix64(key + (i + 1) * GAMMA)`` of the stream's 64-bit key (:func:`stream_key`) and the
  counter ``i``, read as one float64 uniform or as two float32 ones. No state is carried, so the numbers
  of many streams at many counters come out of one vectorised numpy call (:class:`CounterStreams` draws
  a few positions per call), and each number still depends only on its own (key, counter), never on
  which other streams are computed with it. The AR head uses this for its Gumbel noise, where a
  generator per row and token position was most of the decode loop's cost.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from collections.abc import Sequence

import numpy as np

__all__ = [
    "COUNTER_STRIDE",
    "CounterStreams",
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
    return _mix64_inplace(np.array(z, dtype=np.uint64))  # a copy, mixed in place


def _mix64_inplace(z: np.ndarray, shifted: np.ndarray | None = None) -> np.ndarray:
    """:func:`mix64` of a uint64 array, written over it (one scratch array, ``shifted`` when given, no
    other temporaries)."""
    if shifted is None:
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


@functools.lru_cache(maxsize=8)
def _weyl_steps(n: int) -> np.ndarray:
    """(i + 1) * GAMMA mod 2**64 for i < n, read-only: the index's share of every stream's state."""
    steps = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        steps *= _GAMMA
    steps.flags.writeable = False
    return steps


def _counter_outputs(
    z: np.ndarray, scratch: np.ndarray, keys: np.ndarray, positions: np.ndarray, steps: np.ndarray
) -> None:
    """z = mix64(key + (position * COUNTER_STRIDE + i + 1) * GAMMA), written over z; ``keys``, ``positions``
    and ``steps`` ((i + 1) * GAMMA) broadcast to z's shape, ``scratch`` is uint64 of that shape.

    The state splits into key + position * COUNTER_STRIDE * GAMMA, small, plus the cached (i + 1) * GAMMA:
    one addition over the array instead of building every counter. uint64 array arithmetic wraps mod 2**64
    without warnings.
    """
    shares = positions * np.uint64(COUNTER_STRIDE)
    shares *= _GAMMA
    np.add(shares + keys, steps, out=z)
    _mix64_inplace(z, scratch)


def _uniforms_over(z: np.ndarray, dtype: type[np.floating]) -> np.ndarray:
    """Outputs z (uint64, overwritten) as uniforms in (0, 1): float64, one per output, from its top 52 bits k,
    (k + 0.5) / 2**52; or float32, two per output (its low 32 bits, then its high 32 bits), from each half's
    top 23 bits k, (k + 0.5) / 2**23. Exact in either type, never 0 or 1, so log(u) and log(-log(u)) are
    finite. Setting the exponent bits of k makes 1 + k / 2**p in [1, 2); subtracting 1 - 2**-(p + 1) is
    then exact."""
    if dtype == np.float64:
        z >>= np.uint64(12)
        z |= np.uint64(0x3FF0000000000000)
        u = z.view(np.float64)
        u -= 1.0 - 2.0**-53
        return u
    halves = z.view(np.uint32)
    if sys.byteorder == "big":  # the view is (high, low) there; the definition is (low, high)
        halves = np.ascontiguousarray(halves.reshape(*z.shape, 2)[..., ::-1]).reshape(*z.shape[:-1], -1)
    halves >>= np.uint32(9)
    halves |= np.uint32(0x3F800000)
    u = halves.view(np.float32)
    u -= np.float32(1.0 - 2.0**-24)
    return u


def _check_counters(position: int, n: int, dtype: type[np.floating]) -> None:
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or position < 0:
        raise ValueError(f"position must be a non-negative integer, got {position!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 < n <= COUNTER_STRIDE:
        raise ValueError(f"n must be an integer in [1, {COUNTER_STRIDE}], got {n!r}")
    if dtype not in (np.float64, np.float32):
        raise ValueError(f"dtype must be numpy.float64 or numpy.float32, got {dtype!r}")


def _outputs_for(n: int, dtype: type[np.floating]) -> int:
    return n if dtype == np.float64 else (n + 1) // 2


def counter_uniforms(
    keys: np.ndarray | Sequence[int], position: int, n: int, dtype: type[np.floating] = np.float64
) -> np.ndarray:
    """Uniforms [len(keys), n] in the open interval (0, 1), one stream per key, float64 or float32.

    Output ``j`` of the stream with key ``keys[r]`` at ``position`` is SplitMix64's
    ``mix64(keys[r] + (position * COUNTER_STRIDE + j + 1) * GAMMA)``. In float64, entry ``[r, i]`` is output
    ``i`` as (k + 0.5) / 2**52 with k its top 52 bits; in float32, entries ``2j`` and ``2j + 1`` are output
    ``j``'s low and high 32 bits, each as (k + 0.5) / 2**23 with k its top 23 bits (half the arithmetic per
    number). Row ``r`` depends on ``keys[r]``, ``position`` and ``i`` only: the same bytes whichever rows
    share the call.
    """
    _check_counters(position, n, dtype)
    key_array = np.asarray(keys, dtype=np.uint64).reshape(-1, 1)
    m = _outputs_for(int(n), dtype)
    z = np.empty((len(key_array), m), dtype=np.uint64)
    positions = np.full((1, 1), position, dtype=np.uint64)  # an array: scalar arithmetic would warn on wrap
    _counter_outputs(z, np.empty_like(z), key_array, positions, _weyl_steps(m))
    return _uniforms_over(z, dtype)[:, :n]


class CounterStreams:
    """Numbers of a fixed set of counter-based streams, position after position: :func:`counter_uniforms` of
    the same keys (or their logarithms), computed ``chunk`` positions at a time.

    For a loop that needs every stream's ``n`` numbers at each of many positions (the AR decode loop, once
    per token): the dozen array operations of the SplitMix64 arithmetic run once per ``chunk`` positions,
    on a [chunk, len(keys), n] array, in place in buffers reused from chunk to chunk (no temporaries, no
    argument checks per number). Each number is still the pure function of (key, position, index) that
    :func:`counter_uniforms` defines: the same bytes whatever the chunk, the order of the requests or the
    other keys (tested).
    """

    def __init__(
        self,
        keys: np.ndarray | Sequence[int],
        n: int,
        *,
        chunk: int = 4,
        log: bool = False,
        dtype: type[np.floating] = np.float64,
    ) -> None:
        _check_counters(0, n, dtype)
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be an integer >= 1, got {chunk!r}")
        self.n, self.log, self.dtype = int(n), log, dtype
        self._chunk = chunk
        self._keys = np.asarray(keys, dtype=np.uint64).reshape(1, -1, 1)
        m = _outputs_for(self.n, dtype)
        self._steps = _weyl_steps(m)
        self._state = np.empty((chunk, self._keys.shape[1], m), dtype=np.uint64)
        self._scratch = np.empty_like(self._state)
        self._values: np.ndarray | None = None
        self._first = -1

    def __call__(self, position: int) -> np.ndarray:
        """[len(keys), n]: ``counter_uniforms(keys, position, n, dtype)``, or its logarithm with ``log``.

        A view into the chunk buffer, valid until a call for a position outside the current chunk. A caller
        that asks for each position once may overwrite it (e.g. as a ufunc's ``out``); asking for that
        position again within the chunk would then return the overwritten values.
        """
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or position < 0:
            raise ValueError(f"position must be a non-negative integer, got {position!r}")
        first = position - position % self._chunk
        if first != self._first:
            positions = np.arange(first, first + self._chunk, dtype=np.uint64).reshape(-1, 1, 1)
            _counter_outputs(self._state, self._scratch, self._keys, positions, self._steps)
            values = _uniforms_over(self._state, self.dtype)
            if self.log:
                np.log(values, out=values)
            self._values, self._first = values, first
        assert self._values is not None
        return self._values[position - first, :, : self.n]
