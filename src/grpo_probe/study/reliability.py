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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["GainReliability", "gain_reliability"]


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
