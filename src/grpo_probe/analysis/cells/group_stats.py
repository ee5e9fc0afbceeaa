"""The primary read: within-group spread of the dense reward, per seed and over seeds.

Why: GRPO's advantage is (r - mean(group)) / std(group); its gradient is proportional to the spread of
rewards inside a group of K rollouts from one spawn. A group whose std is ~0 gives every rollout the same
advantage (SimpleVLA-RL drops such groups with its dynamic-sampling filter). So per seed we take the std
of ``progress_final_cm`` (and of ``best_point_cm``) over its K draws, and over seeds the median.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from grpo_probe.analysis.cells.bootstrap import Estimate, bootstrap_generator, percentile_bootstrap
from grpo_probe.analysis.cells.tables import RolloutTable
from grpo_probe.prereg import AnalysisNumbers

__all__ = ["GroupSummary", "SeedGroup", "median_seed", "seed_groups", "summarize_groups", "within_group_std"]


@dataclass(frozen=True)
class SeedGroup:
    """One seed's group of K draws."""

    seed: int
    k: int
    std_progress_cm: float
    std_best_point_cm: float
    mean_progress_cm: float
    nondegenerate: bool


@dataclass(frozen=True)
class GroupSummary:
    """A cell's groups over seeds."""

    n_seeds: int
    k: int
    median_std_progress_cm: Estimate
    median_std_best_point_cm: Estimate
    nondegenerate_count: int
    nondegenerate_fraction: float


def within_group_std(values: ArrayLike, ddof: int) -> float:
    """The within-group standard deviation sqrt(sum((r - mean)^2) / (K - ddof)).

    ``ddof`` is registered (``analysis.group_std_ddof``); GRPO implementations normalise with
    ``torch.std``, whose default is the unbiased ddof = 1 (DeepSeekMath, arXiv:2402.03300, defines the
    outcome advantage (r - mean(r)) / std(r) without fixing ddof). numpy's default is ddof = 0, hence the
    explicit argument.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size <= ddof:
        raise ValueError(f"a group of {x.size} values has no std at ddof={ddof}")
    return float(np.std(x, ddof=ddof))


def seed_groups(table: RolloutTable, analysis: AnalysisNumbers) -> list[SeedGroup]:
    """Per seed (ascending): the within-group stds and whether the ranking is non-degenerate.

    A group is non-degenerate when its std of ``progress_final_cm`` is strictly above
    ``analysis.degenerate_tol_cm``: the continuous analogue of SimpleVLA-RL's filter that drops groups
    where all rollouts succeed or all fail (SimpleVLA-RL, arXiv:2509.09674v1, "dynamic sampling").
    """
    groups = []
    for seed in table.seeds:
        rows = table.rows_of(int(seed))
        std_progress = within_group_std(table.progress_final_cm[rows], analysis.group_std_ddof)
        groups.append(
            SeedGroup(
                seed=int(seed),
                k=int(rows.size),
                std_progress_cm=std_progress,
                std_best_point_cm=within_group_std(table.best_point_cm[rows], analysis.group_std_ddof),
                mean_progress_cm=float(np.mean(table.progress_final_cm[rows])),
                nondegenerate=std_progress > analysis.degenerate_tol_cm,
            )
        )
    return groups


def summarize_groups(groups: list[SeedGroup], analysis: AnalysisNumbers, cell: str) -> GroupSummary:
    """Medians over seeds of the group stds (percentile bootstrap over seeds) and the non-degenerate share."""
    boot = analysis.bootstrap
    count = sum(g.nondegenerate for g in groups)

    def median(read: str, values: list[float]) -> Estimate:
        rng = bootstrap_generator(boot.seed, cell, read)
        return percentile_bootstrap(values, "median", boot.resamples, boot.interval_confidence, rng)

    return GroupSummary(
        n_seeds=len(groups),
        k=groups[0].k,
        median_std_progress_cm=median("median_group_std_progress_cm", [g.std_progress_cm for g in groups]),
        median_std_best_point_cm=median(
            "median_group_std_best_point_cm", [g.std_best_point_cm for g in groups]
        ),
        nondegenerate_count=count,
        nondegenerate_fraction=count / len(groups),
    )


def median_seed(groups: list[SeedGroup]) -> int:
    """The seed whose progress std is the median: sort by (std, seed), take index (n - 1) // 2.

    With an even count this is the lower of the two middle groups; equal stds order by seed, so the
    choice is unique.
    """
    ordered = sorted(groups, key=lambda g: (g.std_progress_cm, g.seed))
    return ordered[(len(ordered) - 1) // 2].seed
