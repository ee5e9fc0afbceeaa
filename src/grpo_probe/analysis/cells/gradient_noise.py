"""The gradient reads: how many episodes a GRPO step needs before it points the same way twice.

Why: the group spread and its split into choice and chaos say whether GRPO's advantages carry signal.
The gradient reads ask the question the update itself asks: given each episode's policy-gradient
contribution ``g_e = A_e grad_theta log pi_theta(actions_e | obs_e)`` (A_e the group-normalised advantage
of ``progress_final_cm``, the log-prob the one phase 2 recomputes; :mod:`grpo_probe.phase2.gradients`
computes them from the cell's probe rollouts), how large must a batch be before its mean gradient is
more signal than noise?

**The example is the group.** GRPO samples groups, not episodes: the K advantages of a group sum to
zero and its episodes share a spawn, so its episodes are not independent draws. The independent unit is
a seed's group gradient ``h_s = (1/K) sum_k g_{s,k}`` (the GRPO gradient of one group), and the
estimators below treat the S groups as the examples. A batch of m groups has mean-gradient covariance
``Sigma_h / m``; counted in episodes (n = m K), that is ``K Sigma_h / n``, so the per-episode noise
scale is K times the per-group one.

**The gradient noise scale** (McCandlish, Kaplan, Amodei et al., "An Empirical Model of Large-Batch
Training", arXiv:1812.06162, eq. 2.8 and appendix A.1), from per-example gradients:

    B_simple = tr(Sigma) / |G|^2                                  (eq. 2.8)
    tr(Sigma_h) ~ (1 / (n - 1)) sum_s |h_s - h_bar|^2             (the sample variance, summed over dims)
    |G|^2       ~ |h_bar|^2 - tr(Sigma_h) / n                      (E|h_bar|^2 = |G|^2 + tr(Sigma_h) / n)
    B_episodes  = K tr(Sigma_h) / |G|^2

Both estimates are unbiased; their ratio is not, which is why the read has a percentile-bootstrap
interval over seeds (groups are the resampling unit). On a resample both are computed as U-statistics
over pairs of different seeds (:func:`noise_scale`), equal to the formulas above on the full sample, so
a seed drawn twice does not pose as agreement with itself. Where the estimate of |G|^2 is at or below zero,
the seeds show no mean gradient above its noise and B is +inf ("no batch size is enough at this
noise"); a resample's +inf counts in the interval, whose ends are then resample values
(:data:`grpo_probe.prereg.vocabulary.ReadSpec.unbounded`).

**The agreement** of two half-batches: the seeds split at random into two disjoint halves, the cosine
of the halves' mean gradients, the median over :data:`HALF_SPLITS` splits drawn from a fixed key (the
same splits for every cell with as many seeds). A cosine near 1 says two GRPO steps on different seeds
push the policy the same way; near 0, that each step's direction is mostly its batch's noise.

Everything is computed from the Gram matrix of the group gradients, ``M[s, t] = <h_s, h_t>``, in the
sketched space the job stores: a keyed CountSketch (Charikar, Chen & Farach-Colton 2002; feature hashing,
Weinberger et al. 2009) maps every parameter to one of D coordinates with a random sign, so
``E <S x, S y> = <x, y>``: inner products, norms and so tr(Sigma) and |G|^2 are preserved in expectation.
A resample of the seeds is a count per seed, ``w``, and every quantity is a quadratic form ``w^T M w``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from grpo_probe.keyed_rng import numpy_generator, tag

__all__ = [
    "GRADIENT_FORMAT",
    "GRADIENT_READS",
    "HALF_SPLITS",
    "GradientColumns",
    "gradient_record",
    "gradient_statistics",
    "half_split_cosine",
    "noise_scale",
    "read_gradient_file",
]

GRADIENT_FORMAT = "grpo-probe gradients 1"
"""The ``format`` of a cell's gradient file (written by :mod:`grpo_probe.phase2.gradients`)."""

GRADIENT_READS: tuple[str, ...] = ("gradient_noise_scale", "gradient_half_cosine")
"""The reads this module computes (declared with scope ``gradient`` in the vocabulary)."""

HALF_SPLITS = 64
"""Random splits of the seeds into two halves whose cosine is taken; the read is their median."""

_ROWS_PER_CHUNK = 20_000
"""Resamples whose seed counts are built at once (about 20_000 x S floats)."""


@dataclass(frozen=True)
class GradientColumns:
    """A cell's gradient file, read: the group gradients' Gram matrix over its seeds (ascending), or the
    reason none exists."""

    path: str
    available: bool
    reason: str | None
    k: int
    seeds: tuple[int, ...]
    group_gram: NDArray[np.float64]
    """[S, S]: <h_s, h_t> of the group gradients h_s = (1/K) sum_k g_{s,k}, sketched; empty if unavailable."""
    episode_gram: NDArray[np.float64]
    """[S K, S K]: <g_e, g_f> of the episodes' sketched gradients, episodes in (seed, draw) order."""
    record: dict[str, Any]
    """The file's own description of what was differentiated (head, sampler, parameters, sketch)."""


