"""Phase 2's policy losses and advantage estimators are registered by name; the pilot's registered ones
give exactly the numbers of the functions they name, and a toy one registered here is found by its name."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
import torch

from grpo_probe.phase2 import losses, reward
from grpo_probe.phase2.losses import (
    PILOT_POLICY_LOSS,
    PolicyLoss,
    clipped_policy_loss,
    policy_loss,
    register_policy_loss,
    token_mean,
)
from grpo_probe.phase2.reward import (
    PILOT_ADV_ESTIMATOR,
    GroupAdvantages,
    adv_estimator,
    group_advantages,
    register_adv_est,
)
from grpo_probe.prereg import Prereg


def _batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    logprob = torch.randn((4, 6), generator=gen, dtype=torch.float64, requires_grad=True)
    old = logprob.detach() + 0.3 * torch.randn((4, 6), generator=gen, dtype=torch.float64)
    advantages = torch.tensor([1.5, -0.5, 0.25, -1.25], dtype=torch.float64)[:, None].expand(4, 6)
    mask = torch.arange(6)[None, :] < torch.tensor([6, 3, 5, 1])[:, None]
    return logprob, old, advantages, mask


@pytest.mark.parametrize("head", ["ar", "flow"])
def test_the_pilots_policy_loss_is_the_clipped_surrogate_bit_for_bit(design: Prereg, head: str) -> None:
    recipe = design.phase2.recipe(head)  # type: ignore[union-attr]
    logprob, old, advantages, mask = _batch()
    registered = policy_loss(PILOT_POLICY_LOSS)(logprob, old, advantages, mask, recipe)
    direct = clipped_policy_loss(
        logprob, old, advantages, mask, recipe.clip_ratio_low, recipe.clip_ratio_high
    )
    assert registered.loss.detach().numpy().tobytes() == direct.loss.detach().numpy().tobytes()
    assert (registered.clip_fraction, registered.approx_kl, registered.ratio_mean) == (
        direct.clip_fraction,
        direct.approx_kl,
        direct.ratio_mean,
    )


def test_the_pilots_advantage_estimator_is_grpos_bit_for_bit(design: Prereg) -> None:
    phase2 = design.phase2
    assert phase2 is not None
    rewards = [3.0, 1.0, 2.5, -4.0, 0.5, 0.5]
    groups = [7, 7, 7, 9, 9, 9]
    registered = adv_estimator(PILOT_ADV_ESTIMATOR)(rewards, groups, phase2)
    direct = group_advantages(rewards, groups, phase2.advantage_epsilon, phase2.min_group_std)
    for name in ("group_mean", "group_std", "advantage", "kept"):
        assert getattr(registered, name).tobytes() == getattr(direct, name).tobytes(), name


def test_a_toy_loss_and_estimator_are_found_by_their_names(
    monkeypatch: pytest.MonkeyPatch, design: Prereg
) -> None:
    monkeypatch.setattr(losses, "POLICY_LOSSES", losses.POLICY_LOSSES.copy())
    monkeypatch.setattr(reward, "ADV_ESTIMATORS", reward.ADV_ESTIMATORS.copy())

    @register_policy_loss("vanilla_pg")
    def vanilla_pg(
        logprob: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, recipe: object
    ) -> PolicyLoss:
        return PolicyLoss(token_mean(-adv * logprob, mask), 0.0, 0.0, 1.0)

    @register_adv_est("mean_baseline")
    def mean_baseline(rewards: Sequence[float], groups: Sequence[int], phase2: object) -> GroupAdvantages:
        r = np.asarray(rewards, dtype=np.float64)
        mean = np.full_like(r, r.mean())
        return GroupAdvantages(mean, np.ones_like(r), r - mean, np.ones(r.shape, dtype=bool))

    assert policy_loss("vanilla_pg") is vanilla_pg and adv_estimator("mean_baseline") is mean_baseline
    logprob, old, advantages, mask = _batch()
    out = policy_loss("vanilla_pg")(logprob, old, advantages, mask, design.phase2.recipe("ar"))  # type: ignore[union-attr]
    out.loss.backward()
    assert logprob.grad is not None and float(logprob.grad.abs().sum()) > 0
    assert adv_estimator("mean_baseline")([1.0, 3.0], [0, 0], design.phase2).advantage.tolist() == [-1.0, 1.0]

    with pytest.raises(ValueError, match="policy loss 'vanilla_pg' is already registered"):
        register_policy_loss("vanilla_pg")(lambda *a: vanilla_pg(*a))
    with pytest.raises(ValueError, match="advantage estimator 'mean_baseline' is already registered"):
        register_adv_est("mean_baseline")(lambda *a: mean_baseline(*a))
    with pytest.raises(
        ValueError, match=r"no policy loss 'ppo_kl' is registered \(registered: clip_higher, "
    ):
        policy_loss("ppo_kl")
    with pytest.raises(
        ValueError, match=r"no advantage estimator 'rloo' is registered \(registered: grpo_outcome"
    ):
        adv_estimator("rloo")
    with pytest.raises(ValueError, match=r"no policy loss 'clip_highr' .*; did you mean 'clip_higher'\?$"):
        policy_loss("clip_highr")
    with pytest.raises(ValueError, match=r"; did you mean 'mean_baseline'\?$"):
        adv_estimator("mean_baselin")
