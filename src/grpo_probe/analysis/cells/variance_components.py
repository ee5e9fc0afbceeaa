"""The draws' choice and the scene's chaos as variance components: the one-way random-effects ANOVA.

Why: a group's reward spread mixes what the draws chose (learnable) with chaos (the same choices,
replayed, land elsewhere). The earlier reads split it with the draw alone for the across-draw variance
and the replays alone for the within-draw variance, and took a median over seeds of
``sqrt(max(0, V_a - V_w))``: under pure chaos that median is positive on average (it clips the negative
half away before the median) and it reads real signal about 10 % low. Here every reward of a draw, the
draw itself and its R replays, enters one model, and the components are pooled over seeds before any
square root is taken.

The model, per seed s (a spawn; its mean mu_s is a fixed block effect), draw j = 1..K and observation
r = 0..R (r = 0 the draw, r >= 1 its replays), m = R + 1 observations per draw:

    y_sjr = mu_s + b_sj + e_sjr,     b_sj ~ (0, sigma_b^2)  the draw's choice,
                                     e_sjr ~ (0, sigma_w^2) chaos.

Per seed, with ybar_sj the draw's mean and ybar_s the seed's mean:

    SS_b = m * sum_j (ybar_sj - ybar_s)^2,       df_b = K - 1
    SS_w = sum_j sum_r (y_sjr - ybar_sj)^2,      df_w = K (m - 1)

and, pooled over the seeds a sample holds (sums, so a seed counts by its degrees of freedom):

    MS_b = sum_s SS_b / sum_s df_b,              E[MS_b] = sigma_w^2 + m sigma_b^2
    MS_w = sum_s SS_w / sum_s df_w,              E[MS_w] = sigma_w^2
    sigma_w^2 = MS_w,    sigma_b^2 = (MS_b - MS_w) / m

the ANOVA (method-of-moments) estimators of the balanced one-way classification (Searle, Casella &
McCulloch, *Variance Components*, 1992, ch. 3; here within each seed, the seeds as fixed blocks). Both
are unbiased. In balanced data the REML estimates equal them whenever sigma_b^2 >= 0 (same chapter), so
REML would add nothing but the truncation at zero, which the reads apply:

    choice std    sqrt(max(0, sigma_b^2))                    (cm)
    chaos std     sqrt(sigma_w^2)                            (cm; the chaos floor)
    chaos share   sigma_w^2 / (sigma_w^2 + max(0, sigma_b^2)) (1 - ICC(1); Shrout & Fleiss, 1979)

Everything is computed on an index array of seed positions ``[..., n]``: the full sample is
``arange(n)``, a percentile-bootstrap interval a ``[B, n]`` draw, a nested bootstrap ``[B, B', n]``, a
simulated design ``[S, n]`` over stacked simulated seeds; NaN rows (seeds without replays) drop out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["COMPONENT_READS", "SeedSums", "pooled_components", "seed_sums", "zero_filled"]

COMPONENT_READS: tuple[str, ...] = ("choice_std_cm", "chaos_std_cm", "chaos_share")
"""The reads of the decomposition, each with a percentile-bootstrap interval over seeds."""


@dataclass(frozen=True)
class SeedSums:
    """One seed's sums of squares and their degrees of freedom (the module docstring's SS_b, SS_w)."""

    ss_between: float
    ss_within: float
    df_between: int
    df_within: int
    per_draw: int
    """m = R + 1: the draw and its replays."""


def seed_sums(draws: NDArray[np.float64], replays: NDArray[np.float64]) -> SeedSums:
    """SS_b and SS_w of one seed: ``draws`` [K] the draws' rewards, ``replays`` [K, R] their replays'."""
    y = np.concatenate([np.asarray(draws, dtype=np.float64)[:, None], np.asarray(replays, np.float64)], 1)
    k, m = y.shape
    draw_means = y.mean(axis=1)
    ss_between = float(m * np.sum((draw_means - draw_means.mean()) ** 2))
    ss_within = float(np.sum((y - draw_means[:, None]) ** 2))
    return SeedSums(ss_between, ss_within, k - 1, k * (m - 1), m)


def pooled_components(
    sums: NDArray[np.float64], per_draw: int, index: NDArray[np.int64]
) -> dict[str, NDArray[np.float64]]:
    """The three reads on the seeds ``index`` selects (``[..., n]`` positions into ``sums``).

    ``sums``: [n, 4], each seed's SS_b, SS_w, df_b, df_w; a seed without replays is a NaN row and is
    left out. A sample without a replayed seed, or whose rewards never differ, reads NaN where a read is
    undefined (a share of zero variance).
    """
    ss_b, ss_w, df_b, df_w = (column[index].sum(axis=-1) for column in zero_filled(sums).T)
    with np.errstate(invalid="ignore", divide="ignore"):
        ms_b = ss_b / df_b
        ms_w = ss_w / df_w
        choice_var = np.maximum(0.0, (ms_b - ms_w) / per_draw)
        total = ms_w + choice_var
        return {
            "choice_std_cm": np.sqrt(choice_var),
            "chaos_std_cm": np.sqrt(ms_w),
            "chaos_share": np.where(total > 0.0, ms_w / np.where(total > 0.0, total, 1.0), np.nan),
        }


def zero_filled(sums: NDArray[np.float64]) -> NDArray[np.float64]:
    """``sums`` with the rows of seeds without replays (NaN) as zeros (they add nothing to a pooled sum),
    each column contiguous, so a gather of seed positions reads one column at a time."""
    return np.asfortranarray(np.where(np.isfinite(sums), sums, 0.0))
