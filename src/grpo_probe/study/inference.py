"""What the study concludes from its rows: which arms count, the rank correlations, the study's power, the
gains' reliability and the probe's calls as a classifier.

Why in one place: every number on the page's top is computed over the same arms, the **counted** arms:
subject arms that engage (their cell moved the object in at least the registered share of episodes) and
whose pilot moved the policy (an unmoved arm's held-out change is the held-out draws' luck, not a gain).
Controls are sanity checks with their own verdict lines; they never enter the correlation, since a smooth
plane and a luck plane at the two ends of both axes would make any read look predictive.

The study's verdict is the one it registers (``answer``):

- ``pooled`` (every study registered before the field): Spearman's rho over all counted arms with the
  registered interval (``bootstrap.levels``): the two-stage bootstrap over designs then arms
  (:mod:`grpo_probe.study.nested`) when arms are nested in designs, the arm bootstrap otherwise;
- ``within_designs``: the mean over designs of each design's own rho, tested by shuffling the gains only
  among the arms of each design (:func:`grpo_probe.study.within_stats.within_design`, the function the
  exploratory page uses, with the study's registered seed, resamples and permutations), Yes when the
  one-sided p < alpha = 1 - confidence. Why: a lab chooses among the arms of one scene, and across designs
  of different sizes the pooled rho orders the scenes (reads and gains in cm both follow scene scale) as
  much as the arms; it stays on the page as a secondary, not the answer.

The power is simulated for the registered answer at the counted arms per design
(:mod:`grpo_probe.study.power`), at the registered reliability and at the one this run measured, so the
page can say how often a study of its own size would detect the registered rho.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grpo_probe.study.classify import Classification, classification
from grpo_probe.study.design import Study
from grpo_probe.study.nested import (
    PermutationTest,
    nested_rank_correlation,
    within_design_permutation,
    within_design_rho,
)
from grpo_probe.study.power import StudyPower, registered_power
from grpo_probe.study.ranks import RankCorrelation, rank_correlation
from grpo_probe.study.reliability import (
    GainReliability,
    ReplicateReliability,
    gain_reliability,
    replicate_reliability,
)
from grpo_probe.study.rows import ArmRow
from grpo_probe.study.within_stats import DesignMean, within_design

__all__ = ["StudyInference", "WithinAnswer", "counted", "infer"]

MIN_RELIABILITY_FOR_POWER = 0.05
"""Below this measured reliability the gains carry no ordering to detect; no power is simulated at it."""


@dataclass(frozen=True)
class WithinAnswer:
    """The registered within-designs answer: does the predictor order the arms inside each design?"""

    test: DesignMean
    """The mean over designs of each design's own Spearman rho (designs of at least three counted arms),
    its percentile interval over a bootstrap of designs and its one-sided stratified permutation p-value,
    p = (1 + #{b : T_b >= T}) / (1 + B) (Phipson & Smyth 2010)."""
    alpha: float
    """The test's one-sided level, 1 - the registered confidence."""
    permutations: int
    verdict: str | None
    """"Yes" when p < alpha, "No" otherwise; None when no design has three counted arms with the read
    (nothing to order inside a design)."""


@dataclass(frozen=True)
class StudyInference:
    """Everything the page's top states, over the counted arms."""

    counted: int
    """Subject arms that engage and whose pilot moved the policy."""
    arms_per_design: dict[str, int]
    correlations: list[RankCorrelation]
    """One per read, the predictor's with the registered interval; the others likewise."""
    primary: RankCorrelation
    permutation: PermutationTest | None
    within_design_rho: float | None
    reliability: GainReliability | ReplicateReliability
    """From the pilot replicates' spread when every counted arm has replicates, else from standard errors."""
    power_registered: StudyPower | None
    """At the registered reliability; None without a registered power simulation or with fewer than two
    designs of counted arms."""
    power_measured: StudyPower | None
    """At the reliability this run measured; None when that is unknown or below
    :data:`MIN_RELIABILITY_FOR_POWER`."""
    classification: Classification
    reached_size: bool
    """Whether the counted arms reach the registered ``min_subject_arms`` (True when none is registered)."""
    within: WithinAnswer | None = None
    """The verdict of a study that registers ``answer: within_designs``; None for a pooled answer, whose
    verdict is :attr:`primary`'s interval."""


def counted(rows: Sequence[ArmRow]) -> list[ArmRow]:
    """The arms the study ranks: subjects that engage and whose pilot moved the policy."""
    return [r for r in rows if r.role == "subject" and r.engages and r.moved]


def _correlation(study: Study, read: str, arms: Sequence[ArmRow]) -> RankCorrelation:
    usable = [r for r in arms if r.reads[read] is not None]
    values = [float(r.reads[read]) for r in usable]  # type: ignore[arg-type]
    gains = [r.gain for r in usable]
    if study.levels == "designs_then_arms" and len(usable) >= 3:
        return nested_rank_correlation(
            read,
            values,
            gains,
            [r.design for r in usable],
            seed=study.seed,
            resamples=study.resamples,
            confidence=study.confidence,
        )
    return rank_correlation(
        read, values, gains, seed=study.seed, resamples=study.resamples, confidence=study.confidence
    )


def _reliability(arms: Sequence[ArmRow]) -> GainReliability | ReplicateReliability:
    """From the replicates' spread when every counted arm has two or more pilot replicates (ICC(1,k),
    :func:`grpo_probe.study.reliability.replicate_reliability`), else from each gain's standard error over
    held-out seeds (:func:`grpo_probe.study.reliability.gain_reliability`)."""
    if arms and all(len(r.replicate_gains) >= 2 for r in arms):
        return replicate_reliability([r.replicate_gains for r in arms])
    with_se = [r for r in arms if r.gain_se is not None]
    return gain_reliability([r.gain for r in with_se], [float(r.gain_se) for r in with_se])  # type: ignore[arg-type]


def _within_answer(
    study: Study, values: Sequence[float], gains: Sequence[float], designs: Sequence[str]
) -> WithinAnswer | None:
    """The registered within-designs answer, or None for a study whose answer is pooled."""
    if study.answer != "within_designs":
        return None
    if study.permutations is None:  # load_study refuses this; a Study built by hand may not
        raise ValueError(f"{study.path}: bootstrap.permutations: answer: within_designs needs permutations")
    test = within_design(
        study.predictor,
        values,
        gains,
        designs,
        seed=study.seed,
        resamples=study.resamples,
        confidence=study.confidence,
        permutations=study.permutations,
    )
    alpha = 1.0 - study.confidence
    verdict = None if test.p_value is None else ("Yes" if test.p_value < alpha else "No")
    return WithinAnswer(test=test, alpha=alpha, permutations=study.permutations, verdict=verdict)


def infer(study: Study, rows: Sequence[ArmRow]) -> StudyInference:
    """The study's conclusions from its rows (see the module docstring for which arms count)."""
    arms = counted(rows)
    correlations = [_correlation(study, read, arms) for read in study.reads]
    primary = next(c for c in correlations if c.read == study.predictor)
    ranked = [r for r in arms if r.reads[study.predictor] is not None]
    values = [float(r.reads[study.predictor]) for r in ranked]  # type: ignore[arg-type]
    gains = [r.gain for r in ranked]
    designs = [r.design for r in ranked]
    permutation = (
        within_design_permutation(
            study.predictor, values, gains, designs, seed=study.seed, permutations=study.permutations
        )
        if study.permutations is not None and len(ranked) >= 3
        else None
    )
    reliability = _reliability(arms)
    per_design = {d: sum(1 for r in arms if r.design == d) for d in dict.fromkeys(r.design for r in arms)}
    sizes = list(per_design.values())
    power_registered = registered_power(study, sizes)
    measured = reliability.reliability
    power_measured = (
        registered_power(study, sizes, min(1.0, measured))
        if measured is not None and measured >= MIN_RELIABILITY_FOR_POWER
        else None
    )
    calls = classification([r.qualifies for r in arms], [r.gained for r in arms], study.confidence)
    return StudyInference(
        counted=len(arms),
        arms_per_design=per_design,
        correlations=correlations,
        primary=primary,
        permutation=permutation,
        within_design_rho=within_design_rho(values, gains, designs) if ranked else None,
        reliability=reliability,
        power_registered=power_registered,
        power_measured=power_measured,
        classification=calls,
        reached_size=study.min_subject_arms is None or len(arms) >= study.min_subject_arms,
        within=_within_answer(study, values, gains, designs),
    )
