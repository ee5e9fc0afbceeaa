"""The sentences at the top of a study's page: its power, its registered answer, and what sits beside it.

Why a module of its own: the page (:mod:`grpo_probe.study.report`) words two kinds of answer. A study
registered before ``answer`` existed, or with ``answer: pooled``, answers with the pooled rho's interval
and shows the within-design test beside it; a study with ``answer: within_designs`` answers with the
within-design permutation test of the mean rho inside designs, leads with that line, and shows the pooled
rho after it as a secondary, labelled as carried across scenes (designs of different scale order scenes,
not arms). Each power line says which answer it simulated.
"""

from __future__ import annotations

from grpo_probe.study.design import Study
from grpo_probe.study.inference import StudyInference
from grpo_probe.study.within_stats import MIN_ARMS

__all__ = [
    "answer_text",
    "pct",
    "per_design_text",
    "pooled_secondary",
    "power_text",
    "within_answer_text",
    "within_text",
]


def pct(x: float | None) -> str:
    """A share as a whole percentage, "n/a" when there is none."""
    return "n/a" if x is None else f"{100.0 * x:.0f} %"


def answer_text(study: Study, inference: StudyInference) -> str:
    """The pooled answer's line: Yes, No, Not shown or Not answered, on the registered interval."""
    primary = inference.primary
    size = (
        ""
        if inference.reached_size
        else f"The study did not reach its registered size ({inference.counted} of {study.min_subject_arms} "
        "counted subject arms), so what follows is not the registered answer. "
    )
    if primary.rho is None:
        return size + (
            f"Not answered: {primary.n} counted subject arm(s) with a {study.predictor} read leave no "
            "ordering to compare (it needs three arms and neither column constant)."
        )
    interval = (
        f"{primary.confidence:.0%} interval {primary.ci_low:+.2f} to {primary.ci_high:+.2f}"
        if primary.ci_low is not None and primary.ci_high is not None
        else "no interval"
    )
    head = (
        f"Spearman's rho of {study.predictor} against the held-out gain is {primary.rho:+.2f} over "
        f"{primary.n} subject arms ({interval}, {primary.inference})"
    )
    if primary.ci_low is not None and primary.ci_low > 0:
        return size + f"Yes, the probe's ordering matches the gains': {head}, above zero."
    if primary.ci_high is not None and primary.ci_high < 0:
        return size + f"No, the probe's ordering runs against the gains': {head}, below zero."
    return size + f"Not shown: {head}, which holds zero."


def within_answer_text(study: Study, inference: StudyInference) -> str:
    """The registered within-designs answer's line: verdict, mean within rho, permutation p, power."""
    size = (
        ""
        if inference.reached_size
        else f"The study did not reach its registered size ({inference.counted} of {study.min_subject_arms} "
        "counted subject arms), so what follows is not the registered answer. "
    )
    answer = inference.within
    if answer is None or answer.verdict is None or answer.test.mean is None:
        return size + (
            f"Within designs: not answered; no design has {MIN_ARMS} counted subject arms with a "
            f"{study.predictor} read, so no design orders arms of its own."
        )
    test = answer.test
    interval = (
        f"[{test.ci_low:+.2f}, {test.ci_high:+.2f}]"
        if test.ci_low is not None and test.ci_high is not None
        else "[no interval: one design]"
    )
    power = inference.power_registered
    at_power = (
        "at registered power not stated (no power simulation registered)"
        if study.power is None or power is None
        else f"at registered power {pct(power.power)} [{pct(power.ci_low)}, {pct(power.ci_high)}] for a "
        f"true within-design rho of {study.power.rho:g}"
    )
    meaning = (
        "the probe's read orders the arms inside a scene as their gains order them"
        if answer.verdict == "Yes"
        else "the probe's read is not shown to order the arms inside a scene as their gains order them"
    )
    return size + (
        f"Within designs: {answer.verdict}, mean within rho {test.mean:+.2f} {interval}, permutation "
        f"p = {test.p_value:.3g} {at_power}. {meaning[0].upper()}{meaning[1:]}: the mean over "
        f"{len(test.designs)} designs of each design's own Spearman rho of {study.predictor} against the "
        f"held-out gain ({test.arms} counted subject arms; {study.confidence:.0%} percentile interval over a "
        f"bootstrap of designs), tested one-sided by shuffling the gains only among the arms of each design "
        f"({answer.permutations} permutations); Yes when p < {answer.alpha:.3g}."
    )


