"""The bootstrap-t interval of the pooled chaos share over seeds, for designs that register it.

Why: the rule reads the upper end of the pooled chaos share's interval (``chaos_share.upper <= 0.5``). The
share pools every seed's sums of squares (:mod:`grpo_probe.analysis.cells.variance_components`), so the
null's boundary is a set: the pooled share sits at 0.5 also when the choice spread is equal in every seed
and the chaos differs between seeds, as a contact scene's does. There Efron's percentile interval over 15
seeds covers less than it promises, and the design's false go at that point was 13.5 % against a 5 %
target (the operating simulation's search, :mod:`grpo_probe.analysis.error_rates.nulls`). The
studentised bootstrap divides each resample's deviation by its own standard error, so a resample that
happens to draw the calm seeds does not pass for evidence; it is second-order accurate where the
percentile interval is first-order (Hall, *The Bootstrap and Edgeworth Expansion*, 1992, Sec. 3.5).

The interval, for theta the pooled share of the sample and se its standard error:

    t*_b = (theta*_b - theta) / se*_b                         (each resample b = 1..B of the seeds)
    [theta - q_{1-alpha}(t*) se,  theta - q_alpha(t*) se]     (Efron & Tibshirani, 1993, ch. 12.5;
                                                               Davison & Hinkley, 1997, Sec. 5.2.1)

clipped to [0, 1]. The standard error is the delta method over seeds (the seeds are the unit; a seed's sums
enter as a cluster): with A = MS_b and C = MS_w the pooled mean squares (ratios of sums over the seeds),
the unclipped share theta = m C / (A + (m - 1) C) and D = A + (m - 1) C,

    g_s = -m C / D^2 * (SS_b,s - A df_b,s) / sum_s df_b,s  +  m A / D^2 * (SS_w,s - C df_w,s) / sum_s df_w,s
    se  = sqrt(sum_s g_s^2)

each seed's influence on the share (the linearisation of a ratio of sums; Davison & Hinkley, 1997, Sec.
2.7.2). A seed without replays has zero sums and zero degrees of freedom, so its influence is zero.

``benchmarks/pooled_share_interval_coverage.py`` compares the two intervals' coverage where the chaos
differs between seeds; every decision record's operating simulation measures the rule that reads it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from grpo_probe.analysis.cells.variance_components import zero_filled

__all__ = ["STUDENTIZED_READS", "share_standard_error", "studentized_ends"]

STUDENTIZED_READS: frozenset[str] = frozenset({"chaos_share"})
"""The reads whose interval ``analysis.bootstrap.pooled_interval: studentized`` makes a bootstrap-t one."""


def share_standard_error(
    sums: NDArray[np.float64], per_draw: int, index: NDArray[np.int64]
) -> NDArray[np.float64]:
    """The delta-method standard error over seeds of the pooled share on the seeds ``index`` selects
    (``[..., n]`` positions into ``sums``, each seed's SS_b, SS_w, df_b, df_w): one value per row."""
    ss_b, ss_w, df_b, df_w = (column[index] for column in zero_filled(sums).T)
    m = float(per_draw)
    with np.errstate(invalid="ignore", divide="ignore"):
        total_b, total_w = df_b.sum(axis=-1), df_w.sum(axis=-1)
        a = ss_b.sum(axis=-1) / total_b
        c = ss_w.sum(axis=-1) / total_w
        d2 = (a + (m - 1.0) * c) ** 2
        influence = (-m * c / d2)[..., None] * (ss_b - a[..., None] * df_b) / total_b[..., None] + (
            m * a / d2
        )[..., None] * (ss_w - c[..., None] * df_w) / total_w[..., None]
        return np.sqrt(np.square(influence).sum(axis=-1))


def studentized_ends(
    theta: NDArray[np.float64],
    se: NDArray[np.float64],
    resampled: NDArray[np.float64],
    resampled_se: NDArray[np.float64],
    alpha: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(lower, upper) bootstrap-t ends at one-sided ``alpha`` each: ``theta``, ``se`` per sample [...],
    ``resampled`` and ``resampled_se`` per sample and resample [..., B]. A resample whose share or standard
    error is undefined or zero drops out; a sample left without any, or without a finite theta and se,
    has NaN ends."""
    with np.errstate(invalid="ignore", divide="ignore"):
        usable = np.isfinite(resampled) & np.isfinite(resampled_se) & (resampled_se > 0.0)
        t = np.where(
            usable, (resampled - np.asarray(theta)[..., None]) / np.where(usable, resampled_se, 1.0), np.nan
        )
    low = np.full(np.shape(theta), np.nan)
    high = np.full(np.shape(theta), np.nan)
    ok = usable.any(axis=-1) & np.isfinite(theta) & np.isfinite(se)
    if np.any(ok):
        q_low, q_high = np.nanquantile(t[ok], [alpha, 1.0 - alpha], axis=-1)
        low[ok] = np.clip(np.asarray(theta)[ok] - q_high * np.asarray(se)[ok], 0.0, 1.0)
        high[ok] = np.clip(np.asarray(theta)[ok] - q_low * np.asarray(se)[ok], 0.0, 1.0)
    return low, high
