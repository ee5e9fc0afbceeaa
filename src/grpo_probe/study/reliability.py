"""How much of the spread of the pilot's gains over arms is real: the reliability of the gain.

Why: the validation study correlates a probe read with each arm's pilot gain, and each gain is an
estimate with its own standard error. When those errors are as large as the differences between arms,
no read can rank the gains well, however good it is: the observed correlation is capped by the gain's
reliability (Spearman 1904's attenuation). The study should report that cap beside its rho, and the power
simulation (:mod:`grpo_probe.study.power`) takes it as an input.

Classical test theory (Lord & Novick 1968, *Statistical Theories of Mental Test Scores*, ch. 3): an
observed score is a true score plus an error uncorrelated with it, X = T + E, so var(X) = var(T) +
var(E), and the reliability is the true-score share of the observed variance,

    R = var(T) / var(X) = 1 - var(E) / var(X).

Here var(X) is the sample variance of the gains over arms (ddof 1) and var(E) the mean of the arms'
squared standard errors. For a gain measured as a paired difference (the same seeds with and without the
pilot), that standard error is s_d / sqrt(n), the standard error of a mean of n paired differences with
sample std s_d (Student 1908); the caller supplies it.

With pilot replicates (``phase2.replicates`` = R >= 2: each arm trained R times from the same initial
policy on training spawns of its own, :mod:`grpo_probe.phase2.held_out`), the error is measured rather
than modelled: an arm's gain is the mean of its R replicate gains, and the replicates' spread within an
arm is the error of one pilot, training luck and held-out noise together, which a standard error over
held-out seeds alone cannot see. :func:`replicate_reliability` is the reliability of that mean,

    R_k = var_b / (var_b + var_e / k),    var_e = mean over arms of the replicates' variance (ddof 1),
                                         var_b = var(arm means, ddof 1) - var_e / k,

k = R replicates: the between-arm variance of the true gains over the variance of the observed mean gains.
It is the intraclass correlation ICC(1,k) of the one-way random-effects model, (MSB - MSW) / MSB with
MSB = k var(arm means) and MSW = var_e (Shrout & Fleiss 1979, "Intraclass correlations: uses in
assessing rater reliability", Psychol. Bull. 86, Case 1), which is the Spearman-Brown prophecy
(Spearman 1910; Brown 1910) applied to one replicate's reliability R_1 = var_b / (var_b + var_e):
R_k = k R_1 / (1 + (k - 1) R_1). It equals :func:`gain_reliability` with each arm's standard error
s_r / sqrt(k), so both read on one scale; the page states which the study used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "GainReliability",
    "ReplicateReliability",
    "gain_reliability",
    "replicate_note",
    "replicate_reliability",
    "spearman_brown",
]


@dataclass(frozen=True)
class GainReliability:
    """The share of the gains' variance over arms that their standard errors do not explain."""

    n: int
    """Arms."""
    observed_var: float | None
    """Sample variance of the gains over arms (ddof 1); None with fewer than two arms."""
    mean_error_var: float | None
    """Mean over arms of the squared standard error; None with no arms."""
    reliability: float | None
    """max(0, 1 - mean_error_var / observed_var); None when observed_var is None or 0."""


def gain_reliability(gains: Sequence[float], standard_errors: Sequence[float]) -> GainReliability:
    """Reliability of the gains over arms given each gain's standard error (Lord & Novick 1968, ch. 3).

    R = 1 - mean(se^2) / var(gains), clipped at 0: a negative value means the errors alone explain more
    than the observed spread, i.e. no true spread is seen, not a negative variance.
    """
    g, se = np.asarray(gains, dtype=np.float64), np.asarray(standard_errors, dtype=np.float64)
    if g.shape != se.shape or g.ndim != 1:
        raise ValueError(f"need one standard error per gain, got {g.shape} and {se.shape}")
    if not np.isfinite(g).all():
        raise ValueError("gains must be finite")
    if not (np.isfinite(se).all() and (se >= 0.0).all()):
        raise ValueError("standard_errors must be finite and non-negative")
    n = len(g)
    mean_error_var = float(np.mean(se * se)) if n else None
    if n < 2:
        return GainReliability(n, None, mean_error_var, None)
    observed_var = float(np.var(g, ddof=1))
    if observed_var == 0.0 or mean_error_var is None:
        return GainReliability(n, observed_var, mean_error_var, None)
    reliability = max(0.0, 1.0 - mean_error_var / observed_var)
    return GainReliability(n, observed_var, mean_error_var, reliability)


