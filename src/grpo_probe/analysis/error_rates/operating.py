"""How often the registered rule says go: its operating characteristics, by simulation at the design's sizes.

Why: a decision is a test, and a lab needs its error rates as a trial states its type-I error and power
before it sees data. The rule reads estimates with sampling error (15 seeds, K draws, R replays), so a
cell whose rewards carry no choice signal at all can still pass by luck, and one with real signal can
fail. Both rates depend on the design's sizes and on the levels of signal and chaos, so they are
simulated here for this design, at its own sizes, through the same code that computes the real reads.

The simulation model is the decomposition's own (:mod:`grpo_probe.analysis.cells.variance_components`): per
seed s, draw j and observation r (r = 0 the draw, r = 1..R its replays)

    y_sjr = b_sj + e_sjr,    b_sj ~ N(0, sigma_b^2)  (the draw's choice),  e_sjr ~ N(0, sigma_w^2) (chaos)

(a seed's own mean cancels in every read), with the design's seeds, replayed seeds, K and R. The
scenarios per cell:

- **pure chaos**: sigma_b = 0, sigma_w = the cell's measured chaos std: every go is a false go. The
  easiest null: the rule's own bar sits far from it.
- **at the bar**: the least favourable point of the null, where a true value sits exactly at the
  threshold of a clause the simulation models (:func:`boundaries`): the chaos share at its maximum
  t (sigma_w^2 = t V, sigma_b^2 = (1 - t) V, V the measured total variance), the choice std at its
  minimum (sigma_b = the bar, sigma_w measured), a relative bar at its ratio. A go there is a false
  go, and a composite null's size is its rate at that boundary (Lehmann & Romano, *Testing Statistical
  Hypotheses*, 2005, Sec. 3.4 and 8.1), not at its easiest point. A cell with several boundaries
  takes the one with the highest rate.
- **from the data** (pure chaos and at the bar): the same two, with the chaos drawn not from a normal
  but from the run's own within-draw residuals (:class:`ResidualPool`): each simulated seed takes one
  replayed seed of the run and draws its chaos from that seed's residuals, rescaled to the scenario's
  sigma_w (and its choice std scaled with that seed's chaos), so contact chaos keeps its heavy tails,
  its modes and its spread between seeds. A residual bootstrap of the one-way model (Davison &
  Hinkley, 1997, Sec. 3.8, "Hierarchical data"); the page reports the larger of the two rates.
- **the boundary searched** (:data:`SEARCH_SCENARIOS`): the reads pool the seeds, so the null's boundary
  is a set. The pooled share is also at its bar when the choice spread is equal in every seed and the
  chaos differs between seeds as the run's does (per-seed chaos scales from the run's own within-draw
  residuals; :meth:`ResidualPool.draw_spread`): a percentile bootstrap over 15 seeds is then too
  narrow, and the rule goes more often than at the share-in-every-seed point. Three such points, normal
  chaos at each seed's scale, residuals resampled per seed and residuals resampled per draw, are
  simulated at every boundary of the cell with :func:`search_runs` runs; the one with the highest design
  rate is run again at the full S (its own RNG stream) and the target is checked at the worst of it,
  ``at_bar`` and ``at_bar_data`` (:data:`BOUNDARY_POINTS` names each, and why it can be the worst).
- **measured**: sigma_b, sigma_w = the cell's measured choice and chaos std: how often the rule says
  go (its power) at the levels this run found, and how often it names the arm this run named.

In each simulated run every read the rule names that is computed from the rewards alone is recomputed
exactly as for the real run (:data:`SIMULATED_READS`: the group spreads, the share of non-degenerate
groups, the replay reads), each interval with the registered bootstrap at the same keyed resample
positions; so what is simulated is the registered rule itself. A condition on any other read (the
anchor comparison, guard trips, entropy) is not simulated: under a null it is taken as passed (the
false-go rate is then an upper bound, the rate of a cell that passes everything else), at the measured
levels it keeps the verdict this run gave it; the arm a run names is its best qualifying cell by the
registered ranking on this run's reads. A design without replays has no chaos std: its pure-chaos
scenario puts all of the measured group spread into chaos (sigma_w^2 = the mean over seeds of the group
variance), and it has no measured scenario.

A design's false-go rate is the share of runs in which any cell qualifies when every cell sits at a
null (all pure chaos, or all at their bars: the family-wise rate the registered target bounds); its go
rate at the measured levels the share in which any cell qualifies with every cell at its measured
levels, and its arm rate the share that names the same arm(s) as this run. Each rate comes with its
Wilson score interval over the S simulated runs (Wilson, 1927; Agresti & Coull, 1998): S =
``analysis.operating_characteristics.simulations``, the runs' RNG keyed by its ``seed``, the scenario
and the cell.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from grpo_probe.analysis.cells.bootstrap import bootstrap_generator
from grpo_probe.analysis.cells.chaos import ChaosColumns
from grpo_probe.analysis.cells.reads import compute_reads, resampled_ends
from grpo_probe.analysis.cells.seed_columns import SeedColumns
from grpo_probe.analysis.error_rates.nulls import SIMULATED_READS, Levels, ResidualPool, boundaries, simulated
from grpo_probe.analysis.error_rates.rates import Rate, any_cell, rate_dict, wilson_interval, worst_rate
from grpo_probe.analysis.rule.decision_rule import Outcome, rank_cells
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.prereg import AnalysisNumbers, Cell
from grpo_probe.prereg.rule import HEADS, DecisionRule, OperatingSpec
from grpo_probe.prereg.vocabulary import read_spec

__all__ = [
    "BOUNDARY_POINTS",
    "NULL_SCENARIOS",
    "SCENARIOS",
    "SEARCH_SCENARIOS",
    "SIMULATED_READS",
    "CellSize",
    "Levels",
    "Rate",
    "ResidualPool",
    "boundaries",
    "cell_levels",
    "cell_pass_rates",
    "confirm_worst",
    "design_rates",
    "operating_record",
    "search_runs",
    "searched_worst",
    "simulate_cell",
    "wilson_interval",
    "worst_rate",
]

SEARCH_SCENARIOS: dict[str, str] = {
    "at_bar_seeds": "seeds",
    "at_bar_seeds_data": "seeds_data",
    "at_bar_draws_data": "draws_data",
}
"""The boundary points searched beyond the share at the bar in every seed: scenario -> its spread over the
seeds (:data:`grpo_probe.analysis.error_rates.nulls.SPREADS`)."""

SCENARIOS: tuple[str, ...] = (
    "pure_chaos", "pure_chaos_data", "at_bar", "at_bar_data", *SEARCH_SCENARIOS, "measured"
)  # fmt: skip
"""Every scenario a cell is simulated under (the module docstring says what each is)."""

BOUNDARY_POINTS: dict[str, tuple[str, str]] = {
    "at_bar": (
        "the share at the bar in every seed, normal chaos",
        "every seed alike: an interval over the seeds covers about as it promises",
    ),
    "at_bar_data": (
        "the share at the bar in every seed, chaos resampled from each replayed seed's residuals",
        "contact chaos is heavy-tailed, so a seed's read varies more than a normal's",
    ),
    "at_bar_seeds": (
        "the pooled share at the bar, the choice spread equal in every seed, normal chaos at each "
        "seed's measured scale",
        "the chaos differs between seeds, so the pooled read varies more between samples of seeds than a "
        "percentile interval over them allows for",
    ),
    "at_bar_seeds_data": (
        "the pooled share at the bar, the choice spread equal in every seed, chaos resampled per seed "
        "from the run's residuals",
        "the chaos differs between seeds and is heavy-tailed, so the pooled read varies more between "
        "samples of seeds than a percentile interval over them allows for",
    ),
    "at_bar_draws_data": (
        "the pooled share at the bar, the choice spread equal in every seed, chaos resampled per draw "
        "from the run's residuals",
        "heavy-tailed chaos mixed over the seeds: the seeds differ less than the run's, the tails remain",
    ),
}
"""Each point of the null's boundary the target is checked against: (what it is, why it can be the
worst), as decision.json's ``operating.worst_point`` and the page name it."""

