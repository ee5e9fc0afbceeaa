"""The rule's error rates: interval clauses, bars relative to the chaos floor, and the simulated rates
checked against a scene whose reward is pure luck.

Why: decision.md states how often its go would be wrong. That statement is only worth printing if the
interval clauses decide what the point clauses would not, if the simulation that prices them computes the
registered rule, and if a real pure-chaos scene (the luck plane, whose reward is a hash of the executed
bytes) says go no more often than the simulation claims.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from grpo_probe.analysis.cells.bootstrap import bootstrap_generator
from grpo_probe.analysis.cells.chaos import ChaosColumns, chaos_estimate, seed_chaos
from grpo_probe.analysis.cells.seed_columns import SeedColumns
from grpo_probe.analysis.error_rates.operating import (
    CellSize,
    Levels,
    Rate,
    ResidualPool,
    boundaries,
    cell_pass_rates,
    confirm_worst,
    design_rates,
    simulate_cell,
    wilson_interval,
    worst_rate,
)
from grpo_probe.analysis.rule.decision_rule import Outcome, evaluate_rule
from grpo_probe.analysis.rule.stability import resampled_bounds
from grpo_probe.envs.planes import make_luck_plane
from grpo_probe.prereg import AnalysisNumbers, load_prereg
from grpo_probe.prereg.rule import DecisionRule, OperatingSpec, parse_analysis_sections

REPO = Path(__file__).resolve().parents[2]
SMOKE = load_prereg(REPO / "prereg" / "smoke.yaml", require_lock=False)
SMOKE_RAW: dict[str, Any] = yaml.safe_load((REPO / "prereg" / "smoke.yaml").read_text())
FLOW = next(c for c in SMOKE.enabled_cells if c.head == "flow")


def _rule(*signal: dict[str, Any]) -> DecisionRule:
    """A rule whose flow cells qualify on ``signal`` alone (the smoke design's analysis numbers)."""
    raw = {
        "criteria": {"signal": {"description": "d", "all_of": list(signal)}},
        "qualifies": {"ar": ["signal"], "flow": ["signal"]},
        "arm_choice": {"rank_by": []},
    }
    analysis = {**SMOKE_RAW["analysis"]}
    parse_analysis_sections({"analysis": analysis, "decision_rule": raw}, "test.yaml")
    return DecisionRule.from_dict(raw, analysis, "test.yaml")


BAR = {"analysis": "signal_bar_cm"}
INTERVAL = _rule(
    {"read": "choice_std_cm.lower", "op": ">=", "threshold": BAR},
    {"read": "chaos_share.upper", "op": "<=", "threshold": 0.5},
)
POINT = _rule(
    {"read": "choice_std_cm", "op": ">=", "threshold": BAR},
    {"read": "chaos_share", "op": "<=", "threshold": 0.5},
)


def _reads(share: float, upper: float) -> dict[str, float]:
    return {
        "choice_std_cm": 3.0, "choice_std_cm_ci_low": 1.0, "choice_std_cm_ci_high": 4.0,
        "chaos_std_cm": 2.0, "chaos_std_cm_ci_low": 1.5, "chaos_std_cm_ci_high": 2.5,
        "chaos_share": share, "chaos_share_ci_low": 0.2, "chaos_share_ci_high": upper,
    }  # fmt: skip


# -- the grammar ---------------------------------------------------------------------------------------
def test_an_interval_clause_turns_away_a_cell_the_point_clause_passes() -> None:
    """A chaos share of 0.45 whose interval reaches 0.7: the point rule goes, the interval rule parks."""
    reads = {FLOW.id: _reads(0.45, 0.7)}
    assert evaluate_rule(POINT, [FLOW], reads)[1].kind == "phase2_flow"
    verdicts, outcome = evaluate_rule(INTERVAL, [FLOW], reads)
    assert outcome.kind == "park"
    text = verdicts[0].criteria[0][2][1].text()
    assert text == "chaos share 0.45 [0.2, 0.7]: its upper end 0.7 is above the registered maximum 0.5: fails"
    assert evaluate_rule(INTERVAL, [FLOW], {FLOW.id: _reads(0.45, 0.49)})[1].kind == "phase2_flow"


def test_the_earlier_spelling_of_a_bound_reads_the_same_value() -> None:
    old = _rule({"read": "chaos_share_ci_high", "op": "<=", "threshold": 0.5})
    new = _rule({"read": "chaos_share.upper", "op": "<=", "threshold": 0.5})
    for upper in (0.49, 0.51):
        reads = {FLOW.id: _reads(0.3, upper)}
        assert evaluate_rule(old, [FLOW], reads)[1].kind == evaluate_rule(new, [FLOW], reads)[1].kind


def test_a_bar_relative_to_the_chaos_floor_is_resolved_per_cell() -> None:
    """choice_std_cm.lower >= 0.5 x chaos_std_cm: 1 cm against 0.5 x 2 cm passes, against 0.5 x 2.2 fails."""
    rule = _rule(
        {"read": "choice_std_cm.lower", "op": ">=", "threshold": {"read": "chaos_std_cm", "scale": 0.5}}
    )
    reads = _reads(0.3, 0.4)
    verdicts, outcome = evaluate_rule(rule, [FLOW], {FLOW.id: reads})
    assert outcome.kind == "phase2_flow"
    assert "0.5 x the chaos std (1 cm)" in verdicts[0].criteria[0][2][0].text()
    assert evaluate_rule(rule, [FLOW], {FLOW.id: {**reads, "chaos_std_cm": 2.2}})[1].kind == "park"


@pytest.mark.parametrize(
    ("condition", "field"),
    [
        ({"read": "chaos_share.middle", "op": "<=", "threshold": 0.5}, "read"),
        ({"read": "nondegenerate_fraction.upper", "op": "<=", "threshold": 0.5}, "read"),
        ({"read": "chaos_share", "op": "<=", "threshold": {"read": "no_such_read"}}, "threshold"),
    ],
)
def test_a_bound_the_reads_do_not_have_is_refused_naming_the_field(condition: dict, field: str) -> None:
    raw = {
        "criteria": {"signal": {"description": "d", "all_of": [condition]}},
        "qualifies": {"ar": [], "flow": ["signal"]},
        "arm_choice": {"rank_by": []},
    }
    with pytest.raises(ValueError, match=rf"test.yaml.*decision_rule.*{field}"):
        parse_analysis_sections({"analysis": SMOKE_RAW["analysis"], "decision_rule": raw}, "test.yaml")


# -- the simulation ------------------------------------------------------------------------------------
def _analysis(resamples: int = 200) -> AnalysisNumbers:
    return dataclasses.replace(
        SMOKE.analysis, bootstrap=dataclasses.replace(SMOKE.analysis.bootstrap, resamples=resamples)
    )


def test_wilson_intervals_match_the_formula_at_the_edges() -> None:
    low, high = wilson_interval(0, 1000)
    assert low == 0.0 and high == pytest.approx(0.003826, abs=1e-6)
    low, high = wilson_interval(50, 1000)
    assert (low, high) == pytest.approx((0.03813, 0.06531), abs=1e-5)


def test_the_first_choice_clause_lets_pure_chaos_through_and_the_interval_rule_does_not() -> None:
    """The default's earlier sizes (15 seeds, 6 replayed, K = 8, 2 replays) at sigma_w = 4.3 cm, no choice
    signal: the median-of-clipped-differences clause alone clears the 0.25 cm bar in most runs; the
    registered interval rule at the new sizes (every seed replayed, R = 4) almost never says go."""
    spec = OperatingSpec(simulations=300, seed=5)
    chaos = Levels(0.0, 4.3)
    first = _rule({"read": "median_choice_std_cm", "op": ">=", "threshold": BAR})
    old_size = CellSize(15, 6, 8, 2)
    assert simulate_cell(first, FLOW, old_size, chaos, _analysis(), "pure_chaos", None, spec).mean() > 0.5
    new_size = CellSize(15, 15, 8, 4)
    assert (
        simulate_cell(INTERVAL, FLOW, new_size, chaos, _analysis(), "pure_chaos", None, spec).mean() <= 0.02
    )


def test_the_interval_rule_has_power_where_the_choice_dominates() -> None:
    spec = OperatingSpec(simulations=200, seed=6)
    size = CellSize(15, 15, 8, 4)
    strong = simulate_cell(INTERVAL, FLOW, size, Levels(8.0, 4.0), _analysis(), "measured", {}, spec)
    weak = simulate_cell(INTERVAL, FLOW, size, Levels(3.0, 4.0), _analysis(), "measured", {}, spec)
    assert strong.mean() > 0.9 and weak.mean() < 0.1


def test_a_simulation_is_a_pure_function_of_its_registered_seed() -> None:
    size, levels = CellSize(4, 4, 4, 2), Levels(1.0, 2.0)
    runs = [
        simulate_cell(POINT, FLOW, size, levels, _analysis(), "measured", {}, OperatingSpec(100, seed))
        for seed in (1, 1, 2)
    ]
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])


