"""Signal or chaos: how much of a group's reward spread the draws' own choices explain.

Why: GRPO learns from the spread of rewards inside a group, but only from the part of it the draws'
choices cause. In a contact-rich scene the same choices, replayed with the same noise keys and a
hair's-breadth perturbation, land elsewhere: that spread is chaos, which no update can learn. Per seed
with K draws, each replayed R times (rewards r[k, 0] of the draw itself and r[k, j], j = 1..R, of its
replays under the registered perturbations; docs/signal-or-chaos.md).

The reads of the decomposition (:mod:`grpo_probe.analysis.cells.variance_components`, the one-way
random-effects ANOVA over all R + 1 rewards of every draw, pooled over the replayed seeds):

    choice std     sqrt(max(0, sigma_b^2))                      (cm)
    chaos std      sqrt(sigma_w^2)                              (cm; the chaos floor)
    chaos share    sigma_w^2 / (sigma_w^2 + max(0, sigma_b^2))  (1 - the intraclass correlation)

The first reads, kept under their names so that the versions of a design registered before the
decomposition rebuild and decide as they did (they use the draw alone across draws and the replays
alone within, and a median over seeds of a clipped difference, which is biased upward under pure chaos):

    across-draw variance   V_a = var_k(r[k, 0])                 (analysis.group_std_ddof, as the group std)
    within-draw variance   V_w = mean_k var_j(r[k, 1..R])      (ddof 1)
    chaos fraction         sum_s V_w / sum_s V_a                (pooled over the replayed seeds)
    median choice std      median_s sqrt(max(0, V_a - V_w))
    replay std             sqrt(mean_s V_w)
    rank stability         Spearman(r[., 0], r[., j]) within the group, median over seeds and replays

Both are the intraclass-correlation decomposition of test-retest reliability (Shrout & Fleiss, 1979).
Every read has a percentile-bootstrap interval over the replayed seeds, keyed like the other reads'.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from grpo_probe.analysis.cells.bootstrap import Estimate, bootstrap_generator
from grpo_probe.analysis.cells.tables import RolloutTable
from grpo_probe.analysis.cells.variance_components import (
    COMPONENT_READS,
    SeedSums,
    pooled_components,
    seed_sums,
)
from grpo_probe.prereg import AnalysisNumbers

__all__ = [
    "CHAOS_READS",
    "INTERVAL_READS",
    "TICK_READS",
    "ChaosColumns",
    "ChaosSummary",
    "PerturbationSummary",
    "ReplayDraws",
    "SeedChaos",
    "chaos_estimate",
    "chaos_statistics",
    "replay_draws",
    "seed_chaos",
    "summarize_chaos",
]


@dataclass(frozen=True)
class SeedChaos:
    """One replayed seed: its across- and within-draw variances, rank correlations and replay ticks."""

    seed: int
    group_var: float
    """V_a: the variance of the draws' rewards (cm^2)."""
    replay_var: float
    """V_w: the mean over draws of the variance of each draw's replays (cm^2)."""
    spearman: tuple[float, ...]
    """Within-group Spearman of the draws' rewards against each replay's (NaN where a side is constant)."""
    divergence_ticks: tuple[float, ...] = ()
    """Per replay episode, the tick it split from its draw (NaN: never)."""
    contact_ticks: tuple[float, ...] = ()
    """Per replay episode, its first pusher-object contact tick (NaN: none)."""
    sums: SeedSums | None = None
    """The seed's sums of squares over every reward of every draw (the decomposition's input)."""
    rewards: tuple[tuple[float, ...], ...] = ()
    """[K][m]: every reward of each draw, the draw's own first, then its replays' (the operating
    simulation's data-resampled null draws its chaos from these rows' within-draw residuals)."""

    @property
    def choice_std_cm(self) -> float:
        """sqrt(max(0, V_a - V_w)): the spread the draws' choices explain."""
        return float(np.sqrt(max(0.0, self.group_var - self.replay_var)))

    @property
    def chaos_std_cm(self) -> float | None:
        """sqrt(SS_w / df_w): this seed's chaos std over every reward of its draws (None without sums)."""
        if self.sums is None:
            return None
        return float(np.sqrt(self.sums.ss_within / self.sums.df_within))

    @property
    def group_std_cm(self) -> float:
        return float(np.sqrt(self.group_var))

    @property
    def replay_std_cm(self) -> float:
        return float(np.sqrt(self.replay_var))


