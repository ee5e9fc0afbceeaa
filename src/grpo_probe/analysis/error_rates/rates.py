"""Simulated rates: a count of runs with Wilson's score interval, and the reductions the operating
simulation takes over them (any cell going, the worst point of the null's boundary).

Why its own module: the study's classifier and power simulation read the same interval
(:func:`wilson_interval`), and the operating simulation (:mod:`grpo_probe.analysis.error_rates.operating`)
only draws runs; how a rate of them is counted, bounded and recorded is the same wherever one is printed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Rate", "any_cell", "rate_dict", "wilson_interval", "worst_rate"]


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


def any_cell(arrays: Sequence[NDArray[np.bool_] | None]) -> NDArray[np.bool_] | None:
    """Runs in which any of the cells qualifies; None when one of them was not simulated."""
    if not arrays or any(a is None for a in arrays):
        return None
    return np.any(np.stack([a for a in arrays if a is not None]), axis=0)


def worst_rate(design: Mapping[str, Rate | None]) -> tuple[str | None, Rate | None]:
    """The point of the null's boundary where the design goes most often, among ``at_bar``,
    ``at_bar_data`` and the searched point confirmed at full size (``searched_worst``): its key and rate."""
    bar = [(key, design.get(key)) for key in ("at_bar", "at_bar_data", "searched_worst")]
    found = [(key, rate) for key, rate in bar if rate is not None]
    if not found:
        return None, None
    return max(found, key=lambda pair: (pair[1].value, pair[1].high))


def rate_dict(hits: NDArray[np.bool_] | None) -> dict[str, Any] | None:
    return None if hits is None else Rate.of(hits).to_dict()
