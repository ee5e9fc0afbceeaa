"""The competence read: sampled rollouts joined, seed by seed, against the arm's deterministic anchor.

Why: spread bought by noise that wrecks the little directed behaviour a policy has is spread among
garbage (memo section 3, failure mode 2). Each seed's K sampled draws are compared with the anchor row
of the same arm and seed (AR greedy, flow with the anchor's keyed noise): same spawn, so the difference
is the price of the stochasticity alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpo_probe.analysis.cells.bootstrap import Estimate, bootstrap_generator, percentile_bootstrap
from grpo_probe.analysis.cells.tables import RolloutTable
from grpo_probe.prereg import AnalysisNumbers

__all__ = ["JoinSummary", "SeedJoin", "check_seeds_match", "join_seeds", "summarize_join"]


@dataclass(frozen=True)
class SeedJoin:
    """One seed: its sampled group against its anchor row."""

    seed: int
    sampled_mean_progress_cm: float
    anchor_progress_cm: float
    progress_delta_cm: float
    sampled_engagement_rate: float
    anchor_engaged: bool


@dataclass(frozen=True)
class JoinSummary:
    """Means over seeds; intervals are percentile bootstraps over seeds."""

    mean_progress_delta_cm: Estimate
    sampled_engagement_rate: float
    anchor_engagement_rate: float
    engagement_delta: Estimate


def check_seeds_match(probe: RolloutTable, anchor: RolloutTable, cell: str) -> None:
    """Refuse a join where the probe's seeds and the anchor's seeds differ (naming both tables)."""
    probe_seeds = set(probe.seeds.tolist())
    anchor_seeds = set(anchor.seeds.tolist())
    if probe_seeds == anchor_seeds:
        return
    only_probe = sorted(probe_seeds - anchor_seeds)
    only_anchor = sorted(anchor_seeds - probe_seeds)
    raise ValueError(
        f"{anchor.path}: column seed: cell {cell} ({probe.path}) and the anchor of arm {anchor.arm} cover "
        f"different seeds: only in the probe table {only_probe}, only in the anchor table {only_anchor}"
    )


def join_seeds(probe: RolloutTable, anchor: RolloutTable) -> list[SeedJoin]:
    """Per seed (ascending): mean of the K sampled progresses minus the anchor's, and engagement of each.

    Engagement is ``contact`` (any pusher-boat contact in the episode); the sampled rate of a seed is the
    fraction of its K draws that engaged, the anchor's is 0 or 1.
    """
    joins = []
    for seed in probe.seeds:
        rows = probe.rows_of(int(seed))
        (anchor_row,) = anchor.rows_of(int(seed))
        sampled_mean = float(np.mean(probe.progress_final_cm[rows]))
        anchor_progress = float(anchor.progress_final_cm[anchor_row])
        joins.append(
            SeedJoin(
                seed=int(seed),
                sampled_mean_progress_cm=sampled_mean,
                anchor_progress_cm=anchor_progress,
                progress_delta_cm=sampled_mean - anchor_progress,
                sampled_engagement_rate=float(np.mean(probe.contact[rows])),
                anchor_engaged=bool(anchor.contact[anchor_row]),
            )
        )
    return joins


def summarize_join(joins: list[SeedJoin], analysis: AnalysisNumbers, cell: str) -> JoinSummary:
    """Means over seeds of the progress difference and of engagement, with percentile-bootstrap CIs.

    Competence cost is the mean over seeds of (mean of the K sampled ``progress_final_cm`` minus the
    anchor's ``progress_final_cm``): negative when sampling loses progress. Engagement delta is the mean
    over seeds of (sampled engagement rate minus anchor engagement, 0 or 1).
    """
    boot = analysis.bootstrap

    def mean(read: str, values: list[float]) -> Estimate:
        rng = bootstrap_generator(boot.seed, cell, read)
        return percentile_bootstrap(values, "mean", boot.resamples, boot.interval_confidence, rng)

    sampled = [j.sampled_engagement_rate for j in joins]
    anchored = [float(j.anchor_engaged) for j in joins]
    return JoinSummary(
        mean_progress_delta_cm=mean("mean_progress_delta_cm", [j.progress_delta_cm for j in joins]),
        sampled_engagement_rate=float(np.mean(sampled)),
        anchor_engagement_rate=float(np.mean(anchored)),
        engagement_delta=mean("engagement_delta", [s - a for s, a in zip(sampled, anchored, strict=True)]),
    )
