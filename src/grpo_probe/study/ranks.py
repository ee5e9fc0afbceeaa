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

:func:`spearman_rows` computes the same rho for many resamples at once (one row each), which is what
makes the nested bootstrap and the permutation test (:mod:`grpo_probe.study.nested`) and the study's
power simulation (:mod:`grpo_probe.study.power`) cheap enough to run thousands of times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import rankdata

from grpo_probe.keyed_rng import numpy_generator, tag

__all__ = ["RankCorrelation", "rank_correlation", "spearman", "spearman_rows"]


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
    inference: str = "arm bootstrap"
    """How the interval was resampled: "arm bootstrap" (arms as independent units, :func:`rank_correlation`)
    or "nested bootstrap" (designs, then arms within them,
    :func:`grpo_probe.study.nested.nested_rank_correlation`)."""


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


def spearman_rows(x: ArrayLike, y: ArrayLike) -> NDArray[np.float64]:
    """Spearman's rho of each row pair of two (B, n) arrays, as :func:`spearman` computes it row by row.

    Per row b: rho_b = Pearson(rank(x_b), rank(y_b)) with average ranks for ties (Spearman 1904). Returns
    a float64 array of length B, NaN where a row of either side is constant (or n < 2), where
    :func:`spearman` returns None.
    """
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"need two 2-d arrays of equal shape, got {a.shape} and {b.shape}")
    rows, n = a.shape
    out = np.full(rows, np.nan, dtype=np.float64)
    if n < 2 or rows == 0:
        return out
    ra, rb = rankdata(a, axis=1), rankdata(b, axis=1)
    da = ra - ra.mean(axis=1, keepdims=True)
    db = rb - rb.mean(axis=1, keepdims=True)
    denom = np.sqrt((da * da).sum(axis=1) * (db * db).sum(axis=1))
    num = (da * db).sum(axis=1)
    ok = denom > 0.0  # a constant row has all ranks equal to (n + 1) / 2, so its deviations are exactly 0
    out[ok] = num[ok] / denom[ok]
    return out


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
