"""How often the decision holds when the seeds are resampled: the rule rerun on B bootstrap resamples.

Why: with 15 seeds a cell's reads carry sampling error, and an outcome that sits near a threshold or a
ranking that two arms nearly tie on can flip with a different draw of spawns. The registered bootstrap
(``analysis.bootstrap``) already gives each read an interval; this asks the question the decision needs:
resample the seeds with replacement B times (all cells together: a resample is one draw of spawns, and
every cell ran the same seeds), recompute every cell's reads on each resample exactly as the full-sample
reads are computed, rerun the registered rule, and count how often it gives the same outcome kind and
names the same arm(s).

Everything is vectorised over resamples: a resample is a row of seed indices, each read is a reduction
over the seeds of that row ([B, n] -> [B]), and the rule is evaluated on [B] arrays. The reductions are
the full-sample ones on the same values in the same order, so a resample that repeats every seed once
reproduces the registered outcome bit for bit. A condition on an end of an interval
(``chaos_share.upper``) is evaluated on the interval recomputed inside each resample: a nested bootstrap
of B' = B inner resamples (:func:`resampled_bounds`; Davison & Hinkley, *Bootstrap Methods and their
Application*, 1997, Sec. 3.9).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from grpo_probe.analysis.anchor_join import SeedJoin
from grpo_probe.analysis.bootstrap import bootstrap_generator
from grpo_probe.analysis.chaos import CHAOS_READS, ChaosColumns, ChaosSummary, chaos_statistics
from grpo_probe.analysis.decision_rule import Outcome
from grpo_probe.analysis.group_stats import SeedGroup
from grpo_probe.analysis.guards import guard_trips
from grpo_probe.analysis.tables import RolloutTable
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.prereg import AnalysisNumbers, Cell
from grpo_probe.prereg.rule import HEADS, OPS, BootstrapSpec, DecisionRule, ReadRef

__all__ = [
    "KINDS",
    "ResampledOutcome",
    "SeedColumns",
    "Stability",
    "resample_indices",
    "resampled_outcomes",
    "resampled_reads",
    "rule_reads",
    "seed_columns",
    "stability",
]

KINDS: tuple[str, ...] = ("park", "phase2_ar", "phase2_flow", "ar_then_flow")
"""Outcome kinds by code: bit 0 = an AR cell qualifies, bit 1 = a flow cell qualifies."""


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


def seed_columns(
    cell: Cell,
    groups: Sequence[SeedGroup],
    joins: Sequence[SeedJoin],
    probe: RolloutTable,
    anchor: RolloutTable,
    analysis: AnalysisNumbers,
    chaos: ChaosSummary | None = None,
) -> SeedColumns:
    """The per-seed columns of a cell: group statistics and the anchor join as joined, guard trips and
    entropy summed per seed from the cell's rollout tables (rows sorted by seed, K per seed)."""
    seeds = np.array([g.seed for g in groups], dtype=np.int64)
    k = groups[0].k
    if not np.array_equal(probe.seeds, seeds) or not np.array_equal(anchor.seeds, seeds):
        raise ValueError(f"{probe.path}: column seed: the cell's seeds differ from its joined seeds")
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
        chaos=None if chaos is None else ChaosColumns.of(chaos.seeds, seeds.tolist()),
    )


def resample_indices(seed: int, resamples: int, n_seeds: int) -> NDArray[np.int64]:
    """[B, n] seed positions drawn with replacement, from the generator keyed by (registered bootstrap
    seed, "bootstrap", "decision_stability"): the same draw for every cell, as a resample of spawns."""
    rng = numpy_generator(seed, tag("bootstrap"), tag("decision_stability"))
    return rng.integers(0, n_seeds, size=(resamples, n_seeds))


