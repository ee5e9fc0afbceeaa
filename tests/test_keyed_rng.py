"""Keyed random streams: pure functions of their keys, independent of what else is drawn with them."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kstest

from grpo_probe.keyed_rng import (
    COUNTER_STRIDE,
    CounterStreams,
    counter_uniforms,
    key_seed,
    mix64,
    stream_key,
    tag,
)

_GAMMA = np.uint64(0x9E3779B97F4A7C15)


def test_mix64_is_splitmix64s_output_function() -> None:
    """The first outputs of SplitMix64 seeded with 1234567 (the reference C implementation's values)."""
    states = np.uint64(1234567) + np.arange(1, 4, dtype=np.uint64) * _GAMMA
    assert mix64(states).tolist() == [6457827717110365317, 3203168211198807973, 9817491932198370423]


def test_counter_uniforms_are_the_documented_function_of_key_and_counter() -> None:
    keys = np.array([stream_key(1, tag("a"), 2), stream_key(1, tag("a"), 3)], dtype=np.uint64)
    u = counter_uniforms(keys, 5, 7)
    counters = np.arange(7, dtype=np.uint64) + np.uint64(5 * COUNTER_STRIDE + 1)
    top52 = mix64(keys[:, None] + counters * _GAMMA) >> np.uint64(12)
    assert u.tobytes() == ((top52.astype(np.float64) + 0.5) * 2.0**-52).tobytes()


def test_a_streams_numbers_do_not_depend_on_the_streams_computed_with_it() -> None:
    """Row r of one vectorised call: the same bytes alone, among other keys, in any order."""
    keys = np.array([stream_key(9, tag("rows"), seed, 0, draw) for seed in range(5) for draw in (0, 1)])
    together = counter_uniforms(keys, 40, 1026)
    for r, key in enumerate(keys):
        assert counter_uniforms([key], 40, 1026)[0].tobytes() == together[r].tobytes()
    shuffled = [7, 2, 9, 0]
    assert counter_uniforms(keys[shuffled], 40, 1026).tobytes() == together[shuffled].tobytes()
    assert counter_uniforms(keys[:3], 40, 10).tobytes() == together[:3, :10].tobytes()  # a prefix of ids


def test_streams_differ_by_key_and_position_and_look_uniform() -> None:
    a = counter_uniforms([stream_key(1, 2, 3)], 0, 4096)[0]
    assert not np.array_equal(a, counter_uniforms([stream_key(1, 2, 4)], 0, 4096)[0])
    assert not np.array_equal(a, counter_uniforms([stream_key(1, 2, 3)], 1, 4096)[0])
    assert np.all((a > 0.0) & (a < 1.0))
    assert kstest(a, "uniform").pvalue > 1e-3


def test_stream_key_is_keyed_like_key_seed() -> None:
    assert stream_key(4, 5, 6) == stream_key(4, 5, 6)
    assert stream_key(4, 5, 6) != stream_key(4, 5, 7)
    assert stream_key(4, 5, 6) & ((1 << 63) - 1) == key_seed(4, 5, 6)
    with pytest.raises(ValueError, match="key part 1"):
        stream_key(4, -1)


@pytest.mark.parametrize(
    ("position", "n", "match"),
    [(-1, 4, "position"), (0, 0, "n must be"), (0, COUNTER_STRIDE + 1, "n must be"), (True, 4, "position")],
)
def test_counter_uniforms_rejects_bad_counters(position: int, n: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        counter_uniforms([1], position, n)


def test_float32_uniforms_are_the_halves_of_each_output() -> None:
    """float32: numbers 2j and 2j + 1 are output j's low and high 32 bits, each as (k + 0.5) / 2**23 with k
    its top 23 bits."""
    keys = np.array([stream_key(1, tag("a"), 2), stream_key(1, tag("a"), 3)], dtype=np.uint64)
    counters = np.arange(4, dtype=np.uint64) + np.uint64(5 * COUNTER_STRIDE + 1)
    outputs = mix64(keys[:, None] + counters * _GAMMA)
    halves = np.stack([outputs & np.uint64(0xFFFFFFFF), outputs >> np.uint64(32)], axis=-1).reshape(2, 8)
    expected = (((halves >> np.uint64(9)).astype(np.float64) + 0.5) * 2.0**-23).astype(np.float32)
    u = counter_uniforms(keys, 5, 8, np.float32)
    assert u.dtype == np.float32 and u.tobytes() == expected.tobytes()
    assert counter_uniforms(keys, 5, 7, np.float32).tobytes() == u[:, :7].tobytes()  # odd n: a prefix
    a = counter_uniforms([stream_key(1, 2, 3)], 0, 4096, np.float32)[0]
    assert np.all((a > 0.0) & (a < 1.0))
    assert kstest(a, "uniform").pvalue > 1e-3


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("chunk", [1, 3, 4])
def test_counter_streams_give_counter_uniforms_bytes_in_any_order(dtype: type, chunk: int) -> None:
    keys = np.array([stream_key(9, tag("rows"), seed) for seed in range(5)], dtype=np.uint64)
    uniforms = CounterStreams(keys, 1026, chunk=chunk, dtype=dtype)
    logs = CounterStreams(keys, 1026, chunk=chunk, log=True, dtype=dtype)
    for position in (0, 1, 2, 7, 3, 300, 299, 2**20):
        expected = counter_uniforms(keys, position, 1026, dtype)
        assert uniforms(position).tobytes() == expected.tobytes()
        assert logs(position).tobytes() == np.log(expected).tobytes()
    with pytest.raises(ValueError, match="position"):
        uniforms(-1)
