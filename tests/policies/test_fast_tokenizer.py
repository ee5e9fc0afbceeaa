"""FAST tokenizer: round trip, decode totality, serialization."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_probe.policies.fast_tokenizer import FastTokenizer
from grpo_probe.policies.synthetic_demos import synthetic_demos


@pytest.fixture(scope="module")
def tokenizer() -> FastTokenizer:
    return FastTokenizer.fit(synthetic_demos(600, run_key=1).chunks)


def test_round_trip_error_is_within_the_rounding_bound_on_smooth_random_chunks(
    tokenizer: FastTokenizer,
) -> None:
    """Rounding moves each DCT coefficient by <= 0.5 / scale = 0.05 (normalized units); the ortho DCT
    preserves the L2 norm, so per chunk and dim the RMS error is <= 0.05 * half the quantile span."""
    chunks = synthetic_demos(200, run_key=2).chunks.astype(np.float64)
    half_span = 0.5 * (tokenizer.q_high - tokenizer.q_low)
    for chunk in chunks:
        err = tokenizer.decode(tokenizer.encode(chunk)) - chunk
        rms_per_dim = np.sqrt(np.mean(err**2, axis=0))
        assert np.all(rms_per_dim <= 0.05 * half_span + 1e-12)
    rms, worst = tokenizer.round_trip_error(chunks)
    assert rms < 0.01
    assert worst < 0.05


def test_encoded_ids_cover_exactly_300_coefficients(tokenizer: FastTokenizer) -> None:
    counts = tokenizer.coefficient_counts
    for chunk in synthetic_demos(50, run_key=3).chunks:
        ids = tokenizer.encode(chunk)
        assert all(0 <= i < tokenizer.vocab_size for i in ids)
        assert int(counts[ids].sum()) == 300


def test_id_layout_is_1024_bpe_symbols_then_bos_and_eos(tokenizer: FastTokenizer) -> None:
    assert tokenizer.n_ids == 1026
    assert (tokenizer.bos_id, tokenizer.eos_id) == (1024, 1025)
    assert tokenizer.coefficient_counts[[1024, 1025]].tolist() == [0, 0]


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.integers(min_value=0, max_value=1025), max_size=400))
def test_decode_of_any_token_sequence_is_a_finite_50_by_6_chunk(
    tokenizer: FastTokenizer, ids: list[int]
) -> None:
    chunk = tokenizer.decode(ids)
    assert chunk.shape == (50, 6)
    assert np.all(np.isfinite(chunk))


def test_decode_rejects_ids_outside_the_vocabulary(tokenizer: FastTokenizer) -> None:
    with pytest.raises(ValueError, match="outside"):
        tokenizer.decode([3, 1026])


def test_decode_stops_at_eos_and_skips_bos(tokenizer: FastTokenizer) -> None:
    ids = tokenizer.encode(synthetic_demos(1, run_key=4).chunks[0])
    plain = tokenizer.decode(ids)
    assert np.array_equal(tokenizer.decode([tokenizer.bos_id, *ids, tokenizer.eos_id, 5, 6]), plain)


def test_fit_is_deterministic_and_json_round_trips(tokenizer: FastTokenizer) -> None:
    chunks = synthetic_demos(600, run_key=1).chunks
    assert FastTokenizer.fit(chunks).to_json() == tokenizer.to_json()
    restored = FastTokenizer.from_json(tokenizer.to_json())
    chunk = chunks[0]
    assert restored.encode(chunk) == tokenizer.encode(chunk)
    assert np.array_equal(restored.decode(tokenizer.encode(chunk)), tokenizer.decode(tokenizer.encode(chunk)))


def test_from_json_names_the_source_on_bad_input() -> None:
    with pytest.raises(ValueError, match=r"ckpt\.pt: tokenizer_json"):
        FastTokenizer.from_json('{"format": "other"}', where="ckpt.pt: tokenizer_json")


def test_low_frequencies_come_first_with_dims_interleaved(tokenizer: FastTokenizer) -> None:
    """A chunk that is constant in time has only DC coefficients: the first 6 decoded coefficients."""
    centre = 0.5 * (tokenizer.q_low + tokenizer.q_high)
    chunk = np.repeat((centre + 0.3 * (tokenizer.q_high - tokenizer.q_low))[None], 50, axis=0)
    coefs = tokenizer.decode_coefficients(tokenizer.encode(chunk))
    assert np.all(coefs[:6] != 0)
    assert np.all(coefs[6:] == 0)