def test_an_unmodelled_condition_keeps_its_measured_verdict() -> None:
    rule = _rule(
        {"read": "chaos_share", "op": "<=", "threshold": 0.5},
        {"read": "sampled_engagement_rate", "op": ">=", "threshold": 0.5},
    )
    size, levels, spec = CellSize(4, 4, 4, 2), Levels(10.0, 1.0), OperatingSpec(50, 1)
    assert simulate_cell(
        rule, FLOW, size, levels, _analysis(), "measured", {"sampled_engagement_rate": 0.9}, spec
    ).all()
    assert not simulate_cell(
        rule, FLOW, size, levels, _analysis(), "measured", {"sampled_engagement_rate": 0.1}, spec
    ).any()
    assert simulate_cell(
        rule, FLOW, size, levels, _analysis(), "pure_chaos", None, spec
    ).any()  # taken as passed


# -- against a scene of pure chaos ---------------------------------------------------------------------
LUCK_SIZE = CellSize(3, 3, 4, 2)
LUCK_RUNS = 300


def _luck_columns() -> list[ChaosColumns]:
    """LUCK_RUNS probe runs of the luck plane at LUCK_SIZE: each draw executes its own random chunks, each
    replay the same chunks nudged by keyed noise of std 1e-3 (the replay section's action perturbation)."""
    env = make_luck_plane(key="seed_and_actions", replans=2, chunk_length=4, executed_actions=4)
    rng = np.random.default_rng(20261205)
    runs = []
    for run in range(LUCK_RUNS):
        seeds = []
        for s in range(LUCK_SIZE.seeds):
            seed = 10_000 + run * LUCK_SIZE.seeds + s
            rewards = np.empty((LUCK_SIZE.k, LUCK_SIZE.replays + 1))
            for j in range(LUCK_SIZE.k):
                chunks = rng.uniform(-1, 1, (2, 4, 2))
                for r in range(LUCK_SIZE.replays + 1):
                    nudge = 0.0 if r == 0 else rng.normal(0.0, 1e-3, chunks.shape)
                    env.reset(seed)
                    for chunk in chunks + nudge:
                        env.execute(chunk.astype(np.float32), 4)
                    rewards[j, r] = env.record().progress_final_cm
            seeds.append(seed_chaos(rewards[:, 0], rewards[:, 1:], seed, ddof=1))
        runs.append(ChaosColumns.of(seeds))
    return runs


