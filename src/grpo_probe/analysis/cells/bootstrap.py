"""Percentile bootstrap over seeds, with its RNG keyed by the registered bootstrap seed and a name.

Why: the probe's unit of replication is the seed (a spawn and its group of K draws), so intervals resample
seeds, never single rollouts. The generator for each interval is keyed by (registered seed, "bootstrap",
cell id, read name), so a cell's interval does not change when another cell is added or the order in
which reads are computed changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from grpo_probe.keyed_rng import numpy_generator, tag

__all__ = ["Estimate", "bootstrap_generator", "percentile_bootstrap"]


@dataclass(frozen=True)
class Estimate:
    """A point estimate over seeds with its percentile-bootstrap interval."""

    value: float
    ci_low: float
    ci_high: float


def bootstrap_generator(seed: int, cell: str, read: str) -> np.random.Generator:
    """The keyed generator of one interval: (registered seed, tag("bootstrap"), tag(cell), tag(read))."""
    return numpy_generator(seed, tag("bootstrap"), tag(cell), tag(read))


def percentile_bootstrap(
    values: ArrayLike,
    statistic: Literal["mean", "median"],
    resamples: int,
    confidence: float,
    rng: np.random.Generator,
) -> Estimate:
    """The statistic of ``values`` (one per seed) and its percentile bootstrap interval.

    What is calculated is Efron's percentile interval (Efron & Tibshirani, *An Introduction to the
    Bootstrap*, 1993, ch. 13.3): draw ``resamples`` = B resamples of the n seeds with replacement, compute
    the statistic of each, and take the (1 - confidence)/2 and (1 + confidence)/2 quantiles of the B
    values (numpy's default linear interpolation between order statistics). The median of an even
    number of values is the mean of the two middle ones. With one seed the interval is the point.
    The percentile interval is not bias-corrected (no BCa): with n = 15 seeds its coverage is
    approximate. The registered rule reads its ends all the same (``<read>.lower``, ``<read>.upper``), so
    its nominal confidence is not the rule's error rate: that is measured by simulating the whole rule
    (:mod:`grpo_probe.analysis.error_rates.operating`, decision.md's false-go rate and power;
    docs/error-rates.md).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"need a non-empty 1-d array of per-seed values, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("per-seed values must be finite")
    reduce = np.median if statistic == "median" else np.mean
    index = rng.integers(0, x.size, size=(resamples, x.size))
    replicates = reduce(x[index], axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return Estimate(value=float(reduce(x)), ci_low=float(low), ci_high=float(high))
