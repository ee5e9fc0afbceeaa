"""How likely a validation study of a given shape is to find a real ordering: its power, by simulation.

Why: a study is registered before its pilots run, and the number of designs and of arms in each is the
costly choice. With a handful of designs, noisy pilot gains and an interval that resamples designs
(:func:`grpo_probe.study.nested.nested_rank_correlation`), a true rank correlation of moderate size can
easily go unseen; the registration should state how often it would be seen, as a trial states its power.

The model, per simulated study and per design d of n_d arms: each arm has a latent read x and a latent
true gain t, standard bivariate normal with Pearson correlation

    r = 2 sin(pi rho / 6),

the normal-copula relation between Spearman's rho_s and Pearson's r (Pearson 1907, "On further methods
of determining correlation", Drapers' Company Research Memoirs; Kruskal 1958, "Ordinal measures of
association", JASA 53), so that the population Spearman rho of (x, t) is ``rho``. The pilot sees
the gain with error, g = t + e, e ~ N(0, (1 - R) / R), so that var(t) / var(g) = R, the gain's
``reliability`` (classical test theory, Lord & Novick 1968, *Statistical Theories of Mental Test Scores*,
ch. 3; see :mod:`grpo_probe.study.reliability` for R from a study's own gains). Designs here are
exchangeable and carry no effect of their own, so the simulated power is that of a study whose scenes do
not differ as wholes; the nested interval still pays for resampling them.

A simulated study detects the ordering when its nested bootstrap interval lies above zero (ci_low > 0),
computed by the same function as for a real study. Power is the share of simulated studies that detect,
with its Wilson interval over the simulations (Wilson 1927). Simulation i draws from the generator keyed
(seed, "study", "power", i), and its bootstrap seed comes from that generator, so simulation i is the same
whatever the number of simulations, and studies of the same shape share their draws across rho and R
(common random numbers: power curves over rho and R are smooth rather than jittery).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from grpo_probe.analysis.error_rates.operating import wilson_interval
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.study.nested import nested_rank_correlation

if TYPE_CHECKING:
    from grpo_probe.study.design import Study

__all__ = ["StudyPower", "registered_power", "study_power"]

_SEED_BOUND = 1 << 63
"""Bootstrap seeds are drawn in [0, 2**63)."""


@dataclass(frozen=True)
class StudyPower:
    """Share of simulated studies of one shape whose nested interval for rho lies above zero."""

    rho: float
    """Population Spearman rho between the read and the true gain."""
    reliability: float
    """var(true gain) / var(observed gain)."""
    group_sizes: tuple[int, ...]
    """Arms in each design."""
    simulations: int
    resamples: int
    """Bootstrap resamples of each simulated study's interval."""
    detected: int
    power: float
    ci_low: float
    ci_high: float
    confidence: float
    """Of both the bootstrap interval of each simulated study and the Wilson interval of the power."""


def _group_sizes(group_sizes: Sequence[int]) -> tuple[int, ...]:
    """The designs' arm counts as integers: at least two designs, each of at least one arm."""
    sizes = tuple(group_sizes)
    if len(sizes) < 2:
        raise ValueError(f"group_sizes needs at least 2 designs, got {len(sizes)}")
    if any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in sizes):
        raise ValueError(f"group_sizes must be integers of at least 1, got {sizes!r}")
    return tuple(int(s) for s in sizes)


def study_power(
    group_sizes: Sequence[int],
    *,
    rho: float,
    reliability: float,
    simulations: int,
    resamples: int,
    confidence: float,
    seed: int,
) -> StudyPower:
    """Power of the nested bootstrap interval to exclude zero, for designs of ``group_sizes`` arms each."""
    if not (isinstance(rho, (int, float)) and -1.0 < rho < 1.0):
        raise ValueError(f"rho must lie in (-1, 1), got {rho!r}")
    if not (isinstance(reliability, (int, float)) and 0.0 < reliability <= 1.0):
        raise ValueError(f"reliability must lie in (0, 1], got {reliability!r}")
    sizes = _group_sizes(group_sizes)
    for name, value in (("simulations", simulations), ("resamples", resamples)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer of at least 1, got {value!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    n = sum(sizes)
    groups = np.repeat(np.arange(len(sizes)), sizes).tolist()
    r = 2.0 * math.sin(math.pi * rho / 6.0)  # Pearson's r of the normal pair whose Spearman rho is rho
    spread = math.sqrt(1.0 - r * r)
    error_sd = math.sqrt((1.0 - reliability) / reliability)  # var(t) = 1, so var(t) / var(t + e) = R
    detected = 0
    for i in range(simulations):
        rng = numpy_generator(seed, tag("study"), tag("power"), i)
        z = rng.standard_normal((2, n))
        read = z[0]
        true_gain = r * z[0] + spread * z[1]
        gain = true_gain + error_sd * rng.standard_normal(n)
        boot_seed = int(rng.integers(0, _SEED_BOUND))
        result = nested_rank_correlation(
            "power", read, gain, groups, seed=boot_seed, resamples=resamples, confidence=confidence
        )
        if result.ci_low is not None and result.ci_low > 0.0:
            detected += 1
    low, high = wilson_interval(detected, simulations, confidence)
    return StudyPower(
        rho=float(rho),
        reliability=float(reliability),
        group_sizes=sizes,
        simulations=simulations,
        resamples=resamples,
        detected=detected,
        power=detected / simulations,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
    )


def registered_power(
    study: Study, sizes: Sequence[int], reliability: float | None = None
) -> StudyPower | None:
    """The power of ``study``'s registered simulation (its ``power:``) for designs of ``sizes`` subject
    arms, at ``reliability`` (default: the registered one); None where the study registers no power or
    there are fewer than two designs to nest.

    Why one call: the study's check (at the registered size) and its inference (at the counted arms, at
    the registered and the measured reliability) must simulate with the same registered numbers.
    """
    spec = study.power
    if spec is None or len(sizes) < 2:
        return None
    return study_power(
        sizes,
        rho=spec.rho,
        reliability=spec.reliability if reliability is None else reliability,
        simulations=spec.simulations,
        resamples=spec.resamples,
        confidence=study.confidence,
        seed=spec.seed,
    )
