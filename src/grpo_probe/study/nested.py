"""Rank correlation over arms that are nested in designs: an interval and a test that respect the nesting.

Why: a validation study runs a handful of designs (scenes), each with several arms, and the arms of one
design share its scene, its difficulty and its reward scale. They are not independent draws, so the arm
bootstrap of :func:`grpo_probe.study.ranks.rank_correlation` (arms as the unit of replication) is too sure
of itself whenever designs differ as wholes: a pooled rho that only says "the easy scene gains more and
reads more" looks as firm as one that ranks arms inside each scene. Three pieces here keep those apart:

- :func:`nested_rank_correlation`: the pooled rho with a two-stage bootstrap interval (designs with
  replacement, then arms within each drawn design), so the spread between designs enters the interval;
- :func:`within_design_permutation`: a test of the pooled rho whose null shuffles gains only among the
  arms of each design, so the between-design part of the ordering is held fixed and cannot make it pass;
- :func:`within_design_rho`: the arm-weighted mean of each design's own rho, which says whether the
  pooled ordering survives inside designs at all.

Every draw comes from a keyed generator (:mod:`grpo_probe.keyed_rng`): (seed, "study", "nested", read)
for the interval, (seed, "study", "permutation", read) for the test, so results depend only on the
registered seed, the read's name and the rows (designs are taken in order of first appearance, arms in
their given order within each design).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.study.ranks import RankCorrelation, spearman, spearman_rows

__all__ = [
    "PermutationTest",
    "nested_rank_correlation",
    "within_design_permutation",
    "within_design_rho",
]

_TIE_TOLERANCE = 1e-12
"""A permuted rho within this of the observed one counts as reaching it: permutations that give the same
rho in exact arithmetic can differ from it in the last bits, and should count (Phipson & Smyth 2010)."""


@dataclass(frozen=True)
class PermutationTest:
    """The pooled rho of one read against the gain, with its within-design permutation p-value."""

    read: str
    n: int
    """Arms with both a read and a gain."""
    rho: float | None
    """Pooled Spearman rho over all arms; None when fewer than three arms or a constant column."""
    p_value: float | None
    """One-sided (rho larger than under the null); None when rho is None."""
    permutations: int


@dataclass(frozen=True)
class _Blocks:
    """The arms sorted by design (stable), and each design's block of them."""

    x: NDArray[np.float64]
    y: NDArray[np.float64]
    codes: NDArray[np.int64]
    """Design index of each sorted arm, 0 .. designs - 1 in order of first appearance."""
    starts: NDArray[np.int64]
    sizes: NDArray[np.int64]


def _blocks(
    read: str, values: Sequence[float], gains: Sequence[float], groups: Sequence[Hashable]
) -> _Blocks:
    x, y = np.asarray(values, dtype=np.float64), np.asarray(gains, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"{read}: need one read and one gain per arm, got {x.shape} and {y.shape}")
    if len(groups) != len(x):
        raise ValueError(f"{read}: groups needs one design per arm, got {len(groups)} for {len(x)} arms")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError(f"{read}: reads and gains must be finite")
    index: dict[Hashable, int] = {}
    codes = np.asarray([index.setdefault(g, len(index)) for g in groups], dtype=np.int64)
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=len(index)).astype(np.int64)
    starts = (np.cumsum(sizes) - sizes).astype(np.int64)
    return _Blocks(x[order], y[order], codes[order], starts, sizes)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")


def _nested_rhos(blocks: _Blocks, rng: np.random.Generator, resamples: int) -> NDArray[np.float64]:
    """Pooled rho of ``resamples`` two-stage bootstrap resamples (NaN where a column is constant).

    Resample b draws G designs with replacement (G = the study's number of designs), then, within each
    drawn design d, n_d of its arms with replacement, and pools them: Davison & Hinkley (1997),
    *Bootstrap Methods and their Application*, sec. 3.8 (hierarchical data), resampling at both stages;
    Ren, Lai, Tong, Aminzadeh, Hou & Lai (2010), "Nonparametric bootstrapping for hierarchical data",
    J. Appl. Stat. 37(9), for the same scheme. Resampling at both stages counts the within-design spread
    once more than the data hold it, so with few designs the interval errs wide, not narrow (Davison &
    Hinkley, sec. 3.8). Designs of different sizes give resamples of different lengths; the resamples are
    grouped by length and each group goes through :func:`spearman_rows` at once.
    """
    g, width = len(blocks.sizes), int(blocks.sizes.max())
    designs = rng.integers(0, g, size=(resamples, g))
    drawn = blocks.sizes[designs]
    # Every slot up to the largest design is drawn, so a design's picks never depend on which others are
    # drawn beside it; slots past the drawn design's size are masked out.
    picks = rng.integers(0, drawn[..., None], size=(resamples, g, width))
    valid = np.arange(width) < drawn[..., None]
    index = blocks.starts[designs][..., None] + picks
    lengths = drawn.sum(axis=1)
    rhos = np.full(resamples, np.nan, dtype=np.float64)
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        chosen = index[rows][valid[rows]].reshape(len(rows), int(length))  # row-major: each row's arms
        rhos[rows] = spearman_rows(blocks.x[chosen], blocks.y[chosen])
    return rhos