@dataclass(frozen=True)
class PerturbationSummary:
    """What one registered perturbation did: how far its replays moved from their draws."""

    index: int
    kind: str
    scale: float
    replays: int
    median_abs_change_cm: float
    """Median over its replays of |replay reward - draw reward|."""
    diverged_fraction: float
    median_divergence_tick: float | None


@dataclass(frozen=True)
class ReplayDraws:
    """A cell's replays, per replayed seed (its decomposition) and per perturbation (what it did)."""

    seeds: tuple[SeedChaos, ...]
    perturbations: tuple[PerturbationSummary, ...]
    replays: int
    """R: replays of each draw, all perturbations together (the design's ``replays_per_draw`` M times the
    number of perturbations P)."""
    median_group_std_cm: float
    """The median group std over the replayed seeds."""
    diverged_fraction: float
    """The share of replay episodes that split from their draw."""


@dataclass(frozen=True)
class ChaosSummary:
    """A cell's chaos reads over its replayed seeds."""

    seeds: tuple[SeedChaos, ...]
    replays: int
    """R: replays of each draw, all perturbations together (the design's ``replays_per_draw`` M times the
    number of perturbations P)."""
    median_group_std_cm: float
    """The median group std over the replayed seeds: the spread the choice std and the replay std split
    (the cell's primary read is over every seed, which a registered subset of replayed seeds may not be)."""
    choice_std_cm: Estimate
    """sigma_b of the decomposition (:mod:`grpo_probe.analysis.cells.variance_components`)."""
    chaos_std_cm: Estimate
    """sigma_w: the chaos floor."""
    chaos_share: Estimate
    """sigma_w^2 / (sigma_w^2 + sigma_b^2)."""
    replay_std_cm: Estimate
    chaos_fraction: Estimate
    median_choice_std_cm: Estimate
    rank_stability: Estimate
    median_divergence_tick: float | None
    median_first_contact_tick: float | None
    diverged_fraction: float
    perturbations: tuple[PerturbationSummary, ...]


def seed_chaos(
    draws: NDArray[np.float64],
    replays: NDArray[np.float64],
    seed: int,
    ddof: int,
    divergence_ticks: Sequence[float] = (),
    contact_ticks: Sequence[float] = (),
) -> SeedChaos:
    """The decomposition of one seed: ``draws`` [K] the draws' rewards, ``replays`` [K, R] their replays'."""
    draws = np.asarray(draws, dtype=np.float64)
    replays = np.asarray(replays, dtype=np.float64)
    if replays.ndim != 2 or replays.shape[0] != draws.size or replays.shape[1] < 2:
        raise ValueError(
            f"seed {seed}: need [K={draws.size}, R >= 2] replay rewards, got shape {replays.shape}"
        )
    from scipy.stats import spearmanr  # imported where used: scipy.stats is a CPU-second to import, and
    # the jobs that render a finished record (the root page, phase 2's) never decompose a seed

    group_var = float(np.var(draws, ddof=ddof))
    replay_var = float(np.mean(np.var(replays, axis=1, ddof=1)))
    rhos = []
    for j in range(replays.shape[1]):
        if np.ptp(draws) == 0.0 or np.ptp(replays[:, j]) == 0.0:
            rhos.append(float("nan"))
        else:
            rhos.append(float(spearmanr(draws, replays[:, j]).statistic))
    return SeedChaos(
        seed,
        group_var,
        replay_var,
        tuple(rhos),
        tuple(map(float, divergence_ticks)),
        tuple(map(float, contact_ticks)),
        seed_sums(draws, replays),
        tuple(tuple(map(float, row)) for row in np.concatenate([draws[:, None], replays], axis=1)),
    )


