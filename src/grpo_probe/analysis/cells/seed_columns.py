"""A cell's per-seed columns: the rows every read reduces, whether over all seeds or a resample of them.

Why one table of per-seed values: every read of a cell is a reduction over its seeds (a median of group
stds, a mean of anchor differences, a pooled sum of squares), so the full-sample read, its bootstrap
interval, a resample of the seeds for the outcome's stability, a nested bootstrap and a simulated run are
the same reduction on different index arrays of seed positions (:mod:`grpo_probe.analysis.cells.reads`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from grpo_probe.analysis.cells.anchor_join import SeedJoin
from grpo_probe.analysis.cells.chaos import ChaosColumns, SeedChaos
from grpo_probe.analysis.cells.gradient_noise import GradientColumns
from grpo_probe.analysis.cells.group_stats import SeedGroup
from grpo_probe.analysis.cells.guards import guard_trips
from grpo_probe.analysis.cells.tables import RolloutTable
from grpo_probe.prereg import AnalysisNumbers, Cell

__all__ = ["SeedColumns", "seed_columns"]


@dataclass(frozen=True)
class SeedColumns:
    """One cell's per-seed values, seeds ascending: the rows a resample of seeds draws from."""

    cell: Cell
    k: int
    std_progress_cm: NDArray[np.float64]
    std_best_point_cm: NDArray[np.float64]
    nondegenerate: NDArray[np.float64]
    progress_delta_cm: NDArray[np.float64]
    sampled_engagement: NDArray[np.float64]
    anchor_engaged: NDArray[np.float64]
    sampled_trips: dict[str, NDArray[np.float64]]
    """Per guard, the seed's tripped draws (of ``k``)."""
    anchor_trips: dict[str, NDArray[np.float64]]
    """Per guard, 1.0 where the seed's anchor episode tripped it."""
    entropy: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]] | None
    """AR cells: per seed, the sum and count of replan entropies and of tokens per chunk."""
    chaos: ChaosColumns | None = None
    """The replay reads' per-seed columns (NaN rows for seeds not replayed); None without replays."""
    gradient: GradientColumns | None = None
    """The gradient reads' Gram matrix of the group gradients over the seeds; None for a design that does
    not register the gradient reads."""


def seed_columns(
    cell: Cell,
    groups: Sequence[SeedGroup],
    joins: Sequence[SeedJoin],
    probe: RolloutTable,
    anchor: RolloutTable,
    analysis: AnalysisNumbers,
    replayed: Sequence[SeedChaos] | None = None,
    gradient: GradientColumns | None = None,
) -> SeedColumns:
    """The per-seed columns of a cell: group statistics and the anchor join as joined, guard trips and
    entropy summed per seed from the cell's rollout tables (rows sorted by seed, K per seed), and the
    replayed seeds' decomposition (``replayed``: NaN rows for the seeds not replayed) and the cell's
    gradient file, read (``gradient``: its seeds must be the cell's)."""
    seeds = np.array([g.seed for g in groups], dtype=np.int64)
    k = groups[0].k
    if not np.array_equal(probe.seeds, seeds) or not np.array_equal(anchor.seeds, seeds):
        raise ValueError(f"{probe.path}: column seed: the cell's seeds differ from its joined seeds")
    if gradient is not None and list(gradient.seeds) != seeds.tolist():
        raise ValueError(f"{gradient.path}: the gradient file's seeds differ from the cell's seeds")
    sampled = {
        g: v.reshape(len(seeds), k).sum(axis=1).astype(np.float64)
        for g, v in guard_trips(probe, analysis).items()
    }
    anchored = {g: v.astype(np.float64) for g, v in guard_trips(anchor, analysis).items()}
    entropy = None
    if probe.replan_entropy_mean is not None and probe.replan_n_tokens is not None:
        per_seed = np.repeat(np.arange(len(seeds)), k)
        sums = np.zeros((4, len(seeds)))
        for row, (values, tokens) in enumerate(
            zip(probe.replan_entropy_mean, probe.replan_n_tokens, strict=True)
        ):
            s = per_seed[row]
            sums[:, s] += (values.sum(), values.size, tokens.sum(), tokens.size)
        entropy = (sums[0], sums[1], sums[2], sums[3])
    return SeedColumns(
        cell=cell,
        k=k,
        std_progress_cm=np.array([g.std_progress_cm for g in groups]),
        std_best_point_cm=np.array([g.std_best_point_cm for g in groups]),
        nondegenerate=np.array([float(g.nondegenerate) for g in groups]),
        progress_delta_cm=np.array([j.progress_delta_cm for j in joins]),
        sampled_engagement=np.array([j.sampled_engagement_rate for j in joins]),
        anchor_engaged=np.array([float(j.anchor_engaged) for j in joins]),
        sampled_trips=sampled,
        anchor_trips=anchored,
        entropy=entropy,
        chaos=None if replayed is None else ChaosColumns.of(replayed, seeds.tolist()),
        gradient=gradient,
    )
