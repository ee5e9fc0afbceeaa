"""The decomposition of every reward of every draw: the ANOVA estimator against hand sums and known truth.

Why: the rule decides on the choice std and the chaos share, so their formulas are checked on a table
small enough to sum by hand, then on simulated tables whose sigma_b and sigma_w are known, including
sigma_b = 0 (pure chaos), where the first estimate (the median over seeds of sqrt(max(0, V_a - V_w)))
reads a choice spread that is not there and the ANOVA estimator does not.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from grpo_probe.analysis.cells.chaos import ChaosColumns, chaos_statistics, seed_chaos
from grpo_probe.analysis.cells.variance_components import pooled_components, seed_sums


def test_one_seed_by_hand() -> None:
    """K = 3 draws, each with 2 replays (m = 3): draw means 2, 5, 8, grand mean 5."""
    draws = np.array([1.0, 5.0, 9.0])
    replays = np.array([[2.0, 3.0], [4.0, 6.0], [8.0, 7.0]])
    sums = seed_sums(draws, replays)
    assert sums.ss_between == pytest.approx(3 * (9 + 0 + 9), rel=1e-15)  # m * sum (mean_j - mean)^2
    assert sums.ss_within == pytest.approx((1 + 0 + 1) + (1 + 1 + 0) + (1 + 0 + 1), rel=1e-15)
    assert (sums.df_between, sums.df_within, sums.per_draw) == (2, 6, 3)
    table = np.array([[sums.ss_between, sums.ss_within, 2.0, 6.0]])
    reads = pooled_components(table, 3, np.arange(1))
    ms_b, ms_w = 54 / 2, 6 / 6
    assert reads["chaos_std_cm"] == pytest.approx(math.sqrt(ms_w), rel=1e-15)
    assert reads["choice_std_cm"] == pytest.approx(math.sqrt((ms_b - ms_w) / 3), rel=1e-15)
    sigma_b2 = (ms_b - ms_w) / 3
    assert reads["chaos_share"] == pytest.approx(ms_w / (ms_w + sigma_b2), rel=1e-15)


def test_seeds_pool_their_sums_not_their_square_roots() -> None:
    """Two seeds: MS_b and MS_w are ratios of summed sums of squares to summed degrees of freedom."""
    one = seed_sums(np.array([0.0, 2.0]), np.array([[0.0], [2.0]]))  # no chaos, choice only
    two = seed_sums(np.array([1.0, 1.0]), np.array([[3.0], [-1.0]]))  # chaos only
    columns = ChaosColumns(
        group_var=np.zeros(2), replay_var=np.zeros(2), spearman=np.empty((2, 0)),
        divergence_ticks=np.empty((2, 0)), contact_ticks=np.empty((2, 0)),
        sums=np.array([[one.ss_between, one.ss_within, 1, 2], [two.ss_between, two.ss_within, 1, 2]]),
        per_draw=2,
    )  # fmt: skip
    reads = chaos_statistics(columns, np.arange(2), ("choice_std_cm", "chaos_std_cm"))
    ms_b = (one.ss_between + two.ss_between) / 2
    ms_w = (one.ss_within + two.ss_within) / 4
    assert reads["chaos_std_cm"] == pytest.approx(math.sqrt(ms_w), rel=1e-15)
    assert reads["choice_std_cm"] == pytest.approx(math.sqrt((ms_b - ms_w) / 2), rel=1e-15)


def _simulated(
    rng: np.random.Generator, sigma_b: float, sigma_w: float, n: int, k: int, r: int
) -> ChaosColumns:
    """n seeds (each with its own mean) of K draws with R replays each, as the columns the reads take."""
    b = rng.standard_normal((n, k, 1)) * sigma_b
    y = b + rng.standard_normal((n, k, r + 1)) * sigma_w + rng.standard_normal((n, 1, 1)) * 10.0
    sums = [seed_sums(y[s, :, 0], y[s, :, 1:]) for s in range(n)]
    return ChaosColumns(
        group_var=np.var(y[..., 0], axis=1, ddof=1),
        replay_var=np.var(y[..., 1:], axis=2, ddof=1).mean(axis=1),
        spearman=np.empty((n, 0)),
        divergence_ticks=np.empty((n, 0)),
        contact_ticks=np.empty((n, 0)),
        sums=np.array([[x.ss_between, x.ss_within, x.df_between, x.df_within] for x in sums]),
        per_draw=r + 1,
    )


@pytest.mark.parametrize(("sigma_b", "sigma_w"), [(2.0, 3.0), (0.0, 4.3), (5.0, 0.5)])
def test_the_estimator_is_unbiased_for_known_components(sigma_b: float, sigma_w: float) -> None:
    """Over many seeds (each with its own mean), the pooled sigma_b^2 and sigma_w^2 land on the truth:
    within 3 standard errors of the ANOVA estimator's sampling variance."""
    n, k, r = 4000, 8, 2
    columns = _simulated(np.random.default_rng(11), sigma_b, sigma_w, n, k, r)
    sums = columns.sums
    assert sums is not None
    ms_b = sums[:, 0].sum() / sums[:, 2].sum()
    ms_w = sums[:, 1].sum() / sums[:, 3].sum()
    m = r + 1
    # Var(MS) = 2 E[MS]^2 / df for a scaled chi-square
    se_w = math.sqrt(2 / (n * k * r)) * sigma_w**2
    se_b = math.sqrt(2 * (sigma_w**2 + m * sigma_b**2) ** 2 / (n * (k - 1)) + (se_w**2)) / m
    assert abs(ms_w - sigma_w**2) < 3 * se_w
    assert abs((ms_b - ms_w) / m - sigma_b**2) < 3 * se_b
    reads = chaos_statistics(columns, np.arange(n), ("choice_std_cm", "chaos_share"))
    if sigma_b == 0.0:
        assert reads["choice_std_cm"] < 0.1 * sigma_w
        assert reads["chaos_share"] > 0.95