@dataclass(frozen=True)
class ChaosColumns:
    """Per-seed columns of the chaos reads, one row per seed (NaN rows: a seed without replays), so the
    same reductions give the full-sample read, its bootstrap interval and the stability resamples."""

    group_var: NDArray[np.float64]
    replay_var: NDArray[np.float64]
    spearman: NDArray[np.float64]
    """[n, R]"""
    divergence_ticks: NDArray[np.float64]
    """[n, K x R]"""
    contact_ticks: NDArray[np.float64]
    """[n, K x R]"""
    sums: NDArray[np.float64] | None = None
    """[n, 4]: each seed's SS_b, SS_w, df_b, df_w
    (:class:`~grpo_probe.analysis.cells.variance_components.SeedSums`)."""
    per_draw: int = 0
    """m = R + 1 rewards of each draw (the draw and its replays)."""
    rewards: NDArray[np.float64] | None = None
    """[n, K, m]: every reward of every draw (NaN rows: a seed without replays)."""

    @classmethod
    def of(cls, seeds: Sequence[SeedChaos], all_seeds: Sequence[int] | None = None) -> ChaosColumns:
        """Columns of ``seeds``, placed on ``all_seeds`` (NaN rows where a seed was not replayed)."""
        order = [s.seed for s in seeds] if all_seeds is None else list(all_seeds)
        by_seed = {s.seed: s for s in seeds}
        r = len(seeds[0].spearman)
        e = len(seeds[0].divergence_ticks)

        def row(seed: int, attr: str, width: int | None) -> Any:
            found = by_seed.get(seed)
            if found is None:
                return np.nan if width is None else np.full(width, np.nan)
            return getattr(found, attr)

        return cls(
            group_var=np.array([row(s, "group_var", None) for s in order], dtype=np.float64),
            replay_var=np.array([row(s, "replay_var", None) for s in order], dtype=np.float64),
            spearman=np.array([row(s, "spearman", r) for s in order], dtype=np.float64).reshape(
                len(order), r
            ),
            divergence_ticks=np.array(
                [row(s, "divergence_ticks", e) for s in order], dtype=np.float64
            ).reshape(len(order), e),
            contact_ticks=np.array([row(s, "contact_ticks", e) for s in order], dtype=np.float64).reshape(
                len(order), e
            ),
            sums=np.array([_sums_row(by_seed.get(s)) for s in order], np.float64).reshape(len(order), 4),
            per_draw=_per_draw(seeds),
            rewards=_rewards(seeds, order),
        )


def _sums_row(seed: SeedChaos | None) -> tuple[float, float, float, float]:
    if seed is None or seed.sums is None:
        return (np.nan, np.nan, np.nan, np.nan)
    x = seed.sums
    return (x.ss_between, x.ss_within, float(x.df_between), float(x.df_within))


def _rewards(seeds: Sequence[SeedChaos], order: Sequence[int]) -> NDArray[np.float64] | None:
    """[n, K, m] rewards on ``order`` (NaN rows for seeds without replays); None where a seed kept none."""
    if not seeds or any(not s.rewards for s in seeds):
        return None
    shape = np.asarray(seeds[0].rewards).shape
    by_seed = {s.seed: np.asarray(s.rewards, dtype=np.float64) for s in seeds}
    if any(v.shape != shape for v in by_seed.values()):
        return None
    return np.stack([by_seed.get(seed, np.full(shape, np.nan)) for seed in order])


def _per_draw(seeds: Sequence[SeedChaos]) -> int:
    """The one m = R + 1 of every replayed seed (the design registers R; a table that varies is an error)."""
    found = {s.sums.per_draw for s in seeds if s.sums is not None}
    if len(found) > 1:
        raise ValueError(f"replayed seeds have different replay counts per draw: {sorted(found)}")
    return found.pop() if found else 0