@pytest.fixture(scope="module")
def luck_runs() -> list[ChaosColumns]:
    return _luck_columns()


def _luck_go(rule: DecisionRule, columns: ChaosColumns, analysis: AnalysisNumbers) -> bool:
    reads: dict[str, float] = {}
    for read in ("choice_std_cm", "chaos_std_cm", "chaos_share"):
        est = chaos_estimate(columns, read, analysis, FLOW.id)
        reads.update({read: est.value, f"{read}_ci_low": est.ci_low, f"{read}_ci_high": est.ci_high})
    return evaluate_rule(rule, [FLOW], {FLOW.id: reads})[1].kind != "park"


def _luck_chaos_std(runs: list[ChaosColumns]) -> float:
    sums = np.concatenate([c.sums for c in runs if c.sums is not None])
    return float(np.sqrt(sums[:, 1].sum() / sums[:, 3].sum()))


def test_on_keyed_luck_a_permissive_rule_says_go_as_often_as_the_simulation_claims(luck_runs) -> None:
    """A point rule at a lax bar (chaos share <= 0.8) at 3 seeds x K = 4 x R = 2 says go in a good share of
    pure-chaos runs; the luck plane's go rate agrees with the simulated one within sampling error (the
    simulation's Gaussian chaos stands in for the plane's bounded luck)."""
    lax = _rule({"read": "chaos_share", "op": "<=", "threshold": 0.8})
    analysis = _analysis()
    sigma_w = _luck_chaos_std(luck_runs)
    simulated = simulate_cell(
        lax, FLOW, LUCK_SIZE, Levels(0.0, sigma_w), analysis, "pure_chaos", None, OperatingSpec(4000, 3)
    )
    observed = np.array([_luck_go(lax, c, analysis) for c in luck_runs])
    p = simulated.mean()
    assert 0.05 < p < 0.5
    se = np.sqrt(p * (1 - p) / observed.size + p * (1 - p) / simulated.size)
    assert abs(observed.mean() - p) < 4 * se, (observed.mean(), p)