def _field(raw: dict[str, Any], name: str, path: str) -> Any:
    if name not in raw:
        raise ValueError(f"{path}: field {name!r} is missing")
    return raw[name]


def read_gradient_file(path: str | os.PathLike[str], cell: str, seeds: list[int], k: int) -> GradientColumns:
    """A cell's gradient file, checked against the cell: its id, its seeds, K episodes each."""
    where = str(path)
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{where}: not a readable gradient file ({exc})") from None
    if _field(raw, "format", where) != GRADIENT_FORMAT:
        raise ValueError(f"{where}: field 'format' is {raw['format']!r}, expected {GRADIENT_FORMAT!r}")
    if _field(raw, "cell", where) != cell:
        raise ValueError(f"{where}: field 'cell' is {raw['cell']!r}, expected {cell!r}")
    available = bool(_field(raw, "available", where))
    record = {key: value for key, value in raw.items() if key not in ("episodes", "episode_gram")}
    if not available:
        empty = np.zeros((0, 0))
        return GradientColumns(
            where, False, str(_field(raw, "reason", where)), k, tuple(seeds), empty, empty, record
        )
    episodes = _field(raw, "episodes", where)
    keys = [(int(e["seed"]), int(e["draw"])) for e in episodes]
    expected = [(s, d) for s in seeds for d in range(k)]
    if keys != expected:
        raise ValueError(
            f"{where}: field 'episodes': (seed, draw) pairs differ from the cell's "
            f"{len(seeds)} seeds x K = {k}"
        )
    gram = np.asarray(_field(raw, "episode_gram", where), dtype=np.float64)
    n = len(expected)
    if gram.shape != (n, n) or not np.isfinite(gram).all():
        raise ValueError(f"{where}: field 'episode_gram' is not a finite {n} x {n} matrix")
    # <h_s, h_t> = (1 / K^2) sum_{k, l} <g_{s,k}, g_{t,l}>: the Gram's K x K blocks summed
    group = gram.reshape(len(seeds), k, len(seeds), k).sum(axis=(1, 3)) / (k * k)
    return GradientColumns(where, True, None, k, tuple(seeds), group, gram, record)


def _counts(index: NDArray[np.int64], n_seeds: int) -> NDArray[np.float64]:
    """How often each seed is drawn, [rows, S], for flat resamples [rows, n]."""
    rows = index.shape[0]
    counts = np.zeros((rows, n_seeds))
    np.add.at(counts, (np.repeat(np.arange(rows), index.shape[1]), index.reshape(-1)), 1.0)
    return counts


def _quadratic(
    w: NDArray[np.float64], gram: NDArray[np.float64], v: NDArray[np.float64]
) -> NDArray[np.float64]:
    return np.einsum("ri,ij,rj->r", w, gram, v)


