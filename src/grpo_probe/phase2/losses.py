"""GRPO's clipped objective, its aggregation, and the two KL terms, one formula per function.

Every loss tensor is [rows, positions] with a boolean ``mask`` of the valid entries: for the AR head a
row is one replan's token sequence and a position one token; for the flow head a row is one replan's
chunk and a position one SDE transition (Flow-GRPO treats each denoising step as an action of its MDP).

- Ratio and clipped surrogate, per entry: r = exp(log pi_theta - log pi_old) and
  L = -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A). The papers maximize the min; we minimize its
  negation, hence ``torch.maximum`` of the two negated terms (CleanRL's ``pg_loss``; PPO, Schulman et al.,
  arXiv:1707.06347v2, Eq. 7; GRPO, DeepSeekMath arXiv:2402.03300v3, Eq. 3, per token with the group
  advantage). Clip-higher decouples eps_low and eps_high (DAPO, Yu et al., arXiv:2503.14476v1, Sec. 3.1;
  0.2 and 0.28 there, the memo's [0.8, 1.28]). As verl does, the log-ratio is clamped to [-20, 20] before
  ``exp`` so a far-off flow density ratio cannot overflow.
- Aggregation: token-mean, i.e. the sum over every valid entry of the batch divided by their count (DAPO's
  token-level loss, Sec. 3.3, 1 / sum_i |o_i|; verl's ``agg_loss(..., "token-mean")``). The memo asks for the
  token-level loss: long and short responses weigh each token equally, rather than each response equally
  (DeepSeekMath's 1/|o_i| per response is verl's "seq-mean-token-mean"). The flow head uses the same mean
  over (chunk, step) entries, as Flow-GRPO averages its per-step loss over samples and steps.
- AR KL to the frozen reference, per token, the unbiased low-variance estimator of DeepSeekMath Eq. 4:
  pi_ref / pi_theta - log(pi_ref / pi_theta) - 1 (Schulman's k3, http://joschu.net/blog/kl-approx.html).
- Flow KL to the frozen reference, per SDE transition: both transitions are Gaussians with the same std,
  so KL = ||mean_theta - mean_ref||^2 / (2 std^2) summed over the chunk (Flow-GRPO, arXiv:2505.05470v2,
  Sec. 4, as its code computes ``(prev_sample_mean - prev_sample_mean_ref)**2 / (2 * std_dev_t**2)``; it
  averages over dimensions, we sum, as our log-probs do). Since mean = x - delta (v + sigma^2 / (2 t) (x +
  (1 - t) v)), the mean difference is -delta (1 + sigma^2 (1 - t) / (2 t)) (v_theta - v_ref): the KL is a
  velocity MSE with weight delta (1 + sigma^2 (1 - t) / (2 t))^2 / (2 sigma^2)
  (:func:`flow_kl_velocity_weight`).
- Diagnostics (CleanRL): approx KL old -> new, ((r - 1) - log r), and the clip fraction, the share of
  entries where the clipped term is the one the loss takes (verl's ``pg_clipfrac``).

Policy losses are registered by name (:func:`register_policy_loss`, verl's ``@register_policy_loss``); a
design names one in ``phase2.policy_loss`` (default :data:`PILOT_POLICY_LOSS`), and the trainer calls
``policy_loss(phase2.policy_loss)`` with the batch's terms and the head's recipe. One name means one
function, so a second registration under a taken name is refused rather than silently replacing what a
locked design trains with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from grpo_probe.name_registry import Registry
from grpo_probe.prereg.phase2 import DEFAULT_POLICY_LOSS

if TYPE_CHECKING:
    from grpo_probe.prereg.phase2 import HeadRecipe

__all__ = [
    "PILOT_POLICY_LOSS",
    "POLICY_LOSSES",
    "PolicyLoss",
    "PolicyLossFn",
    "approx_kl_k3",
    "ar_kl_k3",
    "clip_higher_loss",
    "clipped_policy_loss",
    "flow_kl_gaussian",
    "flow_kl_velocity_weight",
    "policy_loss",
    "register_policy_loss",
    "token_mean",
]

LOG_RATIO_CLAMP = 20.0
"""|log r| is clamped here before exp, as verl does (exp(20) ~ 5e8 cannot overflow float64 products)."""


def token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum of the valid entries over their count: DAPO's token-level aggregation (verl "token-mean")."""
    count = mask.sum()
    if int(count) == 0:
        raise ValueError("token_mean: no valid entry in the batch")
    return torch.where(mask, values, torch.zeros_like(values)).sum() / count


@dataclass(frozen=True)
class PolicyLoss:
    """The clipped surrogate of a batch and its diagnostics (diagnostics are detached Python floats)."""

    loss: torch.Tensor
    clip_fraction: float
    approx_kl: float
    ratio_mean: float


