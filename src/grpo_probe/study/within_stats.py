"""A read's rank correlation with the gain inside each design, over designs as the unit, and with the
arms' competence held fixed: the statistics of a study that registers its answer within designs
(``answer: within_designs``) and of the exploratory re-analysis (:mod:`grpo_probe.study.explore`).

Why designs as the unit: the arms of one design share its scene, its seeds and its reward scale, so a
study of G designs has G independent units for any statement about arms within a scene, however many
arms each holds. Three answers per read, all over arms with the read recorded:

- :func:`within_design`: each design's own Spearman rho (designs with at least :data:`MIN_ARMS` arms),
  their unweighted mean over designs, a percentile interval from a bootstrap over designs, and a
  permutation p-value whose null shuffles the gains only among the arms of each design;
- the pooled rho over all arms with the two-stage bootstrap (designs, then arms within them) of
  :func:`grpo_probe.study.nested.nested_rank_correlation`, reused as the study's page computes it;
- :func:`beyond_competence`: the mean over designs of the within-design partial rank correlation of the
  read and the gain given a competence read (:func:`partial_rank`), with the same design bootstrap.

:func:`within_design` is also the registered verdict of a study whose ``answer`` is ``within_designs``
(:mod:`grpo_probe.study.inference`) and of its power simulation (:mod:`grpo_probe.study.power`): one
function, so the exploratory page, the registered answer and its power compute the same statistic with
the same keyed draws.

A design where the read (or the gain) is constant orders none of its arms: its rho counts as 0, so a read
that only tracks the scene scores 0 within designs instead of dropping out. Every draw comes from a
keyed generator (:mod:`grpo_probe.keyed_rng`), (seed, "study", "explore", <answer>, read), so the numbers
depend only on the seed, the read's name and the rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.study.ranks import spearman, spearman_rows

__all__ = [
    "MIN_ARMS",
    "MIN_ARMS_PARTIAL",
    "DesignMean",
    "beyond_competence",
    "design_blocks",
    "partial_rank",
    "within_design",
]

MIN_ARMS = 3
"""A design needs this many arms with the read for a rho of its own (two arms give +-1 whatever the read)."""
MIN_ARMS_PARTIAL = 4
"""And this many for a partial correlation: with three arms, the ranks left after holding one covariate
fixed have one degree of freedom, so the partial is +-1 whatever the read."""
_TIE_TOLERANCE = 1e-12
"""A permuted statistic within this of the observed one counts as reaching it (Phipson & Smyth 2010), as
in :mod:`grpo_probe.study.nested`."""


@dataclass(frozen=True)
class DesignMean:
    """A per-design statistic of one read, its mean over designs, and that mean's interval and test."""

    read: str
    arms: int
    """Arms with the read, in the designs that count."""
    designs: list[str]
    """The designs that count, in order of first appearance."""
    per_design: list[float]
    """Each counted design's statistic (0 where it orders nothing, see :attr:`flat`)."""
    flat: list[str]
    """Designs whose statistic is undefined (a constant column, or a partial whose read or gain is a
    monotone function of competence there) and counts as 0."""
    mean: float | None
    """Unweighted mean of :attr:`per_design`; None when no design counts."""
    ci_low: float | None
    ci_high: float | None
    """Percentile interval of the mean over a bootstrap of designs; None with fewer than two designs."""
    p_value: float | None = None
    """One-sided within-design permutation p-value (the within-design rho only)."""


def design_blocks(designs: Sequence[str]) -> list[tuple[str, NDArray[np.int64]]]:
    """Each design, in order of first appearance, with the positions of its arms."""
    labels = np.asarray(designs, dtype=object)
    return [(d, np.flatnonzero(labels == d).astype(np.int64)) for d in dict.fromkeys(designs)]


def partial_rank(x: Sequence[float], y: Sequence[float], z: Sequence[float]) -> float | None:
    """The partial rank correlation of x and y given z (a partial Spearman correlation).

    With r the Spearman rhos (Pearson correlations of the average ranks), the first-order partial
    correlation (Yule 1897; Kendall & Stuart, *The Advanced Theory of Statistics*, vol. 2, sec. 27.5; for
    ranks, Conover 1999, *Practical Nonparametric Statistics*, 3rd ed., sec. 5.5):

        r_xy.z = (r_xy - r_xz r_yz) / sqrt((1 - r_xz^2) (1 - r_yz^2)),

    the correlation of the ranks of x and y after each is regressed on the ranks of z. Returns None where
    it is undefined: x or y constant, or either a monotone function of z (a zero denominator). With z
    constant there is nothing to hold fixed and the partial is r_xy.
    """
    r_xy = spearman(x, y)
    if r_xy is None:
        return None
    r_xz, r_yz = spearman(x, z), spearman(y, z)
    if r_xz is None or r_yz is None:
        return r_xy
    denominator = (1.0 - r_xz * r_xz) * (1.0 - r_yz * r_yz)
    if denominator <= 1e-12:
        return None
    return max(-1.0, min(1.0, (r_xy - r_xz * r_yz) / math.sqrt(denominator)))


