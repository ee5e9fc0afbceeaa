"""AR head: grammar mask, Gumbel-max sampling, keyed draws and batch-composition invariance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from grpo_probe.keyed_rng import counter_uniforms
from grpo_probe.policies import RowKey, SamplingMode, load_policy
from grpo_probe.policies.ar_head import (
    ROW_BLOCK,
    ARPolicy,
    grammar_mask_table,
    gumbel_noise,
    gumbel_rows,
    masked_step_distribution,
    row_stream_key,
    sample_step,
    tempered_logits,
)
from grpo_probe.policies.synthetic_demos import SyntheticDemos

T1 = SamplingMode("temperature", temperature=1.0)


@pytest.fixture(scope="module")
def policy(ar_checkpoint: Path) -> ARPolicy:
    loaded = load_policy(ar_checkpoint)
    assert isinstance(loaded, ARPolicy)
    return loaded


def _keys(n: int, draw: int = 0, replan: int = 0) -> list[RowKey]:
    return [RowKey(run_key=3, seed=100 + i, replan=replan, draw=draw) for i in range(n)]


@pytest.mark.parametrize("mode", [SamplingMode("greedy"), T1, SamplingMode("temperature", temperature=1.6)])
def test_sampled_token_ids_do_not_depend_on_batch_rows(
    policy: ARPolicy, demos: SyntheticDemos, mode: SamplingMode
) -> None:
    """A row alone and at position 4 among 8 others: identical ids, log-probs and action bytes."""
    keys = _keys(9)
    batch = policy.act(demos.obs[:9], keys, mode)
    alone = policy.act(demos.obs[4:5], keys[4:5], mode)
    assert np.array_equal(batch.diagnostics[4].token_ids, alone.diagnostics[0].token_ids)
    assert batch.diagnostics[4].token_logprobs.tobytes() == alone.diagnostics[0].token_logprobs.tobytes()
    assert batch.diagnostics[4].entropy.tobytes() == alone.diagnostics[0].entropy.tobytes()
    assert batch.actions[4].tobytes() == alone.actions[0].tobytes()


@pytest.mark.parametrize("temperature", [0.5, 1.0, 4.0])
def test_grammar_masked_sampling_always_decodes_exactly_300_coefficients(
    policy: ARPolicy, demos: SyntheticDemos, temperature: float
) -> None:
    counts = policy.tokenizer.coefficient_counts
    out = policy.act(demos.obs[:16], _keys(16), SamplingMode("temperature", temperature=temperature))
    for row in out.diagnostics:
        assert int(counts[row.token_ids].sum()) == 300
    assert out.actions.shape == (16, 50, 6)
    assert out.actions.dtype == np.float32
    assert np.all(np.abs(out.actions) <= 1.0)


def test_grammar_mask_admits_only_tokens_that_fit_and_forces_eos_at_300() -> None:
    counts = np.array([1, 2, 3, 0, 7, 0, 0])  # ids 5, 6 are BOS and EOS
    table = grammar_mask_table(counts, n_coefficients=8, eos_id=6)
    assert table[0].tolist() == [False] * 6 + [True]
    assert table[2].tolist() == [True, True, False, False, False, False, False]
    assert table[8].tolist() == [True, True, True, False, True, False, False]


def test_recorded_logprobs_are_those_of_the_masked_tempered_softmax(
    policy: ARPolicy, demos: SyntheticDemos
) -> None:
    mode = SamplingMode("temperature", temperature=1.6)
    row = policy.act(demos.obs[:1], _keys(1), mode).diagnostics[0]
    assert row.logprob == pytest.approx(float(row.token_logprobs.sum()), abs=0.0)
    assert np.all(row.token_logprobs <= 0.0)
    assert np.all(row.entropy >= 0.0)
    # Recompute the first step by teacher forcing through the model.
    obs = (demos.obs[:1] - policy.obs_mean) / policy.obs_std
    bos = torch.tensor([[policy.tokenizer.bos_id]])
    with torch.no_grad():
        logits = policy.model(torch.from_numpy(obs), bos)[:, 0].numpy()
    admissible = policy._mask_table[[300]]
    logp, entropy = masked_step_distribution(logits, admissible, 1.6)
    assert float(logp[0, row.token_ids[0]]) == pytest.approx(row.token_logprobs[0], abs=1e-5)
    assert float(entropy[0]) == pytest.approx(row.entropy[0], abs=1e-5)


def test_gumbel_max_at_temperature_samples_softmax_of_logits_over_temperature() -> None:
    """Chi-square goodness of fit of 6000 keyed draws of the decode loop's sampler (:func:`sample_step` on
    the rows' keyed uniforms) against softmax(logits / T)."""
    logits = np.array([[1.0, 0.2, -0.5, 2.0, 0.0]], dtype=np.float32)
    inadmissible = np.zeros_like(logits, dtype=bool)
    temperature = 1.6
    draws = []
    for seed in range(1000):
        for draw in range(6):
            stream = np.array([row_stream_key(RowKey(11, seed, 0, draw))], dtype=np.uint64)
            log_u = np.log(counter_uniforms(stream, 0, 5, np.float32))
            draws.append(int(sample_step(logits.copy(), inadmissible, temperature, log_u)[0][0]))
    observed = np.bincount(draws, minlength=5)
    x = logits[0].astype(np.float64)
    softmax = np.exp(x / temperature) / np.exp(x / temperature).sum()
    assert chisquare(observed, softmax * len(draws)).pvalue > 1e-3
    # The same draws at T = 1 would be detectably different (the test can fail).
    at_one = np.exp(x) / np.exp(x).sum()
    assert chisquare(observed, at_one * len(draws)).pvalue < 1e-6


