"""Spearman's rho and its bootstrap interval over arms: against scipy, keyed, and honest about ties."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from grpo_probe.study.ranks import rank_correlation, spearman


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spearman_equals_scipys_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, size=9).astype(float)  # ties on purpose
    y = rng.normal(size=9)
    assert spearman(x, y) == pytest.approx(float(spearmanr(x, y).statistic), abs=1e-12)


def test_a_constant_column_has_no_rank_correlation() -> None:
    assert spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None
    result = rank_correlation("r", [1.0, 1.0, 1.0], [1.0, 2.0, 3.0], seed=1, resamples=200, confidence=0.9)
    assert result.rho is None and result.ci_low is None


def test_the_interval_is_keyed_by_the_registered_seed_and_the_read() -> None:
    x, y = [0.1, 0.5, 0.9, 1.4, 2.0, 2.2], [0.0, 0.4, 0.2, 1.1, 1.9, 1.5]
    a = rank_correlation("median_choice_std_cm", x, y, seed=7, resamples=400, confidence=0.9)
    b = rank_correlation("median_choice_std_cm", x, y, seed=7, resamples=400, confidence=0.9)
    c = rank_correlation("median_choice_std_cm", x, y, seed=8, resamples=400, confidence=0.9)
    assert a == b
    assert (a.ci_low, a.ci_high) != (c.ci_low, c.ci_high)
    assert a.rho == pytest.approx(float(spearmanr(x, y).statistic))
    assert a.ci_low is not None and a.ci_high is not None and a.ci_low <= a.rho <= a.ci_high


def test_resamples_with_a_constant_column_are_counted_not_hidden() -> None:
    # Three arms: a resample drawing one arm three times (or two distinct values in a 2-1 tie pattern that
    # leaves one column constant) has no ordering; those are counted.
    result = rank_correlation("r", [0.0, 1.0, 2.0], [0.0, 1.0, 2.0], seed=3, resamples=500, confidence=0.95)
    assert result.rho == pytest.approx(1.0)
    assert 0 < result.degenerate_resamples < 500


def test_two_arms_leave_no_ordering_to_compare() -> None:
    result = rank_correlation("r", [0.0, 1.0], [0.0, 1.0], seed=3, resamples=500, confidence=0.95)
    assert result.rho is None and result.n == 2
