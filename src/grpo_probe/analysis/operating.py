"""How often the registered rule says go: its operating characteristics, by simulation at the design's sizes.

Why: a decision is a test, and a lab needs its error rates as a trial states its type-I error and power
before it sees data. The rule reads estimates with sampling error (15 seeds, K draws, R replays), so a
cell whose rewards carry no choice signal at all can still pass by luck, and one with real signal can
fail. Both rates depend on the design's sizes and on the levels of signal and chaos, so they are
simulated here for this design, at its own sizes, through the same code that computes the real reads.

The simulation model is the decomposition's own (:mod:`grpo_probe.analysis.variance_components`): per
seed s, draw j and observation r (r = 0 the draw, r = 1..R its replays)

    y_sjr = b_sj + e_sjr,    b_sj ~ N(0, sigma_b^2)  (the draw's choice),  e_sjr ~ N(0, sigma_w^2) (chaos)

(a seed's own mean cancels in every read), with the design's seeds, replayed seeds, K and R. Two
scenarios per cell:

- **pure chaos**: sigma_b = 0, sigma_w = the cell's measured chaos std: every go is a false go;
- **measured**: sigma_b, sigma_w = the cell's measured choice and chaos std: how often the rule says
  go (its power) at the levels this run found.

In each simulated run every read the rule names that is computed from the rewards alone is recomputed
exactly as for the real run (:data:`SIMULATED_READS`: the group spreads, the share of non-degenerate
groups, the replay reads), each interval with the registered bootstrap at the same keyed resample
positions; so what is simulated is the registered rule itself. A condition on any other read (the
anchor comparison, guard trips, entropy) is not simulated: under pure chaos it is taken as passed (the
false-go rate is then an upper bound, the rate of a cell that passes everything else), at the measured
levels it keeps the verdict this run gave it. A design without replays has no chaos std: its pure-chaos
scenario puts all of the measured group spread into chaos (sigma_w^2 = the mean over seeds of the group
variance), and it has no measured scenario.

A design's false-go rate is the share of runs in which any cell qualifies when every cell is pure
chaos; its go rate at the measured levels the share in which any cell qualifies with every cell at its
measured levels. Each rate comes with its Wilson score interval over the S simulated runs (Wilson, 1927;
Agresti & Coull, 1998): S = ``analysis.operating_characteristics.simulations``, the runs' RNG keyed by
its ``seed``, the scenario and the cell.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from grpo_probe.analysis.bootstrap import bootstrap_generator
from grpo_probe.analysis.chaos import ChaosColumns
from grpo_probe.analysis.reads import compute_reads
from grpo_probe.analysis.seed_columns import SeedColumns
from grpo_probe.analysis.variance_components import COMPONENT_READS
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.prereg import AnalysisNumbers, Cell
from grpo_probe.prereg.rule import HEADS, OPS, Condition, DecisionRule, OperatingSpec
from grpo_probe.prereg.vocabulary import read_spec

__all__ = [
    "SCENARIOS",
    "SIMULATED_READS",
    "CellSize",
    "Levels",
    "Rate",
    "cell_levels",
    "cell_pass_rates",
    "design_rates",
    "operating_record",
    "simulate_cell",
    "wilson_interval",
]

SIMULATED_READS: frozenset[str] = frozenset(
    {
        "median_group_std_progress_cm",
        "nondegenerate_fraction",
        *COMPONENT_READS,
        "median_choice_std_cm",
        "replay_std_cm",
        "chaos_fraction",
    }
)
"""Reads computed from the rewards alone, which the simulation recomputes in every simulated run."""

SCENARIOS: tuple[str, ...] = ("pure_chaos", "measured")

_CHUNK_ELEMENTS = 4_000_000
"""Seed positions gathered at once when a simulated interval is computed (about 32 MB of indices)."""


@dataclass(frozen=True)
class CellSize:
    """A cell's sizes: seeds, of which ``replayed`` are replayed, K draws each, R replays of each draw."""

    seeds: int
    replayed: int
    k: int
    replays: int

    def text(self) -> str:
        """``15 seeds x K = 8, 15 replayed x R = 4``."""
        replayed = f", {self.replayed} replayed x R = {self.replays}" if self.replayed else ", no replays"
        return f"{self.seeds} seeds x K = {self.k}{replayed}"


@dataclass(frozen=True)
class Levels:
    """The choice and chaos std (cm) a scenario simulates."""

    choice_std_cm: float
    chaos_std_cm: float


