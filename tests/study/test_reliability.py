"""The gain's reliability and the probe's go / no-go table: hand-computed cases and the cases without one."""

from __future__ import annotations

import math

import pytest

from grpo_probe.analysis.error_rates.operating import wilson_interval
from grpo_probe.study.classify import classification
from grpo_probe.study.reliability import gain_reliability


def test_reliability_on_a_hand_computed_case() -> None:
    # gains 1, 2, 3, 4: variance (ddof 1) = 5/3; squared errors 0.25, 0.25, 1, 1: mean 0.625
    result = gain_reliability([1.0, 2.0, 3.0, 4.0], [0.5, 0.5, 1.0, 1.0])
    assert result.n == 4
    assert result.observed_var == pytest.approx(5.0 / 3.0)
    assert result.mean_error_var == pytest.approx(0.625)
    assert result.reliability == pytest.approx(1.0 - 0.625 / (5.0 / 3.0))  # 0.625


def test_errors_larger_than_the_spread_give_zero_not_a_negative_reliability() -> None:
    result = gain_reliability([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    assert result.observed_var == pytest.approx(1.0) and result.mean_error_var == pytest.approx(4.0)
    assert result.reliability == 0.0
    assert gain_reliability([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]).reliability == 1.0


def test_no_reliability_without_spread_or_without_two_arms() -> None:
    constant = gain_reliability([2.0, 2.0, 2.0], [0.1, 0.2, 0.3])
    assert constant.observed_var == 0.0 and constant.reliability is None
    one = gain_reliability([2.0], [0.5])
    assert one.observed_var is None and one.mean_error_var == pytest.approx(0.25) and one.reliability is None
    none = gain_reliability([], [])
    assert none.n == 0 and none.mean_error_var is None and none.reliability is None


def test_reliability_rejects_bad_errors() -> None:
    with pytest.raises(ValueError, match="standard_errors"):
        gain_reliability([1.0, 2.0], [0.1, -0.1])
    with pytest.raises(ValueError, match="one standard error per gain"):
        gain_reliability([1.0, 2.0], [0.1])


def test_classification_counts_and_shares_on_a_hand_case() -> None:
    calls = [True, True, True, True, False, False, False]
    gained = [True, True, True, False, True, False, False]
    result = classification(calls, gained, confidence=0.9)
    assert (result.go_gained, result.go_not, result.no_gained, result.no_not) == (3, 1, 1, 2)
    assert result.go_gained_share == pytest.approx(3 / 4)
    assert (result.go_gained_ci_low, result.go_gained_ci_high) == wilson_interval(3, 4, 0.9)
    assert result.no_not_share == pytest.approx(2 / 3)
    assert (result.no_not_ci_low, result.no_not_ci_high) == wilson_interval(2, 3, 0.9)
    assert result.accuracy == pytest.approx(5 / 7)
    assert (result.accuracy_ci_low, result.accuracy_ci_high) == wilson_interval(5, 7, 0.9)
    assert result.go_gained_ci_low is not None and result.go_gained_ci_low < 0.75 < result.go_gained_ci_high


def test_a_share_with_no_calls_of_its_kind_is_none() -> None:
    all_go = classification([True, True], [True, False], confidence=0.95)
    assert all_go.no_not_share is None and all_go.no_not_ci_low is None and all_go.no_not_ci_high is None
    assert all_go.go_gained_share == 0.5
    all_no = classification([False, False, False], [False, False, True], confidence=0.95)
    assert all_no.go_gained_share is None and all_no.go_gained_ci_low is None
    assert all_no.no_not_share == pytest.approx(2 / 3)
    empty = classification([], [], confidence=0.95)
    assert empty.accuracy is None and empty.go_gained_share is None and empty.no_not_share is None


def test_classification_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="calls"):
        classification([1, 0], [True, False], confidence=0.9)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="gained"):
        classification([True, False], [True, "no"], confidence=0.9)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="one entry per arm"):
        classification([True], [True, False], confidence=0.9)
    with pytest.raises(ValueError, match="confidence"):
        classification([True], [True], confidence=0.0)


def test_fishers_exact_test_is_one_sided_and_undefined_on_an_empty_margin() -> None:
    """0 of 14 go arms gained against 3 of 14 no arms: no evidence that go predicts a gain (p = 1); the
    mirror table is the hypergeometric tail P(X >= 3) = C(3,3) C(25,11) / C(28,14) = 1 / 9."""
    go, gained = [True] * 14 + [False] * 14, [False] * 14 + [True] * 3 + [False] * 11
    assert classification(go, gained, 0.95).fisher_p == pytest.approx(1.0)
    mirror = classification([not g for g in go], gained, 0.95)
    assert mirror.fisher_p == pytest.approx(math.comb(25, 11) / math.comb(28, 14))
    assert classification([True, True], [True, False], 0.95).fisher_p is None  # no "no" arm
    assert classification([True, False], [False, False], 0.95).fisher_p is None  # nothing gained
