"""The nested interval and the within-design test: row-wise rho, keyed draws, and what nesting buys.

The arm bootstrap treats the arms of one design as independent; when designs differ as wholes it is too
narrow, and a plain permutation of gains over all arms would call a between-design ordering significant.
These tests pin the pieces that correct that: the nested interval is wider than the arm interval when
designs shift, and the within-design permutation keeps its nominal false-positive rate even then.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.study.nested import nested_rank_correlation, within_design_permutation, within_design_rho
from grpo_probe.study.ranks import rank_correlation, spearman, spearman_rows


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_spearman_rows_equals_spearman_row_by_row_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, size=(50, 9)).astype(float)  # ties on purpose
    y = rng.integers(0, 6, size=(50, 9)).astype(float)
    x[3] = 2.0  # a constant row on each side
    y[7] = -1.0
    rows = spearman_rows(x, y)
    assert rows.dtype == np.float64 and rows.shape == (50,)
    for b in range(50):
        expected = spearman(x[b], y[b])
        if expected is None:
            assert np.isnan(rows[b]), b
        else:
            assert rows[b] == pytest.approx(expected, abs=1e-13), b
    assert np.isnan(rows[3]) and np.isnan(rows[7])
    assert np.isfinite(np.delete(rows, [3, 7])).any()


def test_spearman_rows_has_no_rho_for_a_single_column_and_wants_equal_2d_shapes() -> None:
    assert np.isnan(spearman_rows(np.ones((4, 1)), np.ones((4, 1)))).all()
    with pytest.raises(ValueError, match="2-d"):
        spearman_rows(np.ones(5), np.ones(5))
    with pytest.raises(ValueError, match="equal shape"):
        spearman_rows(np.ones((2, 5)), np.ones((2, 4)))


def _shifted(seed: int, designs: int = 4, arms: int = 6, shift: float = 3.0, slope: float = 0.0):
    """Designs whose read and gain both move with the design; within a design gain = slope * read + noise."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(designs), arms)
    level = shift * groups
    read = level + rng.normal(size=len(groups))
    gain = level + slope * (read - level) + rng.normal(size=len(groups))
    return read, gain, groups.tolist()


def test_the_nested_interval_is_keyed_by_seed_read_and_rows() -> None:
    x, y, g = _shifted(0)
    a = nested_rank_correlation("median_choice_std_cm", x, y, g, seed=7, resamples=500, confidence=0.9)
    b = nested_rank_correlation("median_choice_std_cm", x, y, g, seed=7, resamples=500, confidence=0.9)
    c = nested_rank_correlation("median_choice_std_cm", x, y, g, seed=8, resamples=500, confidence=0.9)
    d = nested_rank_correlation("chaos_fraction", x, y, g, seed=7, resamples=500, confidence=0.9)
    assert a == b
    assert (a.ci_low, a.ci_high) != (c.ci_low, c.ci_high)
    assert (a.ci_low, a.ci_high) != (d.ci_low, d.ci_high)
    assert a.inference == "nested bootstrap"
    assert a.rho == spearman(x, y)  # the point estimate is the pooled rho over all arms
    assert a.ci_low is not None and a.ci_high is not None and a.ci_low <= a.rho <= a.ci_high
    assert rank_correlation("r", x, y, seed=7, resamples=50, confidence=0.9).inference == "arm bootstrap"