@dataclass(frozen=True)
class Rate:
    """``count`` of ``runs`` simulated runs, with the Wilson score interval of the rate."""

    count: int
    runs: int
    low: float
    high: float

    @property
    def value(self) -> float:
        return self.count / self.runs

    @classmethod
    def of(cls, hits: NDArray[np.bool_]) -> Rate:
        count, runs = int(hits.sum()), int(hits.size)
        low, high = wilson_interval(count, runs)
        return cls(count, runs, low, high)

    def to_dict(self) -> dict[str, Any]:
        """The rate as decision.json holds it, also in percent (what the page prints)."""
        return {
            "count": self.count,
            "runs": self.runs,
            "rate": self.value,
            "low": self.low,
            "high": self.high,
            "percent": 100.0 * self.value,
            "low_percent": 100.0 * self.low,
            "high_percent": 100.0 * self.high,
        }


def wilson_interval(count: int, runs: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of a binomial proportion (Wilson, 1927):

    (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n),  p = count / n, z = z_{(1+c)/2}.
    """
    if runs == 0:
        return (math.nan, math.nan)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = count / runs
    centre = p + z * z / (2 * runs)
    half = z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs))
    scale = 1 + z * z / runs
    low = 0.0 if count == 0 else max(0.0, (centre - half) / scale)  # exact at the ends, where the
    high = 1.0 if count == runs else min(1.0, (centre + half) / scale)  # formula's roundoff is not
    return (low, high)


def _simulated_columns(
    cell: Cell, size: CellSize, levels: Levels, analysis: AnalysisNumbers, rng: np.random.Generator, runs: int
) -> SeedColumns:
    """``runs`` simulated runs of the cell, stacked: run i's seeds are rows i*n .. i*n + n - 1 (its first
    ``size.replayed`` seeds replayed). Columns the simulation does not model are NaN."""
    n, k, m = size.seeds, size.k, size.replays + 1
    choice = rng.standard_normal((runs, n, k, 1)) * levels.choice_std_cm
    y = choice + rng.standard_normal((runs, n, k, m)) * levels.chaos_std_cm
    draws = y[..., 0]
    ddof = analysis.group_std_ddof
    std = np.std(draws, axis=-1, ddof=ddof).reshape(-1)
    rows = runs * n
    nan = np.full(rows, np.nan)
    chaos = None
    if size.replayed:
        replayed = np.zeros((runs, n), dtype=bool)
        replayed[:, : size.replayed] = True
        replays = y[..., 1:]
        draw_means = y.mean(axis=-1)
        ss_b = m * ((draw_means - draw_means.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
        ss_w = ((y - draw_means[..., None]) ** 2).sum(axis=(-1, -2))
        sums = np.stack([ss_b, ss_w, np.full_like(ss_b, k - 1), np.full_like(ss_b, k * (m - 1))], axis=-1)
        sums[~replayed] = np.nan
        group_var = np.var(draws, axis=-1, ddof=ddof)
        replay_var = np.var(replays, axis=-1, ddof=1).mean(axis=-1)
        replay_var[~replayed] = np.nan
        group_var[~replayed] = np.nan
        chaos = ChaosColumns(
            group_var=group_var.reshape(-1),
            replay_var=replay_var.reshape(-1),
            spearman=np.empty((rows, 0)),
            divergence_ticks=np.empty((rows, 0)),
            contact_ticks=np.empty((rows, 0)),
            sums=sums.reshape(rows, 4),
            per_draw=m,
        )
    return SeedColumns(
        cell=cell,
        k=k,
        std_progress_cm=std,
        std_best_point_cm=nan,
        nondegenerate=(std > analysis.degenerate_tol_cm).astype(np.float64),
        progress_delta_cm=nan,
        sampled_engagement=nan,
        anchor_engaged=nan,
        sampled_trips={},
        anchor_trips={},
        entropy=None,
        chaos=chaos,
    )


def _simulated_reads(
    columns: SeedColumns, size: CellSize, names: set[str], analysis: AnalysisNumbers, runs: int
) -> dict[str, NDArray[np.float64]]:
    """Per simulated run, the reads ``names`` (flat keys, ``chaos_share`` or ``chaos_share_ci_high``)."""
    n = size.seeds
    base = (np.arange(runs) * n)[:, None]
    points = {name for name in names if name in SIMULATED_READS}
    out = compute_reads(columns, base + np.arange(n), points) if points else {}
    boot = analysis.bootstrap
    alpha = (1.0 - boot.confidence) / 2.0
    for read in sorted({n.removesuffix("_ci_low").removesuffix("_ci_high") for n in names} - points):
        if read not in SIMULATED_READS:
            continue
        spec = read_spec(read)
        own = np.arange(size.replayed if spec is not None and spec.replayed_seeds else n)
        inner = bootstrap_generator(boot.seed, columns.cell.id, read).integers(
            0, own.size, size=(boot.resamples, own.size)
        )
        low, high = np.empty(runs), np.empty(runs)
        step = max(1, _CHUNK_ELEMENTS // inner.size)
        for start in range(0, runs, step):
            index = base[start : start + step, :, None] + own[inner][None]  # [b, B, m]
            values = compute_reads(columns, index, {read})[read]
            with np.errstate(invalid="ignore"):
                ends = np.nanquantile(values, [alpha, 1.0 - alpha], axis=-1)
            low[start : start + step], high[start : start + step] = ends
        out[f"{read}_ci_low"], out[f"{read}_ci_high"] = low, high
    return out


def _names(condition: Condition) -> list[str]:
    keys = [condition.key]
    if condition.threshold_read is not None:
        keys.append(condition.threshold_read.key)
    return keys


def _simulated(condition: Condition) -> bool:
    """Whether every read the condition compares is one the simulation recomputes."""
    keys = [condition.ref.name] + ([condition.threshold_read.name] if condition.threshold_read else [])
    return all(key in SIMULATED_READS for key in keys)


def simulate_cell(
    rule: DecisionRule,
    cell: Cell,
    size: CellSize,
    levels: Levels,
    analysis: AnalysisNumbers,
    scenario: str,
    measured: Mapping[str, Any] | None = None,
    spec: OperatingSpec | None = None,
) -> NDArray[np.bool_]:
    """Per simulated run, whether the cell qualifies under ``rule`` at ``levels``: [S] booleans.

    ``measured``: the cell's reads from this run, for the conditions the simulation does not model
    (their measured verdict); None takes them as passed (the pure-chaos scenario's upper bound).
    """
    spec = spec or analysis.operating
    runs = spec.simulations
    if cell.head not in HEADS:
        return np.zeros(runs, dtype=bool)
    needed = set(rule.criteria_for(cell.head))
    conditions = [c for criterion in rule.criteria if criterion.name in needed for c in criterion.all_of]
    modelled = [c for c in conditions if _simulated(c)]
    passes = np.ones(runs, dtype=bool)
    for cond in conditions:
        if cond in modelled:
            continue
        if measured is not None:
            value, threshold = measured.get(cond.key), cond.threshold_on(measured)
            ok = value is not None and threshold is not None and bool(OPS[cond.op](value, threshold))
            passes &= ok
    if not modelled or not passes.any():
        return passes
    rng = numpy_generator(spec.seed, tag("operating"), tag(scenario), tag(cell.id))
    columns = _simulated_columns(cell, size, levels, analysis, rng, runs)
    names = {key for cond in modelled for key in _names(cond)}
    reads = _simulated_reads(columns, size, names, analysis, runs)
    for cond in modelled:
        threshold = cond.threshold_on(reads)
        with np.errstate(invalid="ignore"):
            passes &= OPS[cond.op](reads[cond.key], np.nan if threshold is None else threshold)
    return passes


def cell_levels(reads: Mapping[str, Any], group_std_cm: NDArray[np.float64]) -> tuple[Levels, Levels | None]:
    """(pure chaos, measured) levels of a cell from its reads, or, without replays, from its seeds' group
    stds ``group_std_cm`` (all of the spread taken as chaos; no measured levels)."""
    if reads.get("chaos_std_cm") is not None:
        chaos = float(reads["chaos_std_cm"])
        return Levels(0.0, chaos), Levels(float(reads["choice_std_cm"] or 0.0), chaos)
    return Levels(0.0, float(np.sqrt(np.mean(np.square(group_std_cm))))), None


def cell_pass_rates(
    rule: DecisionRule,
    cell: Cell,
    size: CellSize,
    reads: Mapping[str, Any],
    group_std_cm: NDArray[np.float64],
    analysis: AnalysisNumbers,
    spec: OperatingSpec | None = None,
) -> tuple[Levels, Levels | None, dict[str, NDArray[np.bool_] | None]]:
    """The cell's (pure chaos, measured) levels and, per scenario, whether it qualifies in each simulated
    run (None: a scenario without levels)."""
    null, measured = cell_levels(reads, group_std_cm)
    return (
        null,
        measured,
        {
            "pure_chaos": simulate_cell(rule, cell, size, null, analysis, "pure_chaos", None, spec),
            "measured": None
            if measured is None
            else simulate_cell(rule, cell, size, measured, analysis, "measured", reads, spec),
        },
    )


def design_rates(
    cells: Sequence[Cell], passes: Mapping[str, Mapping[str, NDArray[np.bool_] | None]], outcome_kind: str
) -> dict[str, Rate | None]:
    """The design's rates from each cell's simulated verdicts: false go (any cell qualifies, all pure
    chaos), go at the measured levels, and the share of runs at the measured levels that give
    ``outcome_kind`` (the outcome this run found)."""
    routed = [c for c in cells if c.head in HEADS]
    if not routed:
        return {"false_go": None, "go_at_measured": None, "same_kind_at_measured": None}
    null = np.any([passes[c.id]["pure_chaos"] for c in routed], axis=0)
    out: dict[str, Rate | None] = {"false_go": Rate.of(null)}
    if any(passes[c.id]["measured"] is None for c in routed):
        out["go_at_measured"] = out["same_kind_at_measured"] = None
        return out
    heads = {
        head: np.any(
            [passes[c.id]["measured"] for c in routed if c.head == head] or [np.zeros_like(null)], axis=0
        )
        for head in HEADS
    }
    kind = np.select(
        [heads["ar"] & heads["flow"], heads["ar"], heads["flow"]],
        ["ar_then_flow", "phase2_ar", "phase2_flow"],
        "park",
    )
    out["go_at_measured"] = Rate.of(kind != "park")
    out["same_kind_at_measured"] = Rate.of(kind == outcome_kind)
    return out


def _levels_dict(levels: Levels | None) -> dict[str, float] | None:
    return (
        None
        if levels is None
        else {"choice_std_cm": levels.choice_std_cm, "chaos_std_cm": levels.chaos_std_cm}
    )


def operating_record(
    rule: DecisionRule,
    cells: Sequence[Cell],
    reads: Mapping[str, Mapping[str, Any]],
    columns: Mapping[str, SeedColumns],
    replayed: int,
    replays: int,
    analysis: AnalysisNumbers,
    outcome_kind: str,
) -> dict[str, Any]:
    """decision.json's ``operating``: the rule's false-go rate and power at this design's sizes, per cell
    and for the design (the module docstring says what is simulated and what each rate means)."""
    spec = analysis.operating
    passes: dict[str, dict[str, NDArray[np.bool_] | None]] = {}
    per_cell = []
    for cell in cells:
        mine = columns[cell.id]
        size = CellSize(len(mine.std_progress_cm), replayed, mine.k, replays)
        null, measured, passes[cell.id] = cell_pass_rates(
            rule, cell, size, reads[cell.id], mine.std_progress_cm, analysis
        )
        verdicts = passes[cell.id]
        per_cell.append(
            {
                "id": cell.id,
                "size": {
                    "seeds": size.seeds,
                    "replayed": size.replayed,
                    "k": size.k,
                    "replays": size.replays,
                },
                "size_text": size.text(),
                "levels": {"pure_chaos": _levels_dict(null), "measured": _levels_dict(measured)},
                "false_go": None if cell.head not in HEADS else Rate.of(verdicts["pure_chaos"]).to_dict(),  # type: ignore[arg-type]
                "power": None
                if cell.head not in HEADS or verdicts["measured"] is None
                else Rate.of(verdicts["measured"]).to_dict(),
            }
        )
    design = design_rates(cells, passes, outcome_kind)
    false_go = design["false_go"]
    return {
        **spec.to_dict(),
        "model": "y = b + e per draw and replay, b ~ N(0, sigma_b^2), e ~ N(0, sigma_w^2)",
        "simulated_reads": sorted(SIMULATED_READS),
        "cells": per_cell,
        "design": {name: None if rate is None else rate.to_dict() for name, rate in design.items()},
        "false_go_target_percent": 100.0 * spec.false_go_target,
        "interval_confidence_percent": 95.0,
        "within_target": None if false_go is None else false_go.value <= spec.false_go_target,
    }