def test_on_keyed_luck_the_registered_rule_says_go_no_more_than_its_stated_rate(luck_runs) -> None:
    """The luck design's registered rule (interval clauses) at the same sizes: its go count over the luck
    runs stays within what the simulated false-go rate allows (binomial, 3 standard errors above)."""
    luck = load_prereg(REPO / "prereg/designs/controls/luck_plane_smoke.yaml")
    analysis = _analysis()
    sigma_w = _luck_chaos_std(luck_runs)
    stated = Rate.of(
        simulate_cell(
            luck.decision_rule,
            FLOW,
            LUCK_SIZE,
            Levels(0.0, sigma_w),
            analysis,
            "pure_chaos",
            None,
            OperatingSpec(2000, 4),
        )
    )
    observed = np.array([_luck_go(luck.decision_rule, c, analysis) for c in luck_runs])
    allowed = stated.high + 3 * np.sqrt(stated.high * (1 - stated.high) / observed.size) + 1 / observed.size
    assert observed.mean() <= allowed, (observed.mean(), stated)


# -- the nested bootstrap ------------------------------------------------------------------------------
def test_an_identity_resample_rebuilds_the_registered_interval_bit_for_bit() -> None:
    """Inside a resample that repeats every seed once, the nested bootstrap draws the registered interval's
    own keyed positions: the bounds are the same floats."""
    rng = np.random.default_rng(9)
    y = rng.standard_normal((6, 4, 3)) + rng.standard_normal((6, 4, 1))
    seeds = [seed_chaos(y[s, :, 0], y[s, :, 1:], 1000 + s, ddof=1) for s in range(6)]
    chaos = ChaosColumns.of(seeds)
    nan = np.full(6, np.nan)
    columns = SeedColumns(FLOW, 4, np.ones(6), nan, nan, nan, nan, nan, {}, {}, None, chaos)
    boot = _analysis().bootstrap
    outer = np.vstack([np.arange(6), bootstrap_generator(1, "x", "y").integers(0, 6, 6)])
    for read in ("choice_std_cm", "chaos_share"):
        low, high = resampled_bounds(columns, read, outer, boot)
        registered = chaos_estimate(chaos, read, _analysis(), FLOW.id)
        assert (low[0], high[0]) == (registered.ci_low, registered.ci_high)
        assert (low[1], high[1]) != (registered.ci_low, registered.ci_high)


