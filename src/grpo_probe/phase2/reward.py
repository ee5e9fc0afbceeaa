"""The pilot's reward, GRPO's group-relative advantage, and the dynamic-sampling filter.

Read top to bottom against the papers:

- reward (memo section 5): ``progress_final_cm`` minus the registered guard penalties
  (:class:`grpo_probe.prereg.phase2.GuardPenalties`);
- advantage: GRPO with outcome supervision (Shao et al., DeepSeekMath, arXiv:2402.03300v3, Sec. 4.1.2):
  every token of response i gets A_i = (r_i - mean(r)) / std(r) over the G responses of its group. We
  add verl's epsilon (``compute_grpo_outcome_advantage``: (r - mean) / (std + eps), eps = 1e-6 there) and
  use the unbiased std (ddof 1, what ``torch.std`` computes there); here a group is the K rollouts of one
  spawn seed and a "response" is a whole episode, so A_i reaches every token (AR) or SDE step (flow) of
  every replan of episode i;
- dynamic sampling (DAPO, Yu et al., arXiv:2503.14476v1, Sec. 3.2; SimpleVLA-RL drops all-success and
  all-failure groups): with a dense reward a group is never exactly uniform, so the continuous analogue
  drops groups whose reward std is at or below the registered tolerance (the probe's "degenerate group").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from grpo_probe.prereg.phase2 import GuardPenalties

__all__ = ["GroupAdvantages", "GuardChannels", "group_advantages", "shaped_reward"]


@dataclass(frozen=True)
class GuardChannels:
    """The guard channels of one episode record that the reward can penalize."""

    reset_strikes: int
    knocked_off: bool
    final_upright: bool
    max_boat_speed_m_s: float


def shaped_reward(
    progress_cm: float, guards: GuardChannels, penalties: GuardPenalties, swat_speed_m_s: float
) -> float:
    """r = progress_final_cm - sum of registered penalties (cm), one term per guard channel."""
    strike_term = penalties.reset_strike_cm * guards.reset_strikes
    knocked_term = penalties.knocked_off_cm * float(guards.knocked_off)
    upright_term = penalties.not_upright_cm * float(not guards.final_upright)
    swat_term = penalties.swat_cm * float(guards.max_boat_speed_m_s > swat_speed_m_s)
    return float(progress_cm - strike_term - knocked_term - upright_term - swat_term)


@dataclass(frozen=True)
class GroupAdvantages:
    """Per episode of a batch: its group's mean and std, its advantage, and whether the group is kept."""

    group_mean: np.ndarray
    group_std: np.ndarray
    advantage: np.ndarray
    kept: np.ndarray


def group_advantages(
    rewards: Sequence[float], groups: Sequence[int], epsilon: float, min_group_std: float
) -> GroupAdvantages:
    """GRPO's outcome advantage per episode, groups given by ``groups`` (the spawn seed of each episode).

    A_i = (r_i - mean_g) / (std_g + eps), std with ddof 1 over the group's K rewards; a group with one
    episode gets mean 0 and std 1 (verl's convention). ``kept`` is False for every episode of a group whose
    std is at or below ``min_group_std`` (dynamic sampling); their advantage is still computed (reported),
    but the update never sees them.
    """
    r = np.asarray(rewards, dtype=np.float64)
    g = np.asarray(groups)
    if r.ndim != 1 or g.shape != r.shape:
        raise ValueError(f"rewards and groups must be 1-d of one length, got {r.shape} and {g.shape}")
    if not np.isfinite(r).all():
        raise ValueError("rewards must be finite")
    mean = np.zeros_like(r)
    std = np.ones_like(r)
    for group in np.unique(g):
        members = g == group
        if members.sum() > 1:
            mean[members] = r[members].mean()
            std[members] = r[members].std(ddof=1)  # unbiased, as torch.std in verl's GRPO
    advantage = (r - mean) / (std + epsilon)
    kept = std > min_group_std
    return GroupAdvantages(group_mean=mean, group_std=std, advantage=advantage, kept=kept)
