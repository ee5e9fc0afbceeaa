"""AR head: grammar mask, Gumbel-max sampling, keyed draws and batch-composition invariance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from grpo_probe.policies import RowKey, SamplingMode, load_policy
from grpo_probe.policies.ar_head import ARPolicy, grammar_mask_table, gumbel_noise, masked_step_distribution
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
        logits = policy.model(torch.from_numpy(obs), bos)[:, 0]
    admissible = policy._mask_table[torch.tensor([300])]
    logp, entropy = masked_step_distribution(logits, admissible, 1.6)
    assert float(logp[0, row.token_ids[0]]) == pytest.approx(row.token_logprobs[0], abs=1e-5)
    assert float(entropy[0]) == pytest.approx(row.entropy[0], abs=1e-5)


def test_gumbel_max_at_temperature_samples_softmax_of_logits_over_temperature() -> None:
    """Chi-square goodness of fit of 6000 keyed Gumbel-max draws against softmax(logits / T)."""
    logits = torch.tensor([[1.0, 0.2, -0.5, 2.0, 0.0]], dtype=torch.float64)
    admissible = torch.ones_like(logits, dtype=torch.bool)
    temperature = 1.6
    logp, _ = masked_step_distribution(logits, admissible, temperature)
    draws = [
        int(torch.argmax(logp[0] + gumbel_noise(RowKey(11, seed, 0, draw), 0, 5)))
        for seed in range(1000)
        for draw in range(6)
    ]
    observed = np.bincount(draws, minlength=5)
    expected = torch.softmax(logits[0] / temperature, dim=0).numpy() * len(draws)
    assert chisquare(observed, expected).pvalue > 1e-3
    # The same draws at T = 1 would be detectably different (the test can fail).
    at_one = torch.softmax(logits[0], dim=0).numpy() * len(draws)
    assert chisquare(observed, at_one).pvalue < 1e-6


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
