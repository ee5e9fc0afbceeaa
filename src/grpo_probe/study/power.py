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

A simulated study detects the ordering by its registered answer (the study's ``answer``), computed by the
same function as for a real study:

- ``pooled``: its nested bootstrap interval of the pooled rho lies above zero (ci_low > 0);
- ``within_designs``: the one-sided stratified permutation test of the mean within-design rho
  (:func:`grpo_probe.study.within_stats.within_design`: gains shuffled only among the arms of each design,
  p = (1 + #{b : T_b >= T}) / (1 + B), Phipson & Smyth 2010) gives p < alpha = 1 - confidence. The
  construction above is per arm, so inside every design the population Spearman rho of read and true gain
  is ``rho`` too: each design's own true rho is the registered one. Designs carry no effect of their own
  here, and for this answer that loses nothing: adding a design's constant to its reads and to its gains
  leaves every within-design rank, so every within-design rho and every permutation, unchanged. The
  reliability is then the within-design one (true-gain variance among a design's arms over their
  observed-gain variance). Designs of fewer than three arms have no rho of their own and do not enter.

Power is the share of simulated studies that detect, with its Wilson interval over the simulations
(Wilson 1927). Simulation i draws from the generator keyed (seed, "study", "power", i), and its bootstrap
(or permutation) seed comes from that generator, so simulation i is the same whatever the number of
simulations, and studies of the same shape share their draws across rho and R
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
from grpo_probe.study.within_stats import MIN_ARMS, within_design

if TYPE_CHECKING:
    from grpo_probe.study.design import Study

__all__ = ["MAX_SIMULATED_PERMUTATIONS", "StudyPower", "registered_power", "study_power"]

_SEED_BOUND = 1 << 63
"""Bootstrap seeds are drawn in [0, 2**63)."""
MAX_SIMULATED_PERMUTATIONS = 999
"""The within-design test of each simulated study runs at the registered permutations or this many,
whichever is fewer: the power simulation runs it hundreds of times, and at 999 permutations p resolves to
1 / 1000, far below any registered alpha, so the share of p < alpha barely moves (the study's own test
runs at the registered number)."""


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
    answer: str = "pooled"
    """Which registered answer detects: ``pooled`` (the nested interval above zero) or ``within_designs``
    (the within-design permutation p below 1 - confidence)."""
    permutations: int | None = None
    """Permutations of each simulated study's within-design test (:data:`MAX_SIMULATED_PERMUTATIONS` at
    most); None for the pooled answer."""


def _group_sizes(group_sizes: Sequence[int], answer: str) -> tuple[int, ...]:
    """The designs' arm counts as integers, each of at least one arm: at least two designs for the pooled
    answer (its interval resamples designs), at least one of :data:`MIN_ARMS` arms for the within one."""
    sizes = tuple(group_sizes)
    if answer == "pooled" and len(sizes) < 2:
        raise ValueError(f"group_sizes needs at least 2 designs, got {len(sizes)}")
    if any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in sizes):
        raise ValueError(f"group_sizes must be integers of at least 1, got {sizes!r}")
    if answer == "within_designs" and not any(s >= MIN_ARMS for s in sizes):
        raise ValueError(f"group_sizes needs a design of at least {MIN_ARMS} arms, got {sizes!r}")
    return tuple(int(s) for s in sizes)


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer of at least 1, got {value!r}")


def study_power(
    group_sizes: Sequence[int],
    *,
    rho: float,
    reliability: float,
    simulations: int,
    resamples: int,
    confidence: float,
    seed: int,
    answer: str = "pooled",
    permutations: int | None = None,
) -> StudyPower:
    """Power of the registered ``answer`` for designs of ``group_sizes`` arms each: of the nested bootstrap
    interval to exclude zero (``pooled``), or of the within-design permutation test, at ``permutations``
    (capped at :data:`MAX_SIMULATED_PERMUTATIONS`), to give p < 1 - ``confidence`` (``within_designs``)."""
    if not (isinstance(rho, (int, float)) and -1.0 < rho < 1.0):
        raise ValueError(f"rho must lie in (-1, 1), got {rho!r}")
    if not (isinstance(reliability, (int, float)) and 0.0 < reliability <= 1.0):
        raise ValueError(f"reliability must lie in (0, 1], got {reliability!r}")
    if answer not in ("pooled", "within_designs"):
        raise ValueError(f"answer must be pooled or within_designs, got {answer!r}")
    sizes = _group_sizes(group_sizes, answer)
    _check_count("simulations", simulations)
    _check_count("resamples", resamples)
    simulated_permutations = None
    if answer == "within_designs":
        if permutations is None:
            raise ValueError("permutations must be given for the within_designs answer")
        _check_count("permutations", permutations)
        simulated_permutations = min(int(permutations), MAX_SIMULATED_PERMUTATIONS)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    n = sum(sizes)
    groups = [f"d{d}" for d, size in enumerate(sizes) for _ in range(size)]
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
        if simulated_permutations is not None:
            within = within_design(
                "power",
                read,
                gain,
                groups,
                seed=boot_seed,
                resamples=resamples,
                confidence=confidence,
                permutations=simulated_permutations,
            )
            # one-sided at alpha = 1 - confidence, as the study's verdict says Yes when p < alpha
            if within.p_value is not None and within.p_value < 1.0 - confidence:
                detected += 1
            continue
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
        answer=answer,
        permutations=simulated_permutations,
    )


def registered_power(
    study: Study, sizes: Sequence[int], reliability: float | None = None
) -> StudyPower | None:
    """The power of ``study``'s registered simulation (its ``power:``) of its registered answer for designs
    of ``sizes`` subject arms, at ``reliability`` (default: the registered one); None where the study
    registers no power, or where there is nothing to simulate: fewer than two designs to nest (pooled), no
    design of :data:`MIN_ARMS` arms (within designs).

    Why one call: the study's check (at the registered size) and its inference (at the counted arms, at
    the registered and the measured reliability) must simulate with the same registered numbers.
    """
    spec = study.power
    if spec is None:
        return None
    if study.answer == "within_designs" and not any(s >= MIN_ARMS for s in sizes):
        return None
    if study.answer == "pooled" and len(sizes) < 2:
        return None
    return study_power(
        sizes,
        rho=spec.rho,
        reliability=spec.reliability if reliability is None else reliability,
        simulations=spec.simulations,
        resamples=spec.resamples,
        confidence=study.confidence,
        seed=spec.seed,
        answer=study.answer,
        permutations=study.permutations,
    )
