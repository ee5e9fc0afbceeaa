"""The pilot's reward, GRPO's group-relative advantage, and the dynamic-sampling filter.

Read top to bottom against the papers:

- reward (memo section 5): ``progress_final_cm`` minus the registered penalty of every guard the episode
  trips, the guards being the environment's own declarations (:class:`grpo_probe.envs.protocol.Guard`,
  ``phase2.reward.penalties``), so the reward charges exactly the trips the analysis and the held-out
  evaluation count, whichever environment the design names;
- advantage: GRPO with outcome supervision (Shao et al., DeepSeekMath, arXiv:2402.03300v3, Sec. 4.1.2):
  every token of response i gets A_i = (r_i - mean(r)) / std(r) over the G responses of its group. We
  add verl's epsilon (``compute_grpo_outcome_advantage``: (r - mean) / (std + eps), eps = 1e-6 there) and
  use the unbiased std (ddof 1, what ``torch.std`` computes there); here a group is the K rollouts of one
  spawn seed and a "response" is a whole episode, so A_i reaches every token (AR) or SDE step (flow) of
  every replan of episode i;
- dynamic sampling (DAPO, Yu et al., arXiv:2503.14476v1, Sec. 3.2; SimpleVLA-RL drops all-success and
  all-failure groups): with a dense reward a group is never exactly uniform, so the continuous analogue
  drops groups whose reward std is at or below the registered tolerance (the probe's "degenerate group").

Advantage estimators are registered by name (:func:`register_adv_est`, verl's ``@register_adv_est``); a
design names one in ``phase2.advantage`` (default :data:`PILOT_ADV_ESTIMATOR`), and the pilot's rollouts
call ``adv_estimator(phase2.advantage)`` with the batch's rewards, groups and the registered ``phase2:``
section.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from grpo_probe.envs.protocol import Guard
from grpo_probe.name_registry import Registry
from grpo_probe.prereg.phase2 import DEFAULT_ADVANTAGE, PENALTIES_FIELD

if TYPE_CHECKING:
    from grpo_probe.prereg.phase2 import Phase2

__all__ = [
    "ADV_ESTIMATORS",
    "PILOT_ADV_ESTIMATOR",
    "AdvEstimator",
    "GroupAdvantages",
    "adv_estimator",
    "group_advantages",
    "grpo_outcome_advantages",
    "guard_trips",
    "register_adv_est",
    "shaped_rewards",
]


def guard_trips(
    columns: Mapping[str, Sequence[Any]], guards: Sequence[Guard], analysis: Mapping[str, Any]
) -> dict[str, NDArray[np.bool_]]:
    """Per guard (in the environment's order), per episode: whether the episode tripped it.

    ``columns``: episode-table columns (name -> one value per episode), at least each guard's
    ``column``; ``analysis``: the registered analysis numbers a guard's threshold may name
    (``swat_speed_m_s``, ``away_tail_cm``). The same rule the probe's analysis counts trips by
    (:func:`grpo_probe.analysis.cells.guards.guard_trips`).
    """
    return {guard.name: guard.trips(np.asarray(columns[guard.column]), analysis) for guard in guards}


def shaped_rewards(
    progress_cm: ArrayLike, trips: Mapping[str, NDArray[np.bool_]], penalties: Mapping[str, float]
) -> NDArray[np.float64]:
    """r_i = progress_final_cm_i - sum over guards g of penalties[g] * [episode i trips g]  (cm).

    Guards are charged in the order of ``trips`` (the environment's), so the float sum does not depend
    on the order the design lists its penalties in; a guard without a penalty costs nothing. A penalty
    on a guard ``trips`` lacks is an error naming the field and the guards (the design check refuses it
    first: :func:`grpo_probe.prereg.phase2.penalty_problems`).
    """
    unknown = [name for name in penalties if name not in trips]
    if unknown:
        raise ValueError(
            f"{PENALTIES_FIELD}.{unknown[0]}: the environment declares no guard {unknown[0]!r} "
            f"(its guards: {', '.join(trips) or 'none'})"
        )
    reward = np.asarray(progress_cm, dtype=np.float64).copy()
    for guard, tripped in trips.items():
        if guard in penalties:
            reward -= float(penalties[guard]) * np.asarray(tripped, dtype=np.float64)
    return reward


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


AdvEstimator = Callable[[Sequence[float], Sequence[int], "Phase2"], GroupAdvantages]
"""(rewards, groups, the registered phase2 section) -> per-episode advantages and the kept mask."""

ADV_ESTIMATORS: Registry[AdvEstimator] = Registry("advantage estimator")
"""The registered advantage estimators by name, in registration order; the design check words a misspelt name
from it (:func:`grpo_probe.prereg.phase2.choice_problems`)."""


def register_adv_est(name: str) -> Callable[[AdvEstimator], AdvEstimator]:
    """Decorator: register ``fn`` as the advantage estimator ``name``, the name a design's
    ``phase2.advantage`` gives.

    A name taken by another function is an error naming both (a name means one estimator, so a later
    import cannot change what a locked design trains with); the same function again is allowed.
    """
    return ADV_ESTIMATORS.decorator(name)


def adv_estimator(name: str) -> AdvEstimator:
    """The registered estimator ``name``; an unknown name is an error listing the registered ones and
    suggesting the closest."""
    return ADV_ESTIMATORS.get(name)


@register_adv_est("grpo_outcome")
def grpo_outcome_advantages(
    rewards: Sequence[float], groups: Sequence[int], phase2: Phase2
) -> GroupAdvantages:
    """GRPO's outcome advantage with the registered epsilon and dynamic-sampling tolerance
    (:func:`group_advantages`)."""
    return group_advantages(rewards, groups, phase2.advantage_epsilon, phase2.min_group_std)


PILOT_ADV_ESTIMATOR = DEFAULT_ADVANTAGE
"""The advantage estimator of a design whose ``phase2:`` names none: the schema's default,
:data:`grpo_probe.prereg.phase2.DEFAULT_ADVANTAGE`. The rollouts read the design's name."""