def test_a_rows_gumbel_noise_does_not_depend_on_the_rows_drawn_with_it() -> None:
    """The block's one vectorised noise call gives each row the bytes it gets alone, in any row order."""
    keys = [RowKey(3, 100 + i, 2, i % 3) for i in range(8)]
    stream_keys = np.array([row_stream_key(k) for k in keys], dtype=np.uint64)
    block = gumbel_rows(stream_keys, 17, 1026)
    for r, key in enumerate(keys):
        assert block[r].tobytes() == gumbel_noise(key, 17, 1026).tobytes()
    order = [5, 0, 7]
    assert gumbel_rows(stream_keys[order], 17, 1026).tobytes() == block[order].tobytes()
    assert not np.array_equal(gumbel_noise(keys[0], 18, 1026), block[0])  # keyed by the position too


def test_sample_step_is_gumbel_max_with_the_masked_tempered_softmaxs_logprob_and_entropy() -> None:
    """The loop's fused float32 step against the float64 references: the ids of argmax(tempered + Gumbel
    noise) from the same uniforms, and log p(id) and the entropy of the full masked tempered distribution."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(8, 40)).astype(np.float32) * 4
    admissible = rng.random((8, 40)) < 0.6
    admissible[:, 0] = True
    admissible[7] = False
    admissible[7, 3] = True  # one admissible id: a point mass, entropy exactly 0
    streams = np.array([row_stream_key(RowKey(5, seed, 1, 2)) for seed in range(8)], dtype=np.uint64)
    for temperature in (1.0, 1.6):
        tempered = tempered_logits(logits, admissible, temperature)
        logp, reference_entropy = masked_step_distribution(logits, admissible, temperature)
        for position in range(20):
            noise = np.log(counter_uniforms(streams, position, 40, np.float32))
            for log_u, reference_choice in (
                (noise, (tempered + gumbel_rows(streams, position, 40)).argmax(axis=-1)),
                (None, tempered.argmax(axis=-1)),
            ):
                choice, chosen, entropy = sample_step(logits.copy(), ~admissible, temperature, log_u)
                assert np.array_equal(choice, reference_choice)
                np.testing.assert_allclose(chosen, logp[np.arange(8), choice], rtol=0, atol=2e-6)
                np.testing.assert_allclose(entropy, reference_entropy, rtol=0, atol=2e-6)
                assert entropy[7] == 0.0 and chosen[7] == 0.0 and choice[7] == 3


def test_changing_the_draw_changes_sampled_ids(policy: ARPolicy, demos: SyntheticDemos) -> None:
    a = policy.act(demos.obs[:4], _keys(4, draw=0), T1)
    b = policy.act(demos.obs[:4], _keys(4, draw=1), T1)
    again = policy.act(demos.obs[:4], _keys(4, draw=0), T1)
    ids = [[row.token_ids.tolist() for row in out.diagnostics] for out in (a, b, again)]
    assert ids[0] != ids[1]
    assert ids[0] == ids[2]


def test_greedy_ignores_the_draw(policy: ARPolicy, demos: SyntheticDemos) -> None:
    a = policy.act(demos.obs[:2], _keys(2, draw=0), SamplingMode("greedy"))
    b = policy.act(demos.obs[:2], _keys(2, draw=5), SamplingMode("greedy"))
    assert a.actions.tobytes() == b.actions.tobytes()


def test_ar_head_rejects_flow_modes_and_bad_batches(policy: ARPolicy, demos: SyntheticDemos) -> None:
    with pytest.raises(ValueError, match="flow_ode"):
        policy.act(demos.obs[:1], _keys(1), SamplingMode("flow_ode"))
    with pytest.raises(ValueError, match="keys"):
        policy.act(demos.obs[:2], _keys(1), T1)
    bad = demos.obs[:2].copy()
    bad[1, 3] = np.nan
    with pytest.raises(ValueError, match="row 1"):
        policy.act(bad, _keys(2), T1)


def test_temperature_without_gumbel_noise_picks_greedys_ids_with_the_tempered_logprobs(
    policy: ARPolicy, demos: SyntheticDemos
) -> None:
    """The draw-0 oracle's premise: the sampler at T with its noise off reproduces greedy bit for bit."""
    keys = _keys(9, draw=3)
    greedy = policy.act(demos.obs[:9], keys, SamplingMode("greedy"))
    quiet = policy.act(demos.obs[:9], keys, SamplingMode("temperature", temperature=1.6, noise=False))
    noisy = policy.act(demos.obs[:9], keys, SamplingMode("temperature", temperature=1.6))
    assert quiet.actions.tobytes() == greedy.actions.tobytes()
    for g, q in zip(greedy.diagnostics, quiet.diagnostics, strict=True):
        assert np.array_equal(g.token_ids, q.token_ids)
        assert not np.array_equal(g.token_logprobs, q.token_logprobs)  # those of softmax(logits / 1.6)
    assert noisy.actions.tobytes() != greedy.actions.tobytes()


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        (
            {"kind": "greedy", "noise": False},
            r"noise=False is only defined for kind 'temperature'",
        ),
        ({"kind": "flow_ode", "noise": False}, r"SamplingMode.noise=False .* got kind 'flow_ode'"),
        (
            {"kind": "temperature", "temperature": 1.0, "noise": 0},
            r"SamplingMode.noise must be True",
        ),
    ],
)
def test_sampling_mode_validates_the_noise_switch(fields: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SamplingMode(**fields)
    assert SamplingMode("temperature", temperature=1.0).noise is True  # registered designs need no change


@pytest.mark.parametrize("mode", [SamplingMode("greedy"), SamplingMode("temperature", temperature=1.6)])
def test_recorded_logprobs_match_teacher_forcing_within_the_replay_tolerance(
    policy: ARPolicy, demos: SyntheticDemos, mode: SamplingMode
) -> None:
    """Every recorded log-prob and entropy against the phase-2 recomputation: teacher forcing over the
    recorded ids, log softmax(masked_logits / T) in float64. The registered ``phase2.heads.ar.replay_atol``
    is 1e-4 nats; on the registered AR arm the largest difference seen was 4e-6."""
    out = policy.act(demos.obs[:ROW_BLOCK], _keys(ROW_BLOCK, draw=1), mode)
    temperature = 1.0 if mode.kind == "greedy" else 1.6
    obs = torch.from_numpy(((demos.obs[:ROW_BLOCK] - policy.obs_mean) / policy.obs_std).astype(np.float32))
    counts = policy.tokenizer.coefficient_counts
    for r, row in enumerate(out.diagnostics):
        ids = row.token_ids.astype(np.int64)
        inputs = torch.from_numpy(np.concatenate([[policy.tokenizer.bos_id], ids[:-1]]))[None]
        with torch.no_grad():
            logits = policy.model(obs[r : r + 1], inputs)[0].double().numpy()
        remaining = 300 - np.concatenate([[0], np.cumsum(counts[ids])[:-1]])
        logp, entropy = masked_step_distribution(logits, policy._mask_table[remaining], temperature)
        np.testing.assert_allclose(row.token_logprobs, logp[np.arange(len(ids)), ids], rtol=0, atol=1e-4)
        np.testing.assert_allclose(row.entropy, entropy, rtol=0, atol=1e-4)


@pytest.mark.parametrize("mode", [SamplingMode("greedy"), SamplingMode("temperature", temperature=1.6)])
def test_a_registered_row_block_of_20_keeps_rows_independent(
    ar_checkpoint: Path, demos: SyntheticDemos, mode: SamplingMode
) -> None:
    """Blocks of 20 (the registered design's arms.ar.row_block): a row alone, at position 12 of 20 and
    at position 23 of 26 (the second, padded block) gives the same ids, log-probs and action bytes."""
    wide = load_policy(ar_checkpoint, row_block=20)
    assert isinstance(wide, ARPolicy) and wide.row_block == 20
    keys = _keys(26)
    batch = wide.act(demos.obs[:26], keys, mode)
    for row in (12, 23):
        alone = wide.act(demos.obs[row : row + 1], keys[row : row + 1], mode)
        assert np.array_equal(batch.diagnostics[row].token_ids, alone.diagnostics[0].token_ids)
        assert (
            batch.diagnostics[row].token_logprobs.tobytes() == alone.diagnostics[0].token_logprobs.tobytes()
        )
        assert batch.actions[row].tobytes() == alone.actions[0].tobytes()


def test_a_row_block_is_the_ar_heads_alone(flow_checkpoint: Path, ar_checkpoint: Path) -> None:
    with pytest.raises(ValueError, match=r"flow\.pt: a 'flow' head computes in blocks of 8 rows"):
        load_policy(flow_checkpoint, row_block=16)
    assert load_policy(flow_checkpoint, row_block=ROW_BLOCK).head == "flow"
    with pytest.raises(ValueError, match="row_block must be a positive integer"):
        load_policy(ar_checkpoint, row_block=0)
