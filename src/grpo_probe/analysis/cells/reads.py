"""The per-cell reads: one statistic per declared read, the reads table, and every read of a cell.

Why one statistic per read: a read's full-sample value, its bootstrap interval, its value on a resample
of the seeds (the outcome's stability), inside a nested bootstrap, and in a simulated run are the same
reduction of the cell's per-seed columns (:class:`~grpo_probe.analysis.cells.seed_columns.SeedColumns`) over
different arrays of seed positions ``[..., n]``. :data:`STATISTICS` registers each read the vocabulary
declares (:data:`grpo_probe.prereg.vocabulary.READS`) with that reduction, and this module refuses,
before it computes any read, a declared read without one (it would be undefined on every resample) or one
no read declares (:func:`check_statistics`). A new read is its declaration in the vocabulary and its
statistic here (``STATISTICS.register``, at the bottom).

decision.json holds every read at full precision (the value the rule compared); only the page rounds,
to three significant figures, with more where three would hide which side of a threshold a value is on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from grpo_probe.analysis.cells.bootstrap import bootstrap_generator
from grpo_probe.analysis.cells.chaos import chaos_statistics
from grpo_probe.analysis.cells.gradient_noise import gradient_statistics
from grpo_probe.analysis.cells.seed_columns import SeedColumns
from grpo_probe.analysis.cells.studentized import STUDENTIZED_READS, share_standard_error, studentized_ends
from grpo_probe.name_registry import Registry, did_you_mean
from grpo_probe.prereg import AnalysisNumbers
from grpo_probe.prereg.vocabulary import BOUND_SUFFIXES, READS, ReadSpec, guard_reads, read_names, read_spec

__all__ = [
    "READ_NAMES",
    "STATISTICS",
    "ReadRow",
    "Statistic",
    "cell_reads",
    "check_statistics",
    "compute_reads",
    "interval_seeds",
    "read_rows",
    "resampled_ends",
]

Statistic = Callable[[SeedColumns, NDArray[np.int64]], NDArray[np.float64]]
"""(a cell's per-seed columns, seed positions [..., n]) -> one value per row of positions [...]."""


def _median(column: str) -> Statistic:
    return lambda c, index: np.median(getattr(c, column)[index], axis=-1)


def _mean(column: str) -> Statistic:
    return lambda c, index: getattr(c, column)[index].mean(axis=-1)


def _engagement_delta(c: SeedColumns, index: NDArray[np.int64]) -> NDArray[np.float64]:
    return (c.sampled_engagement - c.anchor_engaged)[index].mean(axis=-1)


def _entropy(numerator: int) -> Statistic:
    """A replan-weighted mean of an AR cell: the sums over the seeds' replans over their counts."""

    def statistic(c: SeedColumns, index: NDArray[np.int64]) -> NDArray[np.float64]:
        if c.entropy is None:
            return np.full(index.shape[:-1], np.nan)
        return c.entropy[numerator][index].sum(axis=-1) / c.entropy[numerator + 1][index].sum(axis=-1)

    return statistic


def _replay(name: str) -> Statistic:
    """A read of the replays (:func:`grpo_probe.analysis.cells.chaos.chaos_statistics`); NaN without them."""

    def statistic(c: SeedColumns, index: NDArray[np.int64]) -> NDArray[np.float64]:
        if c.chaos is None:
            return np.full(index.shape[:-1], np.nan)
        return chaos_statistics(c.chaos, index, (name,))[name]

    return statistic


def _gradient(name: str) -> Statistic:
    """A gradient read (:mod:`grpo_probe.analysis.cells.gradient_noise`); NaN for a cell without gradients."""
    return lambda c, index: gradient_statistics(c.gradient, index, name)


STATISTICS: Registry[Statistic] = Registry("read statistic")
"""Each declared read's reduction over the seeds, under the read's name (a guard's rates:
:func:`_guard_statistic`)."""


def check_statistics() -> None:
    """Refuse a declared read without a statistic (it would be undefined on every resample) or a
    statistic no read declares; every computation of reads asks first, so a read registered after this
    module loaded (a test's toy, a module that adds one) is held to it too."""
    declared, registered = set(READS), set(STATISTICS)
    if declared != registered:
        missing, undeclared = sorted(declared - registered), sorted(registered - declared)
        raise LookupError(
            f"grpo_probe.analysis.cells.reads: reads declared without a statistic {missing}, statistics no "
            f"read declares {undeclared} (a read is its ReadSpec in grpo_probe.prereg.vocabulary and its "
            "statistic here: docs/extending.md)"
        )


def _guard_statistic(name: str) -> Statistic | None:
    """A guard's rate: tripped sampled episodes pooled over the seeds (equal K per seed, so pooled = mean
    over seeds), or the share of anchor episodes (one per seed) that tripped it."""
    for side in ("sampled_", "anchor_"):
        if name.startswith(side) and name.endswith("_rate"):
            guard = name[len(side) : -len("_rate")]

            def statistic(
                c: SeedColumns, index: NDArray[np.int64], guard: str = guard, side: str = side
            ) -> NDArray[np.float64]:
                if side == "sampled_":
                    return c.sampled_trips[guard][index].sum(axis=-1) / (index.shape[-1] * c.k)
                return c.anchor_trips[guard][index].mean(axis=-1)

            return statistic
    return None


def _statistic(c: SeedColumns, name: str) -> Statistic:
    if name in STATISTICS:
        return STATISTICS.get(name)
    found = None
    if (name.removeprefix("sampled_").removeprefix("anchor_").removesuffix("_rate")) in c.sampled_trips:
        found = _guard_statistic(name)
    if found is None:
        raise KeyError(f"{name!r} is no read of cell {c.cell.id}{did_you_mean(name, cell_read_names(c))}")
    return found


def cell_read_names(c: SeedColumns) -> tuple[str, ...]:
    """Every read of the cell: the declared ones (the replay reads only where the design replays) and its
    environment's guard rates."""
    check_statistics()
    guards = tuple(n for g in c.sampled_trips for n in (f"sampled_{g}_rate", f"anchor_{g}_rate"))
    declared = tuple(
        spec.name
        for spec in READS.values()
        if (c.chaos is not None or not spec.replayed_seeds)
        and (c.gradient is not None or spec.scope != "gradient")
    )
    return (*declared, *guards)


def compute_reads(
    c: SeedColumns, index: NDArray[np.int64], names: Collection[str] | None = None
) -> dict[str, NDArray[np.float64]]:
    """Every read of the cell (or the ``names`` among them) on the seeds ``index`` selects: ``[..., n]``
    positions ([n] the full sample, [B, n] a bootstrap or a resample, [B, B', n] a nested bootstrap)."""
    wanted = cell_read_names(c) if names is None else [n for n in cell_read_names(c) if n in names]
    return {name: _statistic(c, name)(c, index) for name in wanted}


def interval_seeds(c: SeedColumns, read: str) -> NDArray[np.int64]:
    """The positions of the seeds ``read`` is computed over: the replayed seeds for a replay read (whose
    declaration says so), every seed for any other."""
    spec = read_spec(read)
    if spec is not None and spec.replayed_seeds and c.chaos is not None:
        return np.flatnonzero(np.isfinite(c.chaos.replay_var))
    return np.arange(len(c.std_progress_cm))


def resampled_ends(
    c: SeedColumns,
    read: str,
    samples: NDArray[np.int64],
    inner: NDArray[np.int64],
    alpha: float,
    pooled_interval: str = "percentile",
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The two ends of ``read``'s interval on each sample: ``samples`` [..., n] seed positions (the full
    sample, an outer resample, a simulated run), ``inner`` [B, n] the bootstrap's positions into each
    sample's seeds. Efron's percentile interval (undefined resamples left out), or, for a read of
    :data:`~grpo_probe.analysis.cells.studentized.STUDENTIZED_READS` under ``pooled_interval:
    studentized``, the bootstrap-t (that module says why and how). One function, so the reads, the
    resampled outcome's stability and every simulated run of the rule compute an interval alike."""
    resamples = samples[..., inner]  # [..., B, n]
    values = compute_reads(c, resamples, (read,))[read]
    if pooled_interval == "studentized" and read in STUDENTIZED_READS and c.chaos is not None:
        theta = compute_reads(c, samples, (read,))[read]
        sums, per_draw = c.chaos.sums, c.chaos.per_draw
        return studentized_ends(
            theta,
            share_standard_error(sums, per_draw, samples),
            values,
            share_standard_error(sums, per_draw, resamples),
            alpha,
        )
    with np.errstate(invalid="ignore"):
        low, high = np.nanquantile(values, [alpha, 1.0 - alpha], axis=-1)
    return low, high


def _value(x: NDArray[np.float64]) -> float | None:
    v = float(x)
    return v + 0.0 if np.isfinite(v) else None


def cell_reads(c: SeedColumns, analysis: AnalysisNumbers) -> dict[str, float | None]:
    """Every read of the cell at full precision, with ``<read>_ci_low``/``<read>_ci_high`` where it has an
    interval: Efron's percentile bootstrap (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993,
    ch. 13.3) of B = ``analysis.bootstrap.resamples`` resamples of the read's own seeds, drawn from the
    generator keyed by (bootstrap seed, cell, read), so an interval never depends on which other reads
    were computed; undefined reads (a share of groups that never differ) are None."""
    boot = analysis.bootstrap
    alpha = (1.0 - boot.interval_confidence) / 2.0
    out: dict[str, float | None] = {}
    for name in cell_read_names(c):
        statistic = _statistic(c, name)
        own = interval_seeds(c, name)
        full = statistic(c, own)
        value = _value(full)
        out[name] = value
        spec = read_spec(name)
        if spec is None or not spec.interval:
            continue
        if spec.unbounded and np.isinf(full):  # +inf has an interval: its lower end may be finite
            value = float(full)
        rng = bootstrap_generator(boot.seed, c.cell.id, name)
        index = rng.integers(0, own.size, size=(boot.resamples, own.size))
        replicates = statistic(c, own[index])
        # an unbounded read's +inf is a value (no mean gradient above the noise), not an undefined one
        replicates = replicates[~np.isnan(replicates) if spec.unbounded else np.isfinite(replicates)]
        if value is None or replicates.size == 0:
            out[name + BOUND_SUFFIXES["lower"]] = out[name + BOUND_SUFFIXES["upper"]] = None
            continue
        if boot.pooled_interval != "percentile" and name in STUDENTIZED_READS:
            low, high = resampled_ends(c, name, own, index, alpha, boot.pooled_interval)
        else:
            method = "inverted_cdf" if spec.unbounded else "linear"  # +inf cannot be interpolated
            low, high = np.quantile(replicates, [alpha, 1.0 - alpha], method=method)
        out[name + BOUND_SUFFIXES["lower"]] = _value(low)  # None: an unbounded read's +inf end
        out[name + BOUND_SUFFIXES["upper"]] = _value(high)
    return out


# -- decision.md's reads table ------------------------------------------------------------------------
@dataclass(frozen=True)
class ReadRow:
    """One row of decision.md's reads table: a read, optionally with its bootstrap interval or, after
    "vs", the anchor read it is compared with."""

    read: str
    label: str
    with_ci: bool = False
    primary: bool = False
    versus: str | None = None

    @classmethod
    def of(cls, spec: ReadSpec) -> ReadRow:
        return cls(spec.name, spec.label, spec.interval, spec.primary, spec.versus)


def read_rows(guards: tuple[str, ...], replay: bool = True, earlier: bool = True) -> tuple[ReadRow, ...]:
    """decision.md's reads table for an environment with these guard channels (its spec's ``guard_names``),
    with the replay reads when the design registers replays (and the first ones with ``earlier``): the
    vocabulary's order, a guard's rates after the engagement rows."""
    rows: list[ReadRow] = []
    for spec in READS.values():
        if spec.scope in ("shown_with", "gradient") or (spec.scope == "replay" and not replay):
            continue
        if spec.scope == "earlier_replay" and not (replay and earlier):
            continue
        rows.append(ReadRow.of(spec))
        if spec.name == "engagement_delta":
            rows += [ReadRow.of(guard_reads(g)[0]) for g in guards]
    return tuple(rows)


READ_NAMES: tuple[str, ...] = read_names()
"""Every read a decision-rule condition or rank key may name in any environment (the schema's
``rule_fixed_read_name`` enum); a guard's rates are named by the schema's pattern and checked against the
environment's declarations with the design."""


# The statistics of the declared reads (in any order: the vocabulary orders the reads). A new read's
# statistic goes at the bottom.

STATISTICS.register("median_group_std_progress_cm", _median("std_progress_cm"))
STATISTICS.register("median_group_std_best_point_cm", _median("std_best_point_cm"))
for _name in (
    "choice_std_cm",
    "chaos_std_cm",
    "chaos_share",
    "rank_stability",
    "median_divergence_tick",
    "median_first_contact_tick",
    "median_choice_std_cm",
    "replay_std_cm",
    "chaos_fraction",
):
    STATISTICS.register(_name, _replay(_name))
STATISTICS.register("nondegenerate_fraction", _mean("nondegenerate"))
STATISTICS.register("mean_progress_delta_cm", _mean("progress_delta_cm"))
STATISTICS.register("sampled_engagement_rate", _mean("sampled_engagement"))
STATISTICS.register("anchor_engagement_rate", _mean("anchor_engaged"))
STATISTICS.register("engagement_delta", _engagement_delta)
STATISTICS.register("mean_token_entropy", _entropy(0))
STATISTICS.register("mean_tokens_per_chunk", _entropy(2))
STATISTICS.register("gradient_noise_scale", _gradient("gradient_noise_scale"))
STATISTICS.register("gradient_half_cosine", _gradient("gradient_half_cosine"))