NULL_SCENARIOS: tuple[str, ...] = ("pure_chaos", "pure_chaos_data", "at_bar", "at_bar_data")
"""The scenarios in which every go is a false go."""

_SEARCH_SHARE = 4
"""The searched points run S / 4 simulated runs (at least :data:`_SEARCH_MIN`), the worst again at S."""
_SEARCH_MIN = 100

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


def search_runs(spec: OperatingSpec) -> int:
    """Simulated runs per searched boundary point: S / 4, at least 100 (and at most S)."""
    return min(spec.simulations, max(_SEARCH_MIN, spec.simulations // _SEARCH_SHARE))


def _simulated_rewards(
    size: CellSize,
    levels: Levels,
    rng: np.random.Generator,
    runs: int,
    pool: ResidualPool | None = None,
    spread: str | None = None,
) -> NDArray[np.float64]:
    """[runs, n, K, m] rewards at ``levels``: normal choice and chaos, or the chaos from ``pool`` (spread
    over the seeds as ``spread`` says, :meth:`ResidualPool.draw_spread`)."""
    n, k, m = size.seeds, size.k, size.replays + 1
    if pool is not None and spread is not None:
        return pool.draw_spread(spread, levels, rng, runs, n, k, m)
    if pool is not None:
        return pool.draw(levels, rng, runs, n, k, m)
    choice = rng.standard_normal((runs, n, k, 1)) * levels.choice_std_cm
    return choice + rng.standard_normal((runs, n, k, m)) * levels.chaos_std_cm


def _simulated_columns(
    cell: Cell, size: CellSize, y: NDArray[np.float64], analysis: AnalysisNumbers, runs: int
) -> SeedColumns:
    """``runs`` simulated runs of the cell from their rewards ``y`` [runs, n, K, m], stacked: run i's
    seeds are rows i*n .. i*n + n - 1 (its first ``size.replayed`` seeds replayed). Columns the
    simulation does not model are NaN."""
    n, k, m = size.seeds, size.k, size.replays + 1
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
    alpha = (1.0 - boot.interval_confidence) / 2.0
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
            samples = base[start : start + step] + own  # [b, m]: each simulated run's seeds
            ends = resampled_ends(columns, read, samples, inner, alpha, boot.pooled_interval)
            low[start : start + step], high[start : start + step] = ends
        out[f"{read}_ci_low"], out[f"{read}_ci_high"] = low, high
    return out


def simulate_cell(
    rule: DecisionRule,
    cell: Cell,
    size: CellSize,
    levels: Levels,
    analysis: AnalysisNumbers,
    scenario: str,
    measured: Mapping[str, Any] | None = None,
    spec: OperatingSpec | None = None,
    pool: ResidualPool | None = None,
    spread: str | None = None,
) -> NDArray[np.bool_]:
    """Per simulated run, whether the cell qualifies under ``rule`` at ``levels``: [S] booleans.

    ``measured``: the cell's reads from this run, for the conditions the simulation does not model
    (their measured verdict); None takes them as passed (a null scenario's upper bound). ``pool``: draw
    the chaos from the run's own residuals instead of a normal (the data-resampled scenarios); with
    ``spread``, a point of the boundary the pool spreads over the seeds (:data:`SEARCH_SCENARIOS`).
    ``scenario`` keys the RNG (with the cell), so each scenario is its own stream.
    """
    spec = spec or analysis.operating
    runs = spec.simulations
    if cell.head not in HEADS:
        return np.zeros(runs, dtype=bool)
    conditions = rule.conditions_for(cell.head)
    modelled = [c for c in conditions if simulated(c)]
    passes = np.ones(runs, dtype=bool)
    for condition in conditions:
        if condition not in modelled and measured is not None:
            passes &= bool(condition.passes(measured))
    if not modelled or not passes.any():
        return passes
    rng = numpy_generator(spec.seed, tag("operating"), tag(scenario), tag(cell.id))
    y = _simulated_rewards(size, levels, rng, runs, pool, spread)
    columns = _simulated_columns(cell, size, y, analysis, runs)
    names = {key for condition in modelled for key in condition.keys}
    reads = _simulated_reads(columns, size, names, analysis, runs)
    for condition in modelled:
        passes &= condition.passes(reads)
    return passes


def cell_levels(reads: Mapping[str, Any], group_std_cm: NDArray[np.float64]) -> tuple[Levels, Levels | None]:
    """(pure chaos, measured) levels of a cell from its reads, or, without replays, from its seeds' group
    stds ``group_std_cm`` (all of the spread taken as chaos; no measured levels)."""
    if reads.get("chaos_std_cm") is not None:
        chaos = float(reads["chaos_std_cm"])
        return Levels(0.0, chaos), Levels(float(reads["choice_std_cm"] or 0.0), chaos)
    return Levels(0.0, float(np.sqrt(np.mean(np.square(group_std_cm))))), None


@dataclass(frozen=True)
class CellRates:
    """One cell's simulated verdicts per scenario ([S] booleans; None: a scenario the cell cannot have)
    and the levels each was simulated at."""

    verdicts: dict[str, NDArray[np.bool_] | None]
    levels: dict[str, Levels | None]


def _worst(
    rule: DecisionRule,
    cell: Cell,
    size: CellSize,
    points: Sequence[Levels],
    analysis: AnalysisNumbers,
    scenario: str,
    spec: OperatingSpec | None,
    pool: ResidualPool | None,
    spread: str | None = None,
) -> tuple[NDArray[np.bool_] | None, Levels | None]:
    """The boundary point with the highest simulated go rate, and its verdicts."""
    best: tuple[NDArray[np.bool_] | None, Levels | None] = (None, None)
    for levels in points:
        hits = simulate_cell(rule, cell, size, levels, analysis, scenario, None, spec, pool, spread)
        if best[0] is None or hits.sum() > best[0].sum():
            best = (hits, levels)
    return best


def cell_pass_rates(
    rule: DecisionRule,
    cell: Cell,
    size: CellSize,
    reads: Mapping[str, Any],
    group_std_cm: NDArray[np.float64],
    analysis: AnalysisNumbers,
    spec: OperatingSpec | None = None,
    rewards: NDArray[np.float64] | None = None,
) -> CellRates:
    """The cell's verdicts in every scenario of :data:`SCENARIOS`: ``rewards`` [n, K, m] (the run's
    own, every reward of every replayed draw) feed the data-resampled ones and the searched boundary
    points (:data:`SEARCH_SCENARIOS`, at :func:`search_runs` runs); without replays only pure chaos is
    simulated."""
    null, measured = cell_levels(reads, group_std_cm)
    pool = ResidualPool.of(rewards) if size.replayed else None
    verdicts: dict[str, NDArray[np.bool_] | None] = dict.fromkeys(SCENARIOS)
    levels: dict[str, Levels | None] = dict.fromkeys(SCENARIOS)
    verdicts["pure_chaos"] = simulate_cell(rule, cell, size, null, analysis, "pure_chaos", None, spec)
    levels["pure_chaos"] = null
    if pool is not None:
        verdicts["pure_chaos_data"] = simulate_cell(
            rule, cell, size, Levels(0.0, float(np.sqrt(pool.chaos_var))), analysis, "pure_chaos_data",
            None, spec, pool,
        )  # fmt: skip
        levels["pure_chaos_data"] = Levels(0.0, float(np.sqrt(pool.chaos_var)))
    if measured is None:
        return CellRates(verdicts, levels)
    points = boundaries(rule, cell, measured)
    verdicts["at_bar"], levels["at_bar"] = _worst(rule, cell, size, points, analysis, "at_bar", spec, None)
    if pool is not None:
        verdicts["at_bar_data"], levels["at_bar_data"] = _worst(
            rule, cell, size, points, analysis, "at_bar_data", spec, pool
        )
        full = spec or analysis.operating
        search = dataclasses.replace(full, simulations=search_runs(full))
        for scenario, spread in SEARCH_SCENARIOS.items():
            verdicts[scenario], levels[scenario] = _worst(
                rule, cell, size, points, analysis, scenario, search, pool, spread
            )
    verdicts["measured"] = simulate_cell(rule, cell, size, measured, analysis, "measured", reads, spec)
    levels["measured"] = measured
    return CellRates(verdicts, levels)


def named_arms(
    rule: DecisionRule,
    cells: Sequence[Cell],
    verdicts: Mapping[str, NDArray[np.bool_]],
    reads: Mapping[str, Mapping[str, Any]],
) -> tuple[NDArray[np.str_], dict[str, list[str | None]]]:
    """Per simulated run, the outcome kind and the arm named for each head: the best qualifying cell
    of the head in the registered ranking (``decision_rule.arm_choice``) on this run's reads, as
    :func:`grpo_probe.analysis.rule.decision_rule.evaluate_rule` names it. The rank keys are the measured
    reads (the simulation does not resample them), so only which cells qualify varies between runs."""
    runs = len(next(iter(verdicts.values())))
    arms: dict[str, list[str | None]] = {}
    qualifying: dict[str, NDArray[np.bool_]] = {}
    for head in HEADS:
        ranked = rank_cells([c for c in cells if c.head == head], rule.rank_by, reads)
        chosen = np.full(runs, -1)
        for position, cell in reversed(list(enumerate(ranked))):
            chosen = np.where(verdicts[cell.id], position, chosen)
        arms[head] = [ranked[i].arm if i >= 0 else None for i in chosen.tolist()]
        qualifying[head] = chosen >= 0
    ar, flow = qualifying["ar"], qualifying["flow"]
    kind = np.select([ar & flow, ar, flow], ["ar_then_flow", "phase2_ar", "phase2_flow"], "park")
    return kind, arms


def searched_worst(cells: Sequence[Cell], rates: Mapping[str, CellRates]) -> str | None:
    """The searched boundary point (:data:`SEARCH_SCENARIOS`) at which the design goes most often in
    the search's runs (the first of a tie); None where none was simulated (a design without replays)."""
    routed = [c for c in cells if c.head in HEADS]
    best: tuple[str, float] | None = None
    for scenario in SEARCH_SCENARIOS:
        hits = any_cell([rates[c.id].verdicts.get(scenario) for c in routed])
        if hits is not None and (best is None or hits.mean() > best[1]):
            best = (scenario, float(hits.mean()))
    return None if best is None else best[0]


def confirm_worst(
    rule: DecisionRule,
    cells: Sequence[Cell],
    sizes: Mapping[str, CellSize],
    rates: Mapping[str, CellRates],
    rewards: Mapping[str, NDArray[np.float64] | None],
    analysis: AnalysisNumbers,
    spec: OperatingSpec | None = None,
) -> str | None:
    """The searched boundary point at which the design went most often (:func:`searched_worst`), run
    again at the full S with each cell at the levels its search chose, into each cell's ``confirmed``
    verdicts (its own RNG stream, ``<scenario>_full``); returns the point, None where none was searched."""
    spec = spec or analysis.operating
    searched = searched_worst(cells, rates)
    if searched is None:
        return None
    for cell in cells:
        found = rates[cell.id]
        pool = ResidualPool.of(rewards.get(cell.id))
        levels = found.levels.get(searched)
        if levels is None or pool is None:
            continue
        found.verdicts["confirmed"] = simulate_cell(
            rule, cell, sizes[cell.id], levels, analysis, f"{searched}_full", None, spec, pool,
            SEARCH_SCENARIOS[searched],
        )  # fmt: skip
    return searched


def design_rates(
    rule: DecisionRule,
    cells: Sequence[Cell],
    rates: Mapping[str, CellRates],
    reads: Mapping[str, Mapping[str, Any]],
    outcome: Outcome,
) -> dict[str, Rate | None]:
    """The design's rates from each cell's simulated verdicts: the false go in each null scenario and
    each searched boundary point (any cell qualifies, every cell at that null), ``searched_worst`` the
    searched point rerun at full size (each cell's ``confirmed`` verdicts), ``at_bar_worst`` the largest
    of ``at_bar``, ``at_bar_data`` and ``searched_worst`` (the rate the target bounds), the go rate at the
    measured levels, and the shares of runs at the measured levels that give this run's outcome kind
    and that name its arm(s)."""
    routed = [c for c in cells if c.head in HEADS]
    out: dict[str, Rate | None] = dict.fromkeys(
        (*NULL_SCENARIOS, *SEARCH_SCENARIOS, "searched_worst", "at_bar_worst", "go_at_measured",
         "same_kind_at_measured", "same_arm_at_measured")
    )  # fmt: skip
    if not routed:
        return out
    for scenario in (*NULL_SCENARIOS, *SEARCH_SCENARIOS, "confirmed"):
        hits = any_cell([rates[c.id].verdicts.get(scenario) for c in routed])
        key = "searched_worst" if scenario == "confirmed" else scenario
        out[key] = None if hits is None else Rate.of(hits)
    out["at_bar_worst"] = worst_rate(out)[1]
    measured = {c.id: rates[c.id].verdicts["measured"] for c in routed}
    if any(v is None for v in measured.values()):
        return out
    kind, arms = named_arms(rule, routed, measured, reads)  # type: ignore[arg-type]
    out["go_at_measured"] = Rate.of(kind != "park")
    out["same_kind_at_measured"] = Rate.of(kind == outcome.kind)
    same = (kind == outcome.kind) & np.array(
        [a == outcome.ar_arm and f == outcome.flow_arm for a, f in zip(arms["ar"], arms["flow"], strict=True)]
    )
    out["same_arm_at_measured"] = Rate.of(same)
    return out


def operating_record(
    rule: DecisionRule,
    cells: Sequence[Cell],
    reads: Mapping[str, Mapping[str, Any]],
    columns: Mapping[str, SeedColumns],
    replayed: int,
    replays: int,
    analysis: AnalysisNumbers,
    outcome: Outcome,
) -> dict[str, Any]:
    """decision.json's ``operating``: the rule's false-go rates (at pure chaos and at the bar, Gaussian
    and from the data) and power at this design's sizes, per cell and for the design, and how often
    it names this run's arm (the module docstring says what is simulated and what each rate means)."""
    spec = analysis.operating
    rates: dict[str, CellRates] = {}
    sizes: dict[str, CellSize] = {}
    for cell in cells:
        mine = columns[cell.id]
        sizes[cell.id] = size = CellSize(len(mine.std_progress_cm), replayed, mine.k, replays)
        rewards = None if mine.chaos is None else mine.chaos.rewards
        rates[cell.id] = cell_pass_rates(
            rule, cell, size, reads[cell.id], mine.std_progress_cm, analysis, rewards=rewards
        )
    searched = confirm_worst(
        rule, cells, sizes, rates,
        {c.id: None if columns[c.id].chaos is None else columns[c.id].chaos.rewards for c in cells},  # type: ignore[union-attr]
        analysis,
    )  # fmt: skip
    per_cell = []
    for cell in cells:
        found, size = rates[cell.id], sizes[cell.id]
        routed = cell.head in HEADS
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
                "levels": {
                    name: None if found.levels[name] is None else found.levels[name].to_dict()  # type: ignore[union-attr]
                    for name in SCENARIOS
                },
                "false_go": rate_dict(found.verdicts["pure_chaos"]) if routed else None,
                **{
                    name: rate_dict(found.verdicts[name]) if routed else None
                    for name in ("pure_chaos_data", "at_bar", "at_bar_data", *SEARCH_SCENARIOS)
                },
                "searched_worst": rate_dict(found.verdicts.get("confirmed")) if routed else None,
                "power": rate_dict(found.verdicts["measured"]) if routed else None,
            }
        )
    design = design_rates(rule, cells, rates, reads, outcome)
    worst_key, _ = worst_rate(design)
    worst_name = searched if worst_key == "searched_worst" else worst_key
    worst = design["at_bar_worst"] or design["pure_chaos"]
    return {
        **spec.to_dict(),
        "model": "y = b + e per draw and replay, b ~ N(0, sigma_b^2), e ~ N(0, sigma_w^2)",
        "data_model": "e resampled from the run's own within-draw residuals, per replayed seed",
        "simulated_reads": sorted(SIMULATED_READS),
        "cells": per_cell,
        "design": {
            "false_go": None if design["pure_chaos"] is None else design["pure_chaos"].to_dict(),
            **{name: None if rate is None else rate.to_dict() for name, rate in design.items()},
        },
        "false_go_target_percent": 100.0 * spec.false_go_target,
        "interval_confidence_percent": 95.0,
        "checked_at": None if worst is None else ("the bar" if design["at_bar_worst"] else "pure chaos"),
        "within_target": None if worst is None else worst.value <= spec.false_go_target,
        "search": {
            "runs": search_runs(spec),
            "points": {name: text for name, (text, _) in BOUNDARY_POINTS.items()},
            "searched_worst": searched,
        },
        "worst_point": None
        if worst_name is None
        else {
            "scenario": worst_name,
            "point": BOUNDARY_POINTS[worst_name][0],
            "why": BOUNDARY_POINTS[worst_name][1],
            "rate": design["at_bar_worst"].to_dict(),  # type: ignore[union-attr]
            "above_target": design["at_bar_worst"].value > spec.false_go_target,  # type: ignore[union-attr]
        },
    }