# -- at the bar: the null's least favourable point ----------------------------------------------------
def _at_the_bar(columns: ChaosColumns, run: int, share: float) -> ChaosColumns:
    """The run's luck-plane rewards with a keyed choice per draw added to every reward of the draw, its
    variance (1 - share) / share times the plane's chaos variance: a chaos share of ``share``."""
    assert columns.rewards is not None
    rng = np.random.default_rng([20261206, run])
    sigma = np.sqrt(columns.sums[:, 1].sum() / columns.sums[:, 3].sum())  # type: ignore[index]
    choice = sigma * np.sqrt((1.0 - share) / share)
    y = columns.rewards + rng.standard_normal((*columns.rewards.shape[:2], 1)) * choice
    seeds = [seed_chaos(y[s, :, 0], y[s, :, 1:], s, ddof=1) for s in range(y.shape[0])]
    return ChaosColumns.of(seeds)


def test_at_the_bar_the_interval_rule_goes_more_often_than_under_pure_chaos() -> None:
    """Pure chaos is the easiest null: at the same sizes, the registered interval rule says go far more
    often with the chaos share at its bar than with no choice at all, in both the normal and a
    data-resampled model."""
    size = CellSize(15, 15, 8, 4)
    spec = OperatingSpec(400, 5)
    analysis = _analysis()
    pure = simulate_cell(INTERVAL, FLOW, size, Levels(0.0, 4.0), analysis, "pure_chaos", None, spec)
    choice_bar, bar = boundaries(INTERVAL, FLOW, Levels(3.0, 4.0))
    assert choice_bar == Levels(SMOKE.analysis.signal_bar_cm, 4.0)  # the choice std at its bar
    assert bar.choice_std_cm == pytest.approx(bar.chaos_std_cm)  # share 0.5 with the measured total
    assert bar.choice_std_cm**2 + bar.chaos_std_cm**2 == pytest.approx(25.0)
    at_bar = simulate_cell(INTERVAL, FLOW, size, bar, analysis, "at_bar", None, spec)
    assert pure.mean() == 0.0 and at_bar.mean() > 0.01


def test_at_the_bar_the_luck_plane_says_go_as_often_as_the_data_resampled_simulation(luck_runs) -> None:
    """The luck plane's real chaos, put at a lax bar (chaos share 0.8, so that 3 seeds can pass it) by a
    keyed choice: the interval rule's go rate over those runs agrees with the simulated rate at the bar
    whose chaos is resampled from the same runs' residuals (within 4 standard errors)."""
    analysis = _analysis()
    rule = _rule({"read": "chaos_share.upper", "op": "<=", "threshold": 0.8})
    at_bar = [_at_the_bar(c, i, 0.8) for i, c in enumerate(luck_runs)]
    observed = np.array([_luck_go(rule, c, analysis) for c in at_bar])
    rewards = np.concatenate([c.rewards for c in luck_runs])  # type: ignore[misc]
    pool = ResidualPool.of(rewards)
    assert pool is not None
    sigma_w = float(np.sqrt(pool.chaos_var))
    (bar,) = boundaries(rule, FLOW, Levels(sigma_w, sigma_w))
    simulated = simulate_cell(
        rule, FLOW, LUCK_SIZE, bar, analysis, "at_bar_data", None, OperatingSpec(3000, 6), pool
    )
    p = simulated.mean()
    se = np.sqrt(p * (1 - p) / observed.size + p * (1 - p) / simulated.size)
    assert abs(observed.mean() - p) < 4 * se, (observed.mean(), p)