def _nanmedian_flat(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Median of the finite values of each [..., n, m] block over its last two axes (NaN when none)."""
    flat = values.reshape(*values.shape[:-2], -1)
    out = np.full(flat.shape[:-1], np.nan)
    ok = np.isfinite(flat).any(axis=-1)
    if ok.any():
        out[ok] = np.nanmedian(flat[ok], axis=-1)
    return out


def chaos_statistics(
    columns: ChaosColumns, index: NDArray[np.int64], names: Collection[str] | None = None
) -> dict[str, NDArray[np.float64]]:
    """Every chaos read (or the ``names`` among them) on the seeds ``index`` selects (``[..., n]``
    positions into the columns): the full sample is ``np.arange(n)``, a bootstrap or a stability
    resample a [B, n] draw, a nested bootstrap [B, B', n]."""
    wanted = set(CHAOS_READS if names is None else names) & set(CHAOS_READS)
    out: dict[str, NDArray[np.float64]] = {}
    if wanted & set(COMPONENT_READS) and columns.sums is not None:
        parts = pooled_components(columns.sums, columns.per_draw, index)
        out.update({name: parts[name] for name in COMPONENT_READS if name in wanted})
    if not wanted - set(COMPONENT_READS):
        return out
    va, vw = columns.group_var[index], columns.replay_var[index]
    with np.errstate(invalid="ignore", divide="ignore"):
        replayed = np.isfinite(vw)
        n = replayed.sum(axis=-1)
        sum_w = np.where(replayed, vw, 0.0).sum(axis=-1)
        sum_a = np.where(replayed, va, 0.0).sum(axis=-1)
        if "replay_std_cm" in wanted:
            out["replay_std_cm"] = np.where(n > 0, np.sqrt(sum_w / np.maximum(n, 1)), np.nan)
        if "chaos_fraction" in wanted:
            out["chaos_fraction"] = np.where(
                (n > 0) & (sum_a > 0.0), sum_w / np.where(sum_a > 0.0, sum_a, 1.0), np.nan
            )
        if "median_choice_std_cm" in wanted:
            choice = np.where(replayed, np.sqrt(np.maximum(0.0, va - vw)), np.nan)
            out["median_choice_std_cm"] = _nanmedian_flat(choice[..., None])
    for name, column in (
        ("rank_stability", columns.spearman),
        ("median_divergence_tick", columns.divergence_ticks),
        ("median_first_contact_tick", columns.contact_ticks),
    ):
        if name in wanted:
            out[name] = _nanmedian_flat(column[index])
    return out


INTERVAL_READS: tuple[str, ...] = (
    *COMPONENT_READS,
    "median_choice_std_cm",
    "replay_std_cm",
    "chaos_fraction",
    "rank_stability",
)
"""Chaos reads reported with a bootstrap interval over the replayed seeds."""
TICK_READS: tuple[str, ...] = ("median_divergence_tick", "median_first_contact_tick")
"""Chaos reads reported as points: medians over replay episodes."""
CHAOS_READS: tuple[str, ...] = (*INTERVAL_READS, *TICK_READS)
"""Every read of the replays."""


def _point(value: NDArray[np.float64]) -> float | None:
    v = float(value)
    return v if np.isfinite(v) else None


def chaos_estimate(columns: ChaosColumns, read: str, analysis: AnalysisNumbers, cell: str) -> Estimate:
    """One read of the replayed seeds in ``columns`` with its percentile-bootstrap interval: B =
    ``analysis.bootstrap.resamples`` resamples of the seeds, keyed by (bootstrap seed, cell, read)."""
    n = len(columns.replay_var)
    boot = analysis.bootstrap
    value = float(chaos_statistics(columns, np.arange(n), (read,))[read])
    index = bootstrap_generator(boot.seed, cell, read).integers(0, n, size=(boot.resamples, n))
    replicates = chaos_statistics(columns, index, (read,))[read]
    replicates = replicates[np.isfinite(replicates)]
    if not np.isfinite(value) or replicates.size == 0:
        return Estimate(value, float("nan"), float("nan"))
    alpha = (1.0 - boot.interval_confidence) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return Estimate(value, float(low), float(high))


def replay_draws(probe: RolloutTable, replays: pa.Table, analysis: AnalysisNumbers, cell: str) -> ReplayDraws:
    """Every replayed seed's decomposition and what each perturbation did, from a cell's probe rows and its
    replay table (every replayed seed's K draws, each with R replays); a draw without its replays, or
    replays of a draw the probe lacks, is an error."""
    rows = replays.select(
        ["seed", "draw", "perturbation_index", "perturbation", "perturbation_scale", "replay",
         "progress_final_cm", "divergence_tick", "first_contact_tick"]
    ).to_pylist()  # fmt: skip
    if not rows:
        raise ValueError(f"cell {cell}: its replay tables hold no rows")
    by_seed: dict[int, dict[int, list[dict[str, Any]]]] = {}
    for row in rows:
        by_seed.setdefault(row["seed"], {}).setdefault(row["draw"], []).append(row)
    probe_seeds = set(probe.seed.tolist())
    seeds = []
    for seed in sorted(by_seed):
        if seed not in probe_seeds:
            raise ValueError(f"{probe.path}: cell {cell}: seed {seed} is replayed but has no probe rows")
        probe_rows = probe.rows_of(seed)
        draws = probe.draw[probe_rows].tolist()
        replayed = by_seed[seed]
        if sorted(replayed) != sorted(draws):
            raise ValueError(
                f"{probe.path}: cell {cell}, seed {seed}: the replays cover draws {sorted(replayed)}, the "
                f"probe holds draws {sorted(draws)}"
            )
        counts = {len(v) for v in replayed.values()}
        if len(counts) != 1:
            raise ValueError(f"cell {cell}, seed {seed}: draws have unequal replay counts {sorted(counts)}")
        ordered = [sorted(replayed[d], key=lambda r: (r["perturbation_index"], r["replay"])) for d in draws]
        matrix = np.array([[r["progress_final_cm"] for r in reps] for reps in ordered])
        flat = [r for reps in ordered for r in reps]

        def tick(value: int | None) -> float:
            return float("nan") if value is None else float(value)

        seeds.append(
            seed_chaos(
                probe.progress_final_cm[probe_rows],
                matrix,
                seed,
                analysis.group_std_ddof,
                [tick(r["divergence_tick"]) for r in flat],
                [tick(r["first_contact_tick"]) for r in flat],
            )
        )
    keys = zip(probe.seed.tolist(), probe.draw.tolist(), strict=True)
    original = dict(zip(keys, probe.progress_final_cm.tolist(), strict=True))
    perturbations = []
    for index in sorted({r["perturbation_index"] for r in rows}):
        mine = [r for r in rows if r["perturbation_index"] == index]
        ticks = [r["divergence_tick"] for r in mine if r["divergence_tick"] is not None]
        perturbations.append(
            PerturbationSummary(
                index=index,
                kind=mine[0]["perturbation"],
                scale=mine[0]["perturbation_scale"],
                replays=len(mine),
                median_abs_change_cm=float(
                    np.median([abs(r["progress_final_cm"] - original[(r["seed"], r["draw"])]) for r in mine])
                ),
                diverged_fraction=len(ticks) / len(mine),
                median_divergence_tick=float(np.median(ticks)) if ticks else None,
            )
        )
    diverged = sum(1 for s in seeds for t in s.divergence_ticks if np.isfinite(t))
    episodes = sum(len(s.divergence_ticks) for s in seeds)
    return ReplayDraws(
        seeds=tuple(seeds),
        perturbations=tuple(perturbations),
        replays=int(matrix.shape[1]),
        median_group_std_cm=float(np.median([s.group_std_cm for s in seeds])),
        diverged_fraction=diverged / episodes if episodes else float("nan"),
    )


def summarize_chaos(
    probe: RolloutTable, replays: pa.Table, analysis: AnalysisNumbers, cell: str
) -> ChaosSummary:
    """The chaos reads of a cell with their intervals, from its probe rows and its replay table
    (:func:`replay_draws`, then :func:`chaos_estimate` per read)."""
    draws = replay_draws(probe, replays, analysis, cell)
    seeds = list(draws.seeds)
    columns = ChaosColumns.of(seeds)
    full = chaos_statistics(columns, np.arange(len(seeds)))

    def estimate(read: str) -> Estimate:
        return chaos_estimate(columns, read, analysis, cell)

    return ChaosSummary(
        seeds=tuple(seeds),
        replays=draws.replays,
        median_group_std_cm=draws.median_group_std_cm,
        choice_std_cm=estimate("choice_std_cm"),
        chaos_std_cm=estimate("chaos_std_cm"),
        chaos_share=estimate("chaos_share"),
        replay_std_cm=estimate("replay_std_cm"),
        chaos_fraction=estimate("chaos_fraction"),
        median_choice_std_cm=estimate("median_choice_std_cm"),
        rank_stability=estimate("rank_stability"),
        median_divergence_tick=_point(full["median_divergence_tick"]),
        median_first_contact_tick=_point(full["median_first_contact_tick"]),
        diverged_fraction=draws.diverged_fraction,
        perturbations=draws.perturbations,
    )