def noise_scale(gram: NDArray[np.float64], index: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    """B_simple in episodes, K tr(Sigma_h) / |G|^2 (module docstring), on the seeds ``index`` [..., n]
    selects; +inf where the estimate of |G|^2 is at or below zero, NaN where it is undefined (every
    gradient zero, or a resample of one seed).

    Both parts are written as U-statistics over pairs of positions that hold different seeds (Hoeffding
    1948): with w_s the times seed s is drawn and P = n^2 - sum_s w_s^2 such pairs,

        |G|^2       ~ (w^T M w - sum_s w_s^2 M_ss) / P         the mean <h_s, h_t> over pairs s != t
        tr(Sigma_h) ~ (n sum_s w_s M_ss - w^T M w) / P         half the mean |h_s - h_t|^2 over them

    On the full sample (every w_s = 1) they are exactly the estimators above. On a bootstrap resample a
    seed drawn twice is not paired with itself, so the resample's estimate of |G|^2 centres on the full
    sample's unbiased one, not on |h_bar|^2 (which exceeds it by tr(Sigma_h) / n), and the percentile
    interval is not pulled below the estimate: with 15 seeds the plain per-example formula on resamples
    puts the interval below the true noise scale in most simulated designs.
    """
    shape, n = index.shape[:-1], index.shape[-1]
    flat = index.reshape(-1, n)
    out = np.empty(flat.shape[0])
    diag = np.diag(gram)
    for start in range(0, flat.shape[0], _ROWS_PER_CHUNK):
        w = _counts(flat[start : start + _ROWS_PER_CHUNK], gram.shape[0])
        wmw = _quadratic(w, gram, w)
        pairs = n * n - (w * w).sum(axis=1)  # ordered pairs of positions holding different seeds
        with np.errstate(divide="ignore", invalid="ignore"):
            g2 = (wmw - (w * w) @ diag) / pairs  # unbiased |G|^2 (McCandlish et al., appendix A.1)
            tr_sigma = (n * (w @ diag) - wmw) / pairs  # the sample variance summed over dimensions
            b = np.where(g2 > 0, k * tr_sigma / g2, np.inf)
        b[(pairs == 0) | ((tr_sigma <= 0) & (g2 <= 0))] = np.nan  # one seed, or no gradient: undefined
        out[start : start + _ROWS_PER_CHUNK] = b
    return out.reshape(shape)


def _splits(n: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The fixed random halves of n seed positions: [HALF_SPLITS, n // 2] each (odd n leaves one out)."""
    rng = numpy_generator(tag("gradient_half_split"), n)
    perms = np.stack([rng.permutation(n) for _ in range(HALF_SPLITS)])
    half = n // 2
    return perms[:, :half], perms[:, half : 2 * half]


def half_split_cosine(gram: NDArray[np.float64], index: NDArray[np.int64]) -> NDArray[np.float64]:
    """The median over :data:`HALF_SPLITS` fixed splits of cos(mean gradient of half A, of half B), on
    the seeds ``index`` [..., n] selects; NaN with fewer than two seeds or a zero half-gradient. On a
    resample, a seed drawn into both halves is left out of their inner product (not of their norms)."""
    shape, n = index.shape[:-1], index.shape[-1]
    if n < 2:
        return np.full(shape, np.nan)
    first, second = _splits(n)
    flat = index.reshape(-1, n)
    out = np.empty(flat.shape[0])
    s = gram.shape[0]
    for start in range(0, flat.shape[0], _ROWS_PER_CHUNK):
        part = flat[start : start + _ROWS_PER_CHUNK]
        cosines = np.empty((part.shape[0], HALF_SPLITS))
        for p in range(HALF_SPLITS):
            a, b = _counts(part[:, first[p]], s), _counts(part[:, second[p]], s)
            # a seed drawn into both halves (a resample) is not paired with itself in the cross term
            ab = _quadratic(a, gram, b) - (a * b) @ np.diag(gram)
            aa, bb = _quadratic(a, gram, a), _quadratic(b, gram, b)
            with np.errstate(divide="ignore", invalid="ignore"):
                cosines[:, p] = ab / np.sqrt(aa * bb)
        with np.errstate(invalid="ignore"):
            out[start : start + _ROWS_PER_CHUNK] = np.median(cosines, axis=1)
    return out.reshape(shape)


def gradient_statistics(
    columns: GradientColumns | None, index: NDArray[np.int64], name: str
) -> NDArray[np.float64]:
    """The read ``name`` (one of :data:`GRADIENT_READS`) on the seeds ``index`` selects; NaN for a cell
    without gradients (a file that says why, or none)."""
    if columns is None or not columns.available:
        return np.full(index.shape[:-1], np.nan)
    if name == "gradient_noise_scale":
        return noise_scale(columns.group_gram, index, columns.k)
    if name == "gradient_half_cosine":
        return half_split_cosine(columns.group_gram, index)
    raise KeyError(f"{name!r} is no gradient read (reads: {', '.join(GRADIENT_READS)})")


def _finite(x: float) -> float | None:
    return float(x) + 0.0 if math.isfinite(x) else None


def gradient_record(columns: GradientColumns) -> dict[str, Any]:
    """decision.json's ``gradient`` of a cell: what was differentiated, or why nothing was, and the parts
    of the noise scale on every seed (tr(Sigma) and |G|^2 per group, sketched)."""
    out: dict[str, Any] = {
        "file": columns.path,
        "available": columns.available,
        "reason": columns.reason,
        **{k: v for k, v in columns.record.items() if k not in ("format", "cell", "available", "reason")},
    }
    if not columns.available:
        return out
    gram, n = columns.group_gram, len(columns.seeds)
    mean_sq = float(gram.sum()) / (n * n)
    tr_sigma = (float(np.trace(gram)) - n * mean_sq) / (n - 1) if n > 1 else math.nan
    g2 = mean_sq - tr_sigma / n
    # the same estimator with episodes as the examples (their coupling inside a group ignored), for contrast
    e, m = columns.episode_gram, columns.episode_gram.shape[0]
    e_mean_sq = float(e.sum()) / (m * m)
    e_tr = (float(np.trace(e)) - m * e_mean_sq) / (m - 1) if m > 1 else math.nan
    e_g2 = e_mean_sq - e_tr / m
    out.update(
        trace_sigma_group=_finite(tr_sigma),
        mean_gradient_sq_norm=_finite(g2),
        noise_scale_groups=_finite(tr_sigma / g2) if g2 > 0 else None,
        noise_scale_unbounded=bool(not g2 > 0),
        episode_unit_noise_scale=_finite(e_tr / e_g2) if e_g2 > 0 else None,
    )
    return out