def resampled_reads(
    columns: SeedColumns, index: NDArray[np.int64], names: Collection[str] | None = None
) -> dict[str, NDArray[np.float64]]:
    """Every point read of the cell (or the ``names`` among them) on each resample: ``index`` holds seed
    positions ``[..., n]`` ([B, n] for B resamples, [B, B', n] for a nested bootstrap).

    The same definitions as the full-sample reads: medians over seeds of the group stds, the share of
    non-degenerate groups, means over seeds of the anchor differences, pooled guard-trip rates (equal K
    per seed, so pooled = mean over seeds), the replan-weighted entropy means, and the replay reads over
    the resample's replayed seeds (:func:`grpo_probe.analysis.chaos.chaos_statistics`).
    """
    n = index.shape[-1]

    def wanted(name: str) -> bool:
        return names is None or name in names

    def mean(values: NDArray[np.float64]) -> NDArray[np.float64]:
        return values[index].mean(axis=-1)

    reads: dict[str, NDArray[np.float64]] = {}
    for name, column in (
        ("median_group_std_progress_cm", columns.std_progress_cm),
        ("median_group_std_best_point_cm", columns.std_best_point_cm),
    ):
        if wanted(name):
            reads[name] = np.median(column[index], axis=-1)
    for name, column in (
        ("nondegenerate_fraction", columns.nondegenerate),
        ("mean_progress_delta_cm", columns.progress_delta_cm),
        ("sampled_engagement_rate", columns.sampled_engagement),
        ("anchor_engagement_rate", columns.anchor_engaged),
    ):
        if wanted(name):
            reads[name] = mean(column)
    if wanted("engagement_delta"):
        reads["engagement_delta"] = mean(columns.sampled_engagement - columns.anchor_engaged)
    for guard in columns.sampled_trips:
        if wanted(f"sampled_{guard}_rate"):
            reads[f"sampled_{guard}_rate"] = columns.sampled_trips[guard][index].sum(axis=-1) / (
                n * columns.k
            )
        if wanted(f"anchor_{guard}_rate"):
            reads[f"anchor_{guard}_rate"] = mean(columns.anchor_trips[guard])
    if columns.entropy is not None:
        e_sum, e_n, t_sum, t_n = columns.entropy
        if wanted("mean_token_entropy"):
            reads["mean_token_entropy"] = e_sum[index].sum(axis=-1) / e_n[index].sum(axis=-1)
        if wanted("mean_tokens_per_chunk"):
            reads["mean_tokens_per_chunk"] = t_sum[index].sum(axis=-1) / t_n[index].sum(axis=-1)
    if columns.chaos is not None:
        reads.update(chaos_statistics(columns.chaos, index, names))
    return reads


def interval_seeds(columns: SeedColumns, read: str) -> NDArray[np.int64]:
    """The positions of the seeds ``read``'s interval resamples: the replayed seeds for a replay read
    (:data:`grpo_probe.analysis.chaos.CHAOS_READS`), every seed for any other."""
    if read in CHAOS_READS and columns.chaos is not None:
        return np.flatnonzero(np.isfinite(columns.chaos.replay_var))
    return np.arange(len(columns.std_progress_cm))


def resampled_bounds(
    columns: SeedColumns,
    read: str,
    outer: NDArray[np.int64],
    bootstrap: BootstrapSpec,
    chunk: int = 64,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The percentile interval of ``read`` inside each outer resample (a nested bootstrap): ([B], [B]).

    Inside outer resample b the interval is computed as the full-sample one is: B' = the registered
    resamples of that resample's own seeds, drawn at the same keyed positions (the generator of the
    cell and read, :func:`grpo_probe.analysis.bootstrap.bootstrap_generator`), so an outer resample that
    repeats every seed once gives exactly the registered interval. ``outer``: [B, m] positions into the
    read's own seeds (:func:`interval_seeds`). Work is done ``chunk`` outer resamples at a time.
    """
    own = interval_seeds(columns, read)
    m = outer.shape[-1]
    inner = bootstrap_generator(bootstrap.seed, columns.cell.id, read).integers(
        0, m, size=(bootstrap.resamples, m)
    )
    alpha = (1.0 - bootstrap.confidence) / 2.0
    low = np.empty(outer.shape[0])
    high = np.empty(outer.shape[0])
    for start in range(0, outer.shape[0], chunk):
        block = own[outer[start : start + chunk]]  # [b, m] seed positions
        values = resampled_reads(columns, block[:, inner], (read,))[read]  # [b, B']
        with np.errstate(invalid="ignore"):
            ends = np.nanquantile(values, [alpha, 1.0 - alpha], axis=-1)
        low[start : start + chunk], high[start : start + chunk] = ends
    return low, high


def rule_reads(rule: DecisionRule) -> tuple[str, ...]:
    """Every read the rule's conditions and rank keys name, in first-use order."""
    names = []
    for criterion in rule.criteria:
        for c in criterion.all_of:
            names.append(c.key)
            if c.threshold_read is not None:
                names.append(c.threshold_read.key)
    names += [k.read for k in rule.rank_by]
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class ResampledOutcome:
    """Per resample: the outcome kind's code in :data:`KINDS` and the arm named for each head (or None)."""

    kind: NDArray[np.int64]
    arms: dict[str, list[str | None]]


def _pick(
    rule: DecisionRule,
    cells: Sequence[Cell],
    qualifies: NDArray[np.bool_],
    reads: Sequence[Mapping[str, NDArray[np.float64]]],
    resamples: int,
) -> NDArray[np.int64]:
    """Per resample, the position in ``cells`` of the best qualifying cell (-1 when none qualifies).

    The scalar rule's ranking: each rank key in turn (``max``: larger first), an undefined read last,
    remaining ties to the cell registered first. A later cell replaces the current best only when its
    keys are strictly better, compared lexicographically.
    """
    keys = np.empty((len(rule.rank_by), len(cells), resamples))
    for i, key in enumerate(rule.rank_by):
        for j, _ in enumerate(cells):
            values = reads[j].get(key.read, np.full(resamples, np.nan))
            ordered = -values if key.prefer == "max" else values
            keys[i, j] = np.where(np.isnan(ordered), np.inf, ordered)
    best = np.full(resamples, -1, dtype=np.int64)
    columns = np.arange(resamples)
    for j in range(len(cells)):
        holder = np.maximum(best, 0)
        strictly = np.zeros(resamples, dtype=bool)
        tied = np.ones(resamples, dtype=bool)
        for i in range(len(rule.rank_by)):
            mine, theirs = keys[i, j], keys[i, holder, columns]
            strictly |= tied & (mine < theirs)
            tied &= mine == theirs
        best = np.where(qualifies[j] & ((best < 0) | strictly), j, best)
    return best