def test_unequal_designs_resample_both_stages_as_a_plain_loop_would() -> None:
    # Designs of 3, 5, 4 and 6 arms give resamples of different lengths; the grouped computation must
    # give what a resample-by-resample loop over the same keyed draws gives.
    rng = np.random.default_rng(11)
    sizes = np.array([3, 5, 4, 6])
    groups = np.repeat(np.array(["a", "b", "c", "d"]), sizes).tolist()
    x, y = rng.normal(size=sizes.sum()), rng.normal(size=sizes.sum())
    resamples = 300
    result = nested_rank_correlation("r", x, y, groups, seed=5, resamples=resamples, confidence=0.8)

    draws = numpy_generator(5, tag("study"), tag("nested"), tag("r"))
    designs = draws.integers(0, 4, size=(resamples, 4))
    picks = draws.integers(0, sizes[designs][..., None], size=(resamples, 4, sizes.max()))
    starts = np.cumsum(sizes) - sizes
    rhos = []
    for b in range(resamples):
        chosen = [starts[d] + picks[b, j, k] for j, d in enumerate(designs[b]) for k in range(sizes[d])]
        rho = spearman(x[chosen], y[chosen])
        if rho is not None:
            rhos.append(rho)
    low, high = np.quantile(rhos, [0.1, 0.9])
    assert result.degenerate_resamples == resamples - len(rhos)
    assert result.ci_low == pytest.approx(low, abs=1e-12) and result.ci_high == pytest.approx(high, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_nesting_widens_the_interval_when_designs_differ_as_wholes(seed: int) -> None:
    x, y, g = _shifted(seed)
    flat = rank_correlation("r", x, y, seed=seed, resamples=1000, confidence=0.9)
    nested = nested_rank_correlation("r", x, y, g, seed=seed, resamples=1000, confidence=0.9)
    assert flat.rho == nested.rho
    assert flat.ci_low is not None and flat.ci_high is not None
    assert nested.ci_low is not None and nested.ci_high is not None
    assert nested.ci_high - nested.ci_low >= 2.0 * (flat.ci_high - flat.ci_low)


def test_resamples_that_draw_one_constant_design_are_counted() -> None:
    # The read is constant within each design: a resample that draws the same design twice has a
    # constant read column.
    x = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    y = [0.1, 0.5, 0.3, 1.2, 0.9, 1.4]
    result = nested_rank_correlation("r", x, y, [0, 0, 0, 1, 1, 1], seed=3, resamples=1000, confidence=0.9)
    assert 350 < result.degenerate_resamples < 650  # about half the resamples
    assert result.ci_low is not None


def test_too_few_arms_or_a_constant_column_leave_no_rho() -> None:
    two = nested_rank_correlation("r", [0.0, 1.0], [0.0, 1.0], [0, 1], seed=1, resamples=10, confidence=0.9)
    assert two.rho is None and two.ci_low is None and two.n == 2
    flat = nested_rank_correlation(
        "r", [1.0] * 4, [0, 1, 2, 3], [0, 0, 1, 1], seed=1, resamples=10, confidence=0.9
    )
    assert flat.rho is None and flat.degenerate_resamples == 0
    test = within_design_permutation("r", [1.0] * 4, [0, 1, 2, 3], [0, 0, 1, 1], seed=1, permutations=9)
    assert test.rho is None and test.p_value is None


def test_a_strong_within_design_ordering_is_significant() -> None:
    x, y, g = _shifted(0, designs=4, arms=5, shift=0.0, slope=3.0)
    test = within_design_permutation("r", x, y, g, seed=1, permutations=999)
    assert test.rho is not None and test.rho > 0.7
    assert test.p_value is not None and 1 / 1000 <= test.p_value < 0.05
    assert test == within_design_permutation("r", x, y, g, seed=1, permutations=999)


def test_the_within_design_test_keeps_its_level_when_designs_shift() -> None:
    # Under the null (no ordering inside designs) but with large design shifts, the pooled rho is high;
    # the stratified permutation holds the shifts fixed, so p stays uniform: at alpha 0.05 the false
    # positives over 200 null studies fall in the binomial band around 5 %.
    datasets, permutations = 200, 99
    p_values = []
    for seed in range(datasets):
        x, y, g = _shifted(seed, designs=4, arms=6, shift=2.0, slope=0.0)
        test = within_design_permutation("r", x, y, g, seed=seed, permutations=permutations)
        assert test.p_value is not None
        p_values.append(test.p_value)
    p = np.asarray(p_values)
    low, high = binom.ppf([0.001, 0.999], datasets, 0.05)
    assert low <= np.count_nonzero(p <= 0.05) <= high
    # roughly uniform beyond the tail: about half below 0.5
    low, high = binom.ppf([0.001, 0.999], datasets, 0.5)
    assert low <= np.count_nonzero(p <= 0.5) <= high
    # and the pooled rho those studies show is large: a test over all arms would have rejected
    assert np.median([spearman(*_shifted(s, shift=2.0)[:2]) for s in range(20)]) > 0.6


def test_within_design_rho_is_the_arm_weighted_mean_of_the_designs_own_rhos() -> None:
    x = [1, 2, 3, 4, 1, 2, 3, 5, 6, 1, 2, 3]  # designs of 4, 3, 2 and 3 arms
    y = [1, 2, 3, 4, 3, 2, 1, 9, 0, 7, 7, 7]
    groups = ["a"] * 4 + ["b"] * 3 + ["two arms"] * 2 + ["constant gain"] * 3
    assert within_design_rho(x, y, groups) == pytest.approx((4 * 1.0 + 3 * -1.0) / 7)
    assert within_design_rho([1, 2, 3, 4], [4, 3, 2, 1], [0, 0, 1, 1]) is None


def test_bad_inputs_name_what_is_wrong() -> None:
    x, y, g = _shifted(0)
    with pytest.raises(ValueError, match="groups"):
        nested_rank_correlation("r", x, y, g[:-1], seed=1, resamples=10, confidence=0.9)
    with pytest.raises(ValueError, match="confidence"):
        nested_rank_correlation("r", x, y, g, seed=1, resamples=10, confidence=1.0)
    with pytest.raises(ValueError, match="resamples"):
        nested_rank_correlation("r", x, y, g, seed=1, resamples=0, confidence=0.9)
    with pytest.raises(ValueError, match="permutations"):
        within_design_permutation("r", x, y, g, seed=1, permutations=0)
    with pytest.raises(ValueError, match="finite"):
        within_design_permutation("r", [np.nan, *x[1:]], y, g, seed=1, permutations=9)