def nested_rank_correlation(
    read: str,
    values: Sequence[float],
    gains: Sequence[float],
    groups: Sequence[Hashable],
    *,
    seed: int,
    resamples: int,
    confidence: float,
) -> RankCorrelation:
    """Pooled Spearman rho of ``values`` against ``gains`` over all arms, with a nested percentile interval.

    ``groups`` names each arm's design. The point estimate is Spearman's rho over all arms pooled (ties by
    average rank, Spearman 1904); the interval is the percentile interval (Efron & Tibshirani 1993,
    ch. 13.3) of the two-stage bootstrap of :func:`_nested_rhos`. Resamples with a constant column are
    counted in ``degenerate_resamples`` and left out, as in :func:`grpo_probe.study.ranks.rank_correlation`.
    """
    _check_confidence(confidence)
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples!r}")
    blocks = _blocks(read, values, gains, groups)
    n = len(blocks.x)
    rho = spearman(blocks.x, blocks.y) if n >= 3 else None
    inference = "nested bootstrap"
    if rho is None:
        return RankCorrelation(read, n, None, None, None, confidence, resamples, 0, inference)
    rng = numpy_generator(seed, tag("study"), tag("nested"), tag(read))
    rhos = _nested_rhos(blocks, rng, resamples)
    kept = rhos[~np.isnan(rhos)]
    degenerate = resamples - len(kept)
    if len(kept) == 0:
        return RankCorrelation(read, n, rho, None, None, confidence, resamples, degenerate, inference)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(kept, [alpha, 1.0 - alpha])
    low, high = float(low), float(high)
    return RankCorrelation(read, n, rho, low, high, confidence, resamples, degenerate, inference)


def within_design_permutation(
    read: str,
    values: Sequence[float],
    gains: Sequence[float],
    groups: Sequence[Hashable],
    *,
    seed: int,
    permutations: int,
) -> PermutationTest:
    """Pooled rho with a one-sided p-value from permuting the gains within each design.

    The null is that, inside each design, the gains are exchangeable over its arms (the read says nothing
    about which arm of a scene gains more); design-level differences are kept as they are. Each
    permutation shuffles the gains among the arms of every design separately, a stratified permutation
    (Good 2005, *Permutation, Parametric and Bootstrap Tests of Hypotheses*, 3rd ed., ch. 3: with blocks,
    permute within blocks only), and recomputes the pooled rho. The p-value counts the observed
    arrangement among the permutations (Phipson & Smyth 2010, "Permutation p-values should never be
    zero", Stat. Appl. Genet. Mol. Biol. 9(1):39):

        p = (1 + #{b : rho_b >= rho}) / (1 + B).
    """
    if permutations < 1:
        raise ValueError(f"permutations must be at least 1, got {permutations!r}")
    blocks = _blocks(read, values, gains, groups)
    n = len(blocks.x)
    rho = spearman(blocks.x, blocks.y) if n >= 3 else None
    if rho is None:
        return PermutationTest(read, n, None, None, permutations)
    rng = numpy_generator(seed, tag("study"), tag("permutation"), tag(read))
    # Sorting (design index + a uniform in [0, 1)) keeps every arm in its design's block and orders the
    # block's arms at random: a uniform permutation within each design.
    shuffle = np.argsort(blocks.codes + rng.random((permutations, n)), axis=1)
    permuted = spearman_rows(np.broadcast_to(blocks.x, (permutations, n)), blocks.y[shuffle])
    reached = int(np.count_nonzero(permuted >= rho - _TIE_TOLERANCE))
    return PermutationTest(read, n, rho, (1 + reached) / (1 + permutations), permutations)


def within_design_rho(
    values: Sequence[float], gains: Sequence[float], groups: Sequence[Hashable]
) -> float | None:
    """The arm-weighted mean of each design's own Spearman rho: sum_d n_d rho_d / sum_d n_d.

    Only designs with at least three arms and no constant column count (a design of two arms has a rho
    of +-1 whatever the read); None when none does. Set beside the pooled rho, it tells whether the
    pooled ordering holds inside designs or only between them (a large pooled rho with a within-design
    rho near zero is an ordering of scenes, not of arms).
    """
    blocks = _blocks("within_design_rho", values, gains, groups)
    total, weight = 0.0, 0
    for start, size in zip(blocks.starts.tolist(), blocks.sizes.tolist(), strict=True):
        if size < 3:
            continue
        rho = spearman(blocks.x[start : start + size], blocks.y[start : start + size])
        if rho is None:
            continue
        total += size * rho
        weight += size
    return total / weight if weight else None
