"""The pilot's group advantage, clipped surrogate and KL terms, checked against their definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from grpo_probe.phase2.losses import (
    ar_kl_k3,
    clipped_policy_loss,
    flow_kl_gaussian,
    flow_kl_velocity_weight,
    token_mean,
)
from grpo_probe.phase2.reward import group_advantages
from grpo_probe.policies.flow_sde import sde_sigma, sde_step


def test_group_advantage_is_the_zscore_with_unbiased_std_and_epsilon() -> None:
    rewards = [1.0, 3.0, 2.0, -4.0, -4.0, 0.0]
    groups = [7, 7, 7, 8, 8, 8]
    adv = group_advantages(rewards, groups, epsilon=1e-6, min_group_std=0.0)
    for members in (slice(0, 3), slice(3, 6)):
        r = np.array(rewards[members])
        expected = (r - r.mean()) / (np.std(r, ddof=1) + 1e-6)  # torch.std is unbiased, as in verl
        np.testing.assert_allclose(adv.advantage[members], expected, rtol=0, atol=1e-15)
        assert adv.advantage[members].sum() == pytest.approx(0.0, abs=1e-12)


def test_a_group_of_one_gets_mean_zero_and_std_one_as_in_verl() -> None:
    adv = group_advantages([5.0, 1.0, 2.0], [1, 2, 2], epsilon=1e-6, min_group_std=0.0)
    assert adv.group_mean[0] == 0.0 and adv.group_std[0] == 1.0
    assert adv.advantage[0] == pytest.approx(5.0 / (1.0 + 1e-6))


def test_dynamic_sampling_drops_groups_whose_std_is_at_or_below_the_tolerance() -> None:
    rewards = [1.0, 1.0, 0.0, 0.1, 0.0, 3.0]
    adv = group_advantages(
        rewards, [0, 0, 1, 1, 2, 2], epsilon=1e-6, min_group_std=np.std([0.0, 0.1], ddof=1)
    )
    assert adv.kept.tolist() == [False, False, False, False, True, True]  # equal, at the tolerance, above


def _loss(ratio: float, advantage: float, low: float = 0.2, high: float = 0.28) -> tuple[float, float]:
    logprob = torch.tensor([[math.log(ratio)]], dtype=torch.float64)
    old = torch.zeros_like(logprob)
    result = clipped_policy_loss(
        logprob,
        old,
        torch.full_like(logprob, advantage),
        torch.ones_like(logprob, dtype=torch.bool),
        low,
        high,
    )
    return float(result.loss), result.clip_fraction


@pytest.mark.parametrize(
    ("ratio", "advantage", "expected", "clipped"),
    [
        (1.25, 1.0, -1.25, 0.0),  # inside [0.8, 1.28]: the plain ratio
        (1.40, 1.0, -1.28, 1.0),  # clip-higher: a positive advantage stops at 1 + 0.28
        (1.40, -1.0, 1.40, 0.0),  # a negative advantage is never clipped above (the min keeps r A)
        (0.50, -1.0, 0.80, 1.0),  # ... and stops at 1 - 0.2 below
        (0.50, 1.0, -0.50, 0.0),  # a positive advantage is never clipped below
    ],
)
def test_clipped_surrogate_takes_the_pessimistic_term_with_decoupled_clip_ranges(
    ratio: float, advantage: float, expected: float, clipped: float
) -> None:
    loss, clip_fraction = _loss(ratio, advantage)
    assert loss == pytest.approx(expected, abs=1e-12)  # -min(r A, clip(r, 0.8, 1.28) A)
    assert clip_fraction == clipped


def test_token_mean_weighs_every_valid_token_equally_across_rows_of_any_length() -> None:
    values = torch.tensor([[1.0, 1.0, 1.0, 1.0], [5.0, 9.0, 9.0, 9.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True, True], [True, False, False, False]])
    assert float(token_mean(values, mask)) == pytest.approx(9.0 / 5.0)  # not (1 + 5) / 2 per sequence
    with pytest.raises(ValueError, match="no valid entry"):
        token_mean(values, torch.zeros_like(mask))


def test_ar_kl_estimator_is_zero_for_equal_policies_and_positive_otherwise() -> None:
    logprob = torch.tensor([-1.0, -2.0, -0.5], dtype=torch.float64)
    assert torch.equal(ar_kl_k3(logprob, logprob), torch.zeros(3, dtype=torch.float64))
    kl = ar_kl_k3(logprob, logprob + torch.tensor([0.3, -0.4, 1.0], dtype=torch.float64))
    assert bool((kl > 0).all())
    ratio = math.exp(0.3)  # pi_ref / pi_theta
    assert float(kl[0]) == pytest.approx(ratio - math.log(ratio) - 1)


def test_flow_kl_between_sde_transitions_is_a_weighted_velocity_mse() -> None:
    """Same x, two velocities: ||mean - mean_ref||^2 / (2 std^2) = w ||v - v_ref||^2 (losses.py)."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn((2, 50, 6), generator=gen, dtype=torch.float64)
    v, v_ref = (torch.randn((2, 50, 6), generator=gen, dtype=torch.float64) for _ in range(2))
    for t, t_next in ((1.0, 0.9), (0.6, 0.5), (0.1, 0.0)):
        _, mean, std = sde_step(x, v, t, t_next, 0.5, None)
        _, mean_ref, _ = sde_step(x, v_ref, t, t_next, 0.5, None)
        weight = flow_kl_velocity_weight(t, t_next, sde_sigma(0.5, t, t_next))
        velocity_mse = ((v - v_ref) ** 2).flatten(1).sum(dim=1)
        torch.testing.assert_close(
            flow_kl_gaussian(mean, mean_ref, std), weight * velocity_mse, rtol=1e-10, atol=0
        )