def per_design_text(inference: StudyInference) -> str:
    """Each design's own rho behind the within-designs answer, and which designs it could not use."""
    answer = inference.within
    if answer is None or not answer.test.designs:
        return ""
    test = answer.test
    each = ", ".join(f"{d} {r:+.2f}" for d, r in zip(test.designs, test.per_design, strict=True))
    text = f"Each design's own rho: {each}."
    if test.flat:
        text += f" Flat (a constant column orders nothing; counted as 0): {', '.join(test.flat)}."
    small = [d for d, n in inference.arms_per_design.items() if d not in test.designs]
    if small:
        text += f" Fewer than {MIN_ARMS} counted arms, no rho of their own, left out: {', '.join(small)}."
    return text


def pooled_secondary(study: Study, inference: StudyInference) -> str:
    """The pooled rho beside a within-designs answer: shown, and labelled as what it is."""
    primary = inference.primary
    if primary.rho is None:
        return "Pooled over designs (secondary, not the answer): no ordering to compare."
    interval = (
        f"{primary.confidence:.0%} interval {primary.ci_low:+.2f} to {primary.ci_high:+.2f}"
        if primary.ci_low is not None and primary.ci_high is not None
        else "no interval"
    )
    return (
        f"Pooled over designs (secondary, not the answer): Spearman's rho of {study.predictor} against the "
        f"held-out gain over all {primary.n} counted subject arms is {primary.rho:+.2f} ({interval}, "
        f"{primary.inference}). It is carried across scenes: designs differ in scale (reads and gains in cm "
        "both grow with the scene), so a pooled rho orders the scenes as much as the arms, while a lab "
        "chooses among the arms of one scene."
    )


def power_text(study: Study, inference: StudyInference) -> str:
    """How often a study of this size detects the registered rho by its registered answer."""
    if study.power is None:
        return (
            "Power: not stated; the study registers no power simulation, so how often a study of its size "
            "would detect an ordering is unknown."
        )
    shape = ", ".join(f"{d} {n}" for d, n in inference.arms_per_design.items()) or "none"
    registered = inference.power_registered
    within = study.answer == "within_designs"
    if registered is None:
        return (
            f"Power: not simulated; no design has {MIN_ARMS} counted subject arms ({inference.counted}: "
            f"{shape}), so no design orders arms of its own."
            if within
            else f"Power: not simulated; the counted subject arms ({inference.counted}: {shape}) come from "
            "fewer than two designs, so the nested interval has no designs to resample."
        )
    detects = (
        f"a true within-design Spearman rho of {study.power.rho:g} (the within-design permutation p below "
        f"{1.0 - study.confidence:.3g}, {registered.permutations} permutations per simulated study)"
        if within
        else f"a true Spearman rho of {study.power.rho:g} (its interval above zero)"
    )
    text = (
        f"Power: a study of this size ({inference.counted} counted subject arms over "
        f"{len(inference.arms_per_design)} designs: {shape}) detects {detects} in {pct(registered.power)} "
        f"[{pct(registered.ci_low)}, {pct(registered.ci_high)}] of {registered.simulations} simulated "
        f"runs at the registered gain reliability {study.power.reliability:g}"
    )
    measured = inference.power_measured
    if measured is not None:
        text += (
            f", and in {pct(measured.power)} [{pct(measured.ci_low)}, {pct(measured.ci_high)}] at the "
            f"reliability this run measured ({measured.reliability:.2f})"
        )
        if within:
            text += (
                ", which is measured over all counted arms and so counts the spread between designs too: "
                "the reliability inside a design may be lower"
            )
    elif inference.reliability.reliability is not None:
        text += (
            f"; at the reliability this run measured ({inference.reliability.reliability:.2f}) the gains "
            "carry almost no ordering to detect"
        )
    return text + "."


def within_text(study: Study, inference: StudyInference) -> str:
    """Beside a pooled answer: the arm-weighted within-design rho and the pooled rho's within-design
    permutation test, which tell an ordering of arms from an ordering of scenes."""
    parts = []
    if inference.within_design_rho is not None:
        parts.append(
            f"Inside designs the ordering is {inference.within_design_rho:+.2f} (each design's own rho, "
            "weighted by its arms)"
        )
    test = inference.permutation
    if test is not None and test.p_value is not None:
        parts.append(
            f"a permutation test that shuffles the gains only among the arms of each design gives one-sided "
            f"p = {test.p_value:.3g} ({test.permutations} permutations)"
        )
    if not parts:
        return ""
    text = "; ".join(parts) + "."
    return text[0].upper() + text[1:]