def test_under_pure_chaos_the_first_estimate_reads_a_choice_spread_the_new_one_does_not() -> None:
    """The default's sizes (6 replayed seeds, K = 8, 2 replays), sigma_b = 0, sigma_w = 4.3 cm: the median
    over seeds of sqrt(max(0, V_a - V_w)) averages about a centimetre (clearing a 0.25 cm bar most of the
    time); the ANOVA choice std's average is far smaller and its sigma_b^2 centres on zero."""
    rng = np.random.default_rng(5)
    old, new, raw = [], [], []
    for _ in range(400):
        columns = _simulated(rng, 0.0, 4.3, 6, 8, 2)
        reads = chaos_statistics(columns, np.arange(6), ("median_choice_std_cm", "choice_std_cm"))
        old.append(float(reads["median_choice_std_cm"]))
        new.append(float(reads["choice_std_cm"]))
        sums = columns.sums
        assert sums is not None
        raw.append((sums[:, 0].sum() / sums[:, 2].sum() - sums[:, 1].sum() / sums[:, 3].sum()) / 3)
    assert np.mean(old) > 0.6 and np.mean(np.array(old) >= 0.25) > 0.5
    assert np.mean(new) < 0.6 * np.mean(old)
    assert abs(np.mean(raw)) < 3 * np.std(raw) / math.sqrt(len(raw))  # unbiased around zero


def test_any_index_shape_reads_the_same_numbers() -> None:
    """[n] (one sample), [B, n] (bootstrap) and [B, B', n] (nested) give the same value for the same seeds."""
    rng = np.random.default_rng(3)
    y = rng.standard_normal((5, 4, 4))
    columns = ChaosColumns.of([seed_chaos(y[s, :, 0], y[s, :, 1:], s, ddof=1) for s in range(5)])
    full = chaos_statistics(columns, np.arange(5))
    stacked = chaos_statistics(columns, np.tile(np.arange(5), (2, 3, 1)))
    for name, value in full.items():
        assert np.array_equal(stacked[name], np.full((2, 3), value), equal_nan=True), name
