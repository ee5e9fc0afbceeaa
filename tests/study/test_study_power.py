"""The study's power by simulation: its level at rho = 0, its growth with arms and with reliability.

A power that did not fall to the test's false-positive rate at no ordering, or did not grow with more
designs or a more reliable gain, would be reporting something other than the nested interval's power.
"""

from __future__ import annotations

from typing import Any

import pytest
from scipy.stats import binom

from grpo_probe.study.power import StudyPower, study_power

SMALL: dict[str, Any] = {"simulations": 150, "resamples": 200, "confidence": 0.9, "seed": 3}


def test_at_no_ordering_the_power_is_at_most_the_false_positive_rate() -> None:
    # ci_low > 0 of a 90 % interval is a one-sided 5 % test; two-stage resampling errs wide, so the
    # rate may sit below 5 %, never clearly above it.
    result = study_power([4] * 6, rho=0.0, reliability=0.9, **{**SMALL, "simulations": 200})
    assert result.detected <= binom.ppf(0.999, 200, 0.05)
    assert result.power == result.detected / 200
    assert result.ci_low <= result.power <= result.ci_high


def test_power_grows_with_designs_and_with_reliability() -> None:
    many = study_power([4] * 6, rho=0.6, reliability=0.9, **SMALL)
    few = study_power([4] * 2, rho=0.6, reliability=0.9, **SMALL)
    noisy = study_power([4] * 6, rho=0.6, reliability=0.3, **SMALL)
    assert many.power > few.power + 0.2
    assert many.power > noisy.power + 0.2
    assert many.ci_low > max(few.ci_high, noisy.ci_high)  # separated beyond their Wilson intervals


def test_the_result_records_its_inputs_and_is_keyed_by_the_seed() -> None:
    a = study_power(
        (3, 4, 5), rho=0.4, reliability=0.8, simulations=40, resamples=100, confidence=0.9, seed=1
    )
    b = study_power(
        [3, 4, 5], rho=0.4, reliability=0.8, simulations=40, resamples=100, confidence=0.9, seed=1
    )
    assert isinstance(a, StudyPower) and a == b
    assert a.group_sizes == (3, 4, 5) and a.simulations == 40 and a.resamples == 100
    assert a.rho == 0.4 and a.reliability == 0.8 and a.confidence == 0.9
    assert 0 <= a.detected <= 40
    others = [
        study_power(
            (3, 4, 5), rho=0.4, reliability=0.8, simulations=40, resamples=100, confidence=0.9, seed=s
        )
        for s in (2, 3, 4)
    ]
    assert any(o.detected != a.detected for o in others)


@pytest.mark.parametrize(
    ("changes", "name"),
    [
        ({"rho": 1.0}, "rho"),
        ({"rho": -1.0}, "rho"),
        ({"reliability": 0.0}, "reliability"),
        ({"reliability": 1.2}, "reliability"),
        ({"group_sizes": [6]}, "group_sizes"),
        ({"group_sizes": [4, 0]}, "group_sizes"),
        ({"simulations": 0}, "simulations"),
        ({"resamples": 0}, "resamples"),
        ({"confidence": 1.0}, "confidence"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_inputs_name_the_argument(changes: dict[str, Any], name: str) -> None:
    args: dict[str, Any] = {"group_sizes": [4, 4], "rho": 0.3, "reliability": 0.8, **SMALL, **changes}
    with pytest.raises(ValueError, match=name):
        study_power(args.pop("group_sizes"), **args)
