"""Does the probe's ordering of the arms match the ordering of what the pilot gained on them?

Spearman's rank correlation (Spearman 1904) between one probe read and the pilot's held-out gain, over the
arms of a validation study:

    rho = Pearson(rank(read), rank(gain)),   ties ranked by their average rank,

which for untied ranks equals 1 - 6 sum d_i^2 / (n (n^2 - 1)). Its interval is a percentile bootstrap
over arms (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13.3): the arm is the unit
of replication here, as the seed is in the probe. A resample in which either column is constant has no
rank correlation; it is counted and left out, and the count is reported, because with a handful of arms
that happens often and an interval that hid it would look surer than it is.

The generator is keyed by (registered seed, "study", read), so the interval's bytes depend only on the
registered numbers and the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from grpo_probe.keyed_rng import numpy_generator, tag

__all__ = ["RankCorrelation", "rank_correlation", "spearman"]


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman's rho of one read against the gain, with its bootstrap interval over arms."""

    read: str
    n: int
    """Arms with both a read and a gain."""
    rho: float | None
    """None when fewer than three arms or a constant column leave no ordering to compare."""
    ci_low: float | None
    ci_high: float | None
    confidence: float
    resamples: int
    degenerate_resamples: int
    """Resamples left out because a column was constant in them."""


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho of paired values (average ranks for ties); None if either side is constant."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need two 1-d sequences of equal length, got {a.shape} and {b.shape}")
    if len(a) < 2:
        return None
    ra, rb = rankdata(a), rankdata(b)
    da, db = ra - ra.mean(), rb - rb.mean()
    denom = float(np.sqrt((da * da).sum() * (db * db).sum()))
    if denom == 0.0:
        return None
    return float((da * db).sum() / denom)


def rank_correlation(
    read: str,
    values: Sequence[float],
    gains: Sequence[float],
    *,
    seed: int,
    resamples: int,
    confidence: float,
) -> RankCorrelation:
    """rho of ``values`` (the read, one per arm) against ``gains``, with its percentile interval."""
    x, y = np.asarray(values, dtype=np.float64), np.asarray(gains, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"{read}: need one read and one gain per arm, got {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError(f"{read}: reads and gains must be finite")
    n = len(x)
    rho = spearman(x, y) if n >= 3 else None
    if rho is None:
        return RankCorrelation(read, n, None, None, None, confidence, resamples, 0)
    rng = numpy_generator(seed, tag("study"), tag(read))
    picks = rng.integers(0, n, size=(resamples, n))
    rhos = [spearman(x[p], y[p]) for p in picks]
    kept = np.asarray([r for r in rhos if r is not None], dtype=np.float64)
    degenerate = resamples - len(kept)
    if len(kept) == 0:
        return RankCorrelation(read, n, rho, None, None, confidence, resamples, degenerate)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(kept, [alpha, 1.0 - alpha])
    return RankCorrelation(read, n, rho, float(low), float(high), confidence, resamples, degenerate)