def resampled_outcomes(
    rule: DecisionRule,
    cells: Sequence[Cell],
    reads: Mapping[str, Mapping[str, NDArray[np.float64]]],
    resamples: int,
) -> ResampledOutcome:
    """The registered rule on [B] arrays of reads (``reads[cell.id][read]``), as the scalar rule does:
    a cell qualifies when it passes every criterion its head needs (an undefined read fails), the
    outcome kind follows from which heads have a qualifying cell, and each head names its best cell's arm.
    """
    kind = np.zeros(resamples, dtype=np.int64)
    arms: dict[str, list[str | None]] = {}
    for bit, head in enumerate(HEADS):
        members = [c for c in cells if c.head == head]
        needed = set(rule.criteria_for(head))
        qualifies = np.ones((len(members), resamples), dtype=bool)
        for j, cell in enumerate(members):
            for criterion in rule.criteria:
                if criterion.name not in needed:
                    continue
                for cond in criterion.all_of:
                    mine = reads[cell.id]
                    values = mine.get(cond.key, np.full(resamples, np.nan))
                    threshold = cond.threshold_on(mine)
                    with np.errstate(invalid="ignore"):
                        qualifies[j] &= OPS[cond.op](values, np.nan if threshold is None else threshold)
        best = _pick(rule, members, qualifies, [reads[c.id] for c in members], resamples)
        kind |= (best >= 0).astype(np.int64) << bit
        arms[head] = [members[b].arm if b >= 0 else None for b in best.tolist()]
    return ResampledOutcome(kind, arms)


@dataclass(frozen=True)
class Stability:
    """How the registered outcome fares over B resamples of the seeds."""

    resamples: int
    same_outcome: int
    """Resamples with the same outcome kind and the same named arm(s)."""
    same_kind: int
    outcomes: tuple[tuple[str, str | None, str | None, int], ...]
    """(kind, AR arm, flow arm, count) of every outcome seen, most frequent first."""
    not_resampled: str | None
    """Why the rule could not be rerun on resamples (it reads bootstrap intervals); counts are 0 then."""


def stability(
    rule: DecisionRule,
    cells: Sequence[Cell],
    columns: Mapping[str, SeedColumns],
    outcome: Outcome,
    index: NDArray[np.int64],
    bootstrap: BootstrapSpec,
) -> Stability:
    """Rerun ``rule`` on every resample in ``index`` ([B, n]) and compare with the registered ``outcome``.

    A condition that reads an end of an interval (``chaos_share.upper``) is evaluated on that interval
    recomputed inside each resample (:func:`resampled_bounds`, a nested bootstrap), so the resampled rule
    is the registered rule. A replay read's interval resamples the replayed seeds; where those are not
    every seed, a resample of all seeds does not hold a fixed number of them, and the outcome is reported
    as not resampled, with the reason.
    """
    resamples = index.shape[0]
    bounds = [ReadRef.parse(r) for r in rule_reads(rule)]
    bounds = [r for r in bounds if r.bound is not None]
    for ref in bounds:
        for cell in cells:
            own = interval_seeds(columns[cell.id], ref.name)
            if own.size != index.shape[1]:
                reason = (
                    f"the rule reads the interval of {ref.name}, over the {own.size} replayed of the "
                    f"{index.shape[1]} seeds, which a resample of all the seeds does not hold at a fixed "
                    "number (register replay.seeds: all to resample it)"
                )
                return Stability(resamples, 0, 0, (), reason)
    names = {ReadRef.parse(r).name for r in rule_reads(rule)}
    reads = {cell.id: resampled_reads(columns[cell.id], index, names) for cell in cells}
    for ref in {r.name: r for r in bounds}.values():
        for cell in cells:
            low, high = resampled_bounds(columns[cell.id], ref.name, index, bootstrap)
            reads[cell.id][f"{ref.name}_ci_low"] = low
            reads[cell.id][f"{ref.name}_ci_high"] = high
    found = resampled_outcomes(rule, cells, reads, resamples)
    labels = [
        (KINDS[k], ar, flow)
        for k, ar, flow in zip(found.kind.tolist(), found.arms["ar"], found.arms["flow"], strict=True)
    ]
    point = (outcome.kind, outcome.ar_arm, outcome.flow_arm)
    counts: dict[tuple[str, str | None, str | None], int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], KINDS.index(item[0][0]), str(item[0][1:])))
    return Stability(
        resamples=resamples,
        same_outcome=counts.get(point, 0),
        same_kind=sum(c for label, c in counts.items() if label[0] == outcome.kind),
        outcomes=tuple((*label, count) for label, count in ranked),
        not_resampled=None,
    )