def spearman_brown(single: float, k: float) -> float:
    """The reliability of a mean of ``k`` parallel measurements each of reliability ``single``:
    k r / (1 + (k - 1) r) (Spearman 1910; Brown 1910). Solved for ``single`` with ``k`` = 1 / k' it gives
    the one-measurement reliability a mean of k' needs: spearman_brown(R_k, 1 / k')."""
    if not 0.0 <= single <= 1.0:
        raise ValueError(f"a reliability lies in [0, 1], got {single!r}")
    if k <= 0:
        raise ValueError(f"k must be positive, got {k!r}")
    return k * single / (1.0 + (k - 1.0) * single)


@dataclass(frozen=True)
class ReplicateReliability:
    """The reliability of arms' mean gains over k pilot replicates, from the replicates' own spread."""

    n: int
    """Arms."""
    replicates: int
    """k, the replicates per arm."""
    observed_var: float | None
    """var(arm mean gains), ddof 1; None with fewer than two arms."""
    within_var: float | None
    """var_e: mean over arms of the replicates' variance (ddof 1), the error of one pilot's gain."""
    mean_error_var: float | None
    """var_e / k: the error variance of an arm's mean gain."""
    between_var: float | None
    """var_b = observed_var - var_e / k (may be negative: no true spread seen)."""
    reliability: float | None
    """R_k = max(0, var_b / observed_var) = max(0, 1 - var_e / (k observed_var)); None when undefined."""
    single_replicate: float | None
    """R_1 = max(0, var_b / (var_b + var_e)): one pilot's reliability; None when undefined."""


def replicate_reliability(replicate_gains: Sequence[Sequence[float]]) -> ReplicateReliability:
    """ICC(1,k) of the arms' mean gains from each arm's ``replicate_gains`` (the module docstring);
    every arm must have the same k >= 2 replicates."""
    counts = {len(g) for g in replicate_gains}
    if len(counts) > 1:
        raise ValueError(f"every arm needs the same number of replicates, got {sorted(counts)}")
    k = counts.pop() if counts else 0
    if replicate_gains and k < 2:
        raise ValueError(f"the replicate reliability needs at least 2 replicates per arm, got {k}")
    x = np.asarray(replicate_gains, dtype=np.float64).reshape(len(replicate_gains), k)
    if not np.isfinite(x).all():
        raise ValueError("replicate gains must be finite")
    n = x.shape[0]
    within = float(np.var(x, axis=1, ddof=1).mean()) if n else None
    error = None if within is None else within / k
    if n < 2 or within is None or error is None:
        return ReplicateReliability(n, k, None, within, error, None, None, None)
    observed = float(np.var(x.mean(axis=1), ddof=1))
    between = observed - error
    if observed == 0.0:
        return ReplicateReliability(n, k, observed, within, error, between, None, None)
    single = max(0.0, between / (between + within)) if between + within > 0 else None
    return ReplicateReliability(n, k, observed, within, error, between, max(0.0, between / observed), single)


def replicate_note(replicates: int, reliability: float) -> str:
    """What a registered reliability asks of one pilot when each gain is a mean of ``replicates``: the
    single-replicate reliability R_1 whose Spearman-Brown mean of k reaches it, R_1 = R_k / (k - (k - 1)
    R_k) (:func:`spearman_brown` with 1 / k), so a study states before it runs what its pilots must show."""
    single = spearman_brown(reliability, 1.0 / replicates)
    return (
        f"each arm's gain is the mean of {replicates} pilot replicates; the registered reliability "
        f"{reliability:g} of that mean holds when one pilot's reliability is at least {single:.3f} "
        f"(Spearman-Brown: R_k = k R_1 / (1 + (k - 1) R_1)); the page measures it from the replicates' spread"
    )