def _interval(
    per_design: NDArray[np.float64], rng: np.random.Generator, resamples: int, confidence: float
) -> tuple[float | None, float | None]:
    """Percentile interval (Efron & Tibshirani 1993, ch. 13.3) of the mean over G designs drawn with
    replacement, B = ``resamples`` times."""
    g = len(per_design)
    if g < 2:
        return None, None
    means = per_design[rng.integers(0, g, size=(resamples, g))].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _check(read: str, *columns: Sequence[float]) -> list[NDArray[np.float64]]:
    arrays = [np.asarray(c, dtype=np.float64) for c in columns]
    if any(a.shape != arrays[0].shape or a.ndim != 1 for a in arrays):
        raise ValueError(f"{read}: need one value of each column per arm")
    if not all(np.isfinite(a).all() for a in arrays):
        raise ValueError(f"{read}: reads, gains and the covariate must be finite")
    return arrays


def _permutation_p(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    blocks: Sequence[NDArray[np.int64]],
    observed: float,
    rng: np.random.Generator,
    permutations: int,
) -> float:
    """One-sided p of the mean within-design rho when the gains are shuffled among the arms of each
    design separately (a stratified permutation; Good 2005, ch. 3), counting the observed arrangement
    (Phipson & Smyth 2010): p = (1 + #{b : T_b >= T}) / (1 + B)."""
    total = np.zeros(permutations, dtype=np.float64)
    for index in blocks:
        n = len(index)
        order = np.argsort(rng.random((permutations, n)), axis=1)
        rhos = spearman_rows(np.broadcast_to(x[index], (permutations, n)), y[index][order])
        total += np.nan_to_num(rhos, nan=0.0)
    permuted = total / len(blocks)
    reached = int(np.count_nonzero(permuted >= observed - _TIE_TOLERANCE))
    return (1 + reached) / (1 + permutations)


def within_design(
    read: str,
    values: Sequence[float],
    gains: Sequence[float],
    designs: Sequence[str],
    *,
    seed: int,
    resamples: int,
    confidence: float,
    permutations: int,
) -> DesignMean:
    """The mean over designs of each design's Spearman rho of ``values`` against ``gains``.

    T = (1 / G) sum_d rho_d over the G designs with at least :data:`MIN_ARMS` arms, rho_d = 0 where a
    column is constant in d. Interval: designs resampled with replacement (the design is the unit).
    p-value: :func:`_permutation_p` with ``permutations`` within-design shuffles.
    """
    x, y = _check(read, values, gains)
    blocks = [(d, i) for d, i in design_blocks(designs) if len(i) >= MIN_ARMS]
    rhos = [spearman(x[i], y[i]) for _, i in blocks]
    per_design = np.asarray([0.0 if r is None else r for r in rhos], dtype=np.float64)
    flat = [d for (d, _), r in zip(blocks, rhos, strict=True) if r is None]
    names = [d for d, _ in blocks]
    arms = int(sum(len(i) for _, i in blocks))
    if not blocks:
        return DesignMean(read, 0, [], [], [], None, None, None)
    mean = float(per_design.mean())
    low, high = _interval(
        per_design,
        numpy_generator(seed, tag("study"), tag("explore"), tag("within"), tag(read)),
        resamples,
        confidence,
    )
    rng = numpy_generator(seed, tag("study"), tag("explore"), tag("permutation"), tag(read))
    p = _permutation_p(x, y, [i for _, i in blocks], mean, rng, permutations)
    return DesignMean(read, arms, names, per_design.tolist(), flat, mean, low, high, p)


def beyond_competence(
    read: str,
    values: Sequence[float],
    gains: Sequence[float],
    competence: Sequence[float],
    designs: Sequence[str],
    *,
    seed: int,
    resamples: int,
    confidence: float,
) -> DesignMean:
    """The mean over designs of the within-design partial rank correlation of ``values`` and ``gains``
    given ``competence`` (:func:`partial_rank`), over designs with at least :data:`MIN_ARMS_PARTIAL` arms;
    an undefined partial counts as 0 (nothing beyond competence there). Interval: the design bootstrap."""
    x, y, z = _check(read, values, gains, competence)
    blocks = [(d, i) for d, i in design_blocks(designs) if len(i) >= MIN_ARMS_PARTIAL]
    if not blocks:
        return DesignMean(read, 0, [], [], [], None, None, None)
    partials = [partial_rank(x[i], y[i], z[i]) for _, i in blocks]
    per_design = np.asarray([0.0 if p is None else p for p in partials], dtype=np.float64)
    flat = [d for (d, _), p in zip(blocks, partials, strict=True) if p is None]
    rng = numpy_generator(seed, tag("study"), tag("explore"), tag("partial"), tag(read))
    low, high = _interval(per_design, rng, resamples, confidence)
    arms = int(sum(len(i) for _, i in blocks))
    return DesignMean(
        read, arms, [d for d, _ in blocks], per_design.tolist(), flat, float(per_design.mean()), low, high
    )