def test_the_residual_pool_keeps_the_chaos_level_and_its_tails() -> None:
    """Residuals rescaled by sqrt(m / (m - 1)) carry sigma_w^2 on average; resampled at the bar, the
    simulated rewards have the requested total variance, and heavy-tailed chaos stays heavy-tailed."""
    rng = np.random.default_rng(11)
    chaos = rng.standard_t(3, (40, 8, 5)) * 2.0
    pool = ResidualPool.of(chaos)
    assert pool is not None
    assert pool.chaos_var == pytest.approx(np.var(chaos) * 1.0, rel=0.25)
    y = pool.draw(Levels(1.0, 1.0), np.random.default_rng(2), 200, 15, 8, 5)
    within = y - y.mean(axis=-1, keepdims=True)
    assert np.var(within) * 5 / 4 == pytest.approx(1.0, rel=0.2)
    kurtosis = np.mean(within**4) / np.mean(within**2) ** 2
    normal = np.random.default_rng(3).standard_normal(y.shape)
    normal -= normal.mean(axis=-1, keepdims=True)
    assert kurtosis > 1.5 * np.mean(normal**4) / np.mean(normal**2) ** 2
    assert ResidualPool.of(None) is None
    assert ResidualPool.of(np.full((3, 4, 5), np.nan)) is None


# -- the null's boundary, searched ---------------------------------------------------------------------


def _search_design(seed_stds: np.ndarray) -> tuple[dict[str, Any], str | None]:
    """The operating search on one flow cell of 15 seeds x K = 8 x R = 4 whose replayed seeds' chaos stds
    are ``seed_stds`` (normal residuals), the registered interval rule at the smoke design's numbers:
    the design's rates and the searched point confirmed at full size."""
    rng = np.random.default_rng(31)
    rewards = rng.standard_normal((15, 8, 5)) * seed_stds[:, None, None]
    size = CellSize(15, 15, 8, 4)
    analysis = dataclasses.replace(_analysis(), operating=OperatingSpec(800, 9))
    reads = {"choice_std_cm": 4.0, "chaos_std_cm": float(np.sqrt(np.mean(seed_stds**2)))}
    rates = {
        FLOW.id: cell_pass_rates(INTERVAL, FLOW, size, reads, np.full(15, 5.0), analysis, rewards=rewards)
    }
    searched = confirm_worst(INTERVAL, [FLOW], {FLOW.id: size}, rates, {FLOW.id: rewards}, analysis)
    outcome = Outcome("park", "", None, None, (), (), ())
    return design_rates(INTERVAL, [FLOW], rates, {FLOW.id: reads}, outcome), searched


def test_the_search_finds_the_seed_heterogeneous_boundary_point_and_checks_the_target_there() -> None:
    """With the chaos differing tenfold between seeds, the pooled share at the bar with an equal choice
    spread in every seed is a point of the null where the percentile interval over seeds is too narrow:
    the search picks a point that spreads the chaos over the seeds, its full-size rate is well above the
    share-at-the-bar-in-every-seed point's, and the worst (what the target is checked at) is it."""
    stds = np.geomspace(0.5, 8.0, 15)
    design, searched = _search_design(stds)
    assert searched in ("at_bar_seeds", "at_bar_seeds_data")
    key, worst = worst_rate(design)
    assert key == "searched_worst" and worst is design["at_bar_worst"]
    bar = max(design["at_bar"].value, design["at_bar_data"].value)  # type: ignore[union-attr]
    assert worst is not None and worst.runs == 800
    assert worst.low > bar, (worst, design["at_bar"], design["at_bar_data"])


def test_with_seeds_alike_the_searched_points_go_no_more_than_the_share_in_every_seed() -> None:
    """The control: with every seed's chaos alike the searched points are the same null as the share at
    the bar in every seed, and their full-size rate is within sampling error of it."""
    design, searched = _search_design(np.full(15, 3.0))
    assert searched is not None
    confirmed, at_bar = design["searched_worst"], design["at_bar"]
    assert confirmed is not None and at_bar is not None
    se = np.sqrt(at_bar.value * (1 - at_bar.value) / at_bar.runs * 2) + 1e-3
    assert abs(confirmed.value - at_bar.value) < 4 * se, (confirmed, at_bar)
