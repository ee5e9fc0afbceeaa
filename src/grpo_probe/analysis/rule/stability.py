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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from grpo_probe.analysis.cells.bootstrap import bootstrap_generator
from grpo_probe.analysis.cells.reads import compute_reads, interval_seeds, resampled_ends
from grpo_probe.analysis.cells.seed_columns import SeedColumns
from grpo_probe.analysis.rule.decision_rule import Outcome
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.prereg import Cell
from grpo_probe.prereg.rule import HEADS, BootstrapSpec, DecisionRule, ReadRef

__all__ = [
    "KINDS",
    "MIN_RESAMPLED_SEEDS",
    "ResampledOutcome",
    "Stability",
    "resample_indices",
    "resampled_bounds",
    "resampled_outcomes",
    "rule_reads",
    "stability",
    "too_few_seeds",
]

KINDS: tuple[str, ...] = ("park", "phase2_ar", "phase2_flow", "ar_then_flow")
"""Outcome kinds by code: bit 0 = an AR cell qualifies, bit 1 = a flow cell qualifies."""

MIN_RESAMPLED_SEEDS = 5
"""Fewest seeds whose resamples are counted. n seeds have C(2n - 1, n) distinct resamples (multisets of
size n; Feller, *An Introduction to Probability Theory*, 1968, II.5): 3 for 2 seeds, 35 for 4, 126 for
5. Below 5, "holds in 200 of 200 resamples" counts a handful of distinct resamples many times over."""


def too_few_seeds(n_seeds: int) -> str | None:
    """Why ``n_seeds`` seeds are not resampled (None when there are enough): :data:`MIN_RESAMPLED_SEEDS`."""
    if n_seeds >= MIN_RESAMPLED_SEEDS:
        return None
    distinct = math.comb(2 * n_seeds - 1, n_seeds) if n_seeds else 0
    seeds = "1 seed has" if n_seeds == 1 else f"{n_seeds} seeds have"
    return (
        f"too few seeds to resample ({seeds} {distinct} distinct resample{'s' if distinct != 1 else ''}; "
        f"at least {MIN_RESAMPLED_SEEDS} seeds are needed)"
    )


def resample_indices(seed: int, resamples: int, n_seeds: int) -> NDArray[np.int64]:
    """[B, n] seed positions drawn with replacement, from the generator keyed by (registered bootstrap
    seed, "bootstrap", "decision_stability"): the same draw for every cell, as a resample of spawns."""
    rng = numpy_generator(seed, tag("bootstrap"), tag("decision_stability"))
    return rng.integers(0, n_seeds, size=(resamples, n_seeds))


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
    cell and read, :func:`grpo_probe.analysis.cells.bootstrap.bootstrap_generator`), so an outer resample that
    repeats every seed once gives exactly the registered interval. ``outer``: [B, m] positions into the
    read's own seeds (:func:`interval_seeds`). Work is done ``chunk`` outer resamples at a time.
    """
    own = interval_seeds(columns, read)
    m = outer.shape[-1]
    inner = bootstrap_generator(bootstrap.seed, columns.cell.id, read).integers(
        0, m, size=(bootstrap.resamples, m)
    )
    alpha = (1.0 - bootstrap.interval_confidence) / 2.0
    low = np.empty(outer.shape[0])
    high = np.empty(outer.shape[0])
    for start in range(0, outer.shape[0], chunk):
        block = own[outer[start : start + chunk]]  # [b, m] seed positions
        ends = resampled_ends(columns, read, block, inner, alpha, bootstrap.pooled_interval)
        low[start : start + chunk], high[start : start + chunk] = ends
    return low, high


def rule_reads(rule: DecisionRule) -> tuple[str, ...]:
    """Every read the rule's conditions and rank keys name, in first-use order."""
    names = []
    for criterion in rule.criteria:
        for condition in criterion.all_of:
            names += condition.keys
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
        qualifies = np.ones((len(members), resamples), dtype=bool)
        for j, cell in enumerate(members):
            for condition in rule.conditions_for(head):
                qualifies[j] &= condition.passes(reads[cell.id])
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
    """Why the rule was not rerun on resamples (too few seeds, or an interval a resample cannot hold);
    counts are 0 then."""


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
    few = too_few_seeds(index.shape[1])
    if few is not None:
        return Stability(resamples, 0, 0, (), few)
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
    reads = {cell.id: compute_reads(columns[cell.id], index, names) for cell in cells}
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