def clipped_policy_loss(
    logprob: torch.Tensor,
    old_logprob: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_ratio_low: float,
    clip_ratio_high: float,
) -> PolicyLoss:
    """-min(r A, clip(r, 1 - low, 1 + high) A), token-mean over ``mask``; all tensors [rows, positions].

    ``advantages`` holds each row's episode advantage broadcast over its positions.
    """
    log_ratio = torch.clamp(logprob - old_logprob, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    pg_loss = token_mean(torch.maximum(pg_loss1, pg_loss2), mask)  # the papers' min, negated
    with torch.no_grad():
        clip_fraction = token_mean((pg_loss2 > pg_loss1).to(logprob.dtype), mask)
        approx_kl = token_mean((ratio - 1) - log_ratio, mask)  # http://joschu.net/blog/kl-approx.html
        ratio_mean = token_mean(ratio, mask)
    return PolicyLoss(pg_loss, float(clip_fraction), float(approx_kl), float(ratio_mean))


def approx_kl_k3(logprob: torch.Tensor, old_logprob: torch.Tensor, mask: torch.Tensor) -> float:
    """KL(pi_old || pi_theta) per entry, Schulman's k3 on samples of pi_old: mean of (r - 1) - log r.

    The diagnostic :func:`clipped_policy_loss` reports, on log-probs given apart from the loss: the flow
    head's per-dimension reading divides the k3 of the chunk's log-ratio by the chunk's D dimensions (the
    KL of a product of independent Gaussian dimensions is the sum of theirs), where the k3 of the
    already-divided log-ratio would shrink it by D again. http://joschu.net/blog/kl-approx.html
    """
    with torch.no_grad():
        log_ratio = torch.clamp(logprob - old_logprob, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
        return float(token_mean(torch.exp(log_ratio) - 1 - log_ratio, mask))


PolicyLossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, "HeadRecipe"], PolicyLoss]
"""(logprob, old_logprob, advantages, mask, recipe) -> the loss and its diagnostics; tensors [rows,
positions] as in :func:`clipped_policy_loss`, ``recipe`` the head's registered numbers."""

POLICY_LOSSES: Registry[PolicyLossFn] = Registry("policy loss")
"""The registered policy losses by name, in registration order; the design check words a misspelt name
from it (:func:`grpo_probe.prereg.phase2.choice_problems`)."""


def register_policy_loss(name: str) -> Callable[[PolicyLossFn], PolicyLossFn]:
    """Decorator: register ``fn`` as the policy loss ``name``, the name a design's ``phase2.policy_loss``
    gives.

    A name taken by another function is an error naming both: a design's name must mean one loss, and a
    later import must not change what a locked design trains with. Registering the same function again
    (a module imported twice) is allowed.
    """
    return POLICY_LOSSES.decorator(name)


def policy_loss(name: str) -> PolicyLossFn:
    """The registered policy loss ``name``; an unknown name is an error listing the registered ones and
    suggesting the closest."""
    return POLICY_LOSSES.get(name)


@register_policy_loss("clip_higher")
def clip_higher_loss(
    logprob: torch.Tensor,
    old_logprob: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    recipe: HeadRecipe,
) -> PolicyLoss:
    """DAPO's clipped surrogate with the recipe's decoupled epsilons (:func:`clipped_policy_loss`)."""
    return clipped_policy_loss(
        logprob, old_logprob, advantages, mask, recipe.clip_ratio_low, recipe.clip_ratio_high
    )


PILOT_POLICY_LOSS = DEFAULT_POLICY_LOSS
"""The policy loss of a design whose ``phase2:`` names none (the memo's clip-higher GRPO): the schema's
default, :data:`grpo_probe.prereg.phase2.DEFAULT_POLICY_LOSS`. The trainer reads the design's name."""


def ar_kl_k3(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    """Per-token KL(pi_theta || pi_ref) estimate: pi_ref/pi_theta - log(pi_ref/pi_theta) - 1 (>= 0)."""
    log_ref_ratio = torch.clamp(ref_logprob - logprob, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.exp(log_ref_ratio) - log_ref_ratio - 1  # DeepSeekMath Eq. 4


def flow_kl_gaussian(mean: torch.Tensor, ref_mean: torch.Tensor, std: float) -> torch.Tensor:
    """KL(N(mean, std^2 I) || N(ref_mean, std^2 I)) per row, summed over all but the batch dimension."""
    return ((mean - ref_mean) ** 2).flatten(1).sum(dim=1) / (2 * std**2)


def flow_kl_velocity_weight(t: float, t_next: float, sigma: float) -> float:
    """w with KL = w ||v_theta - v_ref||^2 for one SDE step (the identity in the module docstring)."""
    delta = t - t_next
    return delta * (1 + sigma**2 * (1 - t) / (2 * t)) ** 2 / (2 * sigma**2)
