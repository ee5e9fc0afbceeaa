"""The gate: what phase 2 trains, read from decision.json and the design's ``phase2:`` section.

Why a plan file: Snakemake decides which phase-2 jobs exist only after decision.json exists, through a
checkpoint rule whose output is this plan. The memo's routing (section 4) becomes stages in the
registered order: ``phase2_ar`` trains the AR arm, ``phase2_flow`` the flow arm, ``ar_then_flow`` the AR
arm first and the flow arm second; ``park`` trains nothing. A design without a ``phase2:`` section trains
nothing either, and the plan says which of the two reasons applies, so phase2.md can state it.

A validation design registers ``phase2.pilot: every_arm``: the same pilot then trains every arm an enabled
cell uses (whose head has a recipe), each on its own, at the same registered compute, whatever the
decision, because the study asks whether the probe's reads rank the arms as their gains do, and an arm the
gate would skip is exactly the contrast it needs. The plan still records the decision's arms
(``ar_arm``/``flow_arm``): they are the prediction under test.

Before any stage trains, the plan holds the guard-variance check of each trained arm
(:mod:`grpo_probe.phase2.guard_variance`): an arm whose penalised guard trips in every episode of nearly
every probe group is refused (:func:`apply_guard_checks`), and the reason says which cell, which guard
and how many groups. A gated pilot then trains nothing (its stages are the prediction together: the AR
stage of ``ar_then_flow`` comes before the flow stage), and phase2.md says why, as it does on ``park``;
a pilot on every arm trains the other arms, each on its own as always.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from grpo_probe.atomic_io import atomic_write_json
from grpo_probe.phase2.guard_variance import GuardCheck
from grpo_probe.prereg import Prereg

__all__ = [
    "OUTCOME_KINDS",
    "Phase2Plan",
    "Stage",
    "apply_guard_checks",
    "plan_from_decision",
    "read_plan",
    "write_plan",
]

OUTCOME_KINDS: dict[str, tuple[str, ...]] = {
    "park": (),
    "phase2_ar": ("ar",),
    "phase2_flow": ("flow",),
    "ar_then_flow": ("ar", "flow"),
    "not_decided": (),
}
"""Outcome kind of decision.json -> the heads phase 2 trains, in the registered order (memo section 4). A
go the design is too small to stand on (``not_decided``) trains nothing, as a park does."""


@dataclass(frozen=True)
class Stage:
    """One pilot: GRPO on ``arm`` (of ``head``); ``after`` is the arm of the stage that must finish first."""

    head: str
    arm: str
    after: str | None = None


@dataclass(frozen=True)
class Phase2Plan:
    """What phase 2 does for one design: the stages in order, or none and why."""

    prereg_sha256: str
    outcome: str
    ar_arm: str | None
    flow_arm: str | None
    registered: bool
    """Whether the design registers a ``phase2:`` section."""
    stages: tuple[Stage, ...]
    reason: str
    """One sentence: what is trained and why, or why nothing is."""
    guard_checks: tuple[GuardCheck, ...] = ()
    """The guard-variance check of each arm the decision had phase 2 train, before any was trained (none
    when the plan was made without the probe's tables)."""

    def stage(self, arm: str) -> Stage:
        """The stage training ``arm``; a ``ValueError`` says which arms the plan trains."""
        for stage in self.stages:
            if stage.arm == arm:
                return stage
        trained = ", ".join(s.arm for s in self.stages) or "none"
        raise ValueError(f"phase 2 does not train arm {arm!r}: the plan trains {trained} ({self.reason})")

    def to_dict(self) -> dict[str, Any]:
        """The plan as plan.json holds it."""
        return {
            "prereg_sha256": self.prereg_sha256,
            "outcome": self.outcome,
            "ar_arm": self.ar_arm,
            "flow_arm": self.flow_arm,
            "registered": self.registered,
            "stages": [{"head": s.head, "arm": s.arm, "after": s.after} for s in self.stages],
            "reason": self.reason,
            "guard_checks": [c.to_dict() for c in self.guard_checks],
        }


def _outcome(decision: Mapping[str, Any], where: str) -> tuple[str, str | None, str | None]:
    outcome = decision.get("outcome")
    if not isinstance(outcome, Mapping):
        raise ValueError(f"{where}: outcome is missing or not a mapping")
    kind = outcome.get("kind")
    if kind not in OUTCOME_KINDS:
        raise ValueError(f"{where}: outcome.kind is {kind!r}, expected one of {', '.join(OUTCOME_KINDS)}")
    arms = {head: outcome.get(f"{head}_arm") for head in ("ar", "flow")}
    for head in ("ar", "flow"):
        named = arms[head]
        if (head in OUTCOME_KINDS[kind]) != (named is not None):
            raise ValueError(
                f"{where}: outcome.{head}_arm is {named!r}, which does not fit outcome.kind {kind!r}"
            )
    return kind, arms["ar"], arms["flow"]


def _rule_outcome(decision: Mapping[str, Any], where: str) -> tuple[str, str | None, str | None]:
    """The go a ``not_decided`` outcome replaces (``outcome.rule``), checked as an outcome is."""
    rule = decision["outcome"].get("rule")
    if not isinstance(rule, Mapping):
        raise ValueError(
            f"{where}: outcome.kind is 'not_decided' but outcome.rule (the rule's go) is missing"
        )
    return _outcome({"outcome": rule}, f"{where} (outcome.rule)")


def plan_from_decision(
    prereg: Prereg, decision: Mapping[str, Any], where: str = "decision.json"
) -> Phase2Plan:
    """The plan for ``prereg`` given its decision; checks that the decision's arms are registered arms."""
    kind, ar_arm, flow_arm = _outcome(decision, where)
    phase2 = prereg.phase2
    wiring = kind == "not_decided" and phase2 is not None and phase2.pilot == "named_arms"
    if wiring:
        kind, ar_arm, flow_arm = _rule_outcome(decision, where)  # the rule's go, for a wiring pilot
    arms = {"ar": ar_arm, "flow": flow_arm}
    for head, arm in arms.items():
        if arm is not None and prereg.arms.get(arm) is None:
            raise ValueError(f"{where}: outcome.{head}_arm {arm!r} is not an arm of {prereg.path}")
        if arm is not None and prereg.arms[arm].head != head:
            raise ValueError(
                f"{where}: outcome.{head}_arm {arm!r} has head {prereg.arms[arm].head!r} in {prereg.path}"
            )
    if phase2 is not None and phase2.pilot == "every_arm":
        return _every_arm_plan(prereg, kind, ar_arm, flow_arm)
    common = {
        "prereg_sha256": prereg.sha256,
        "outcome": kind,
        "ar_arm": ar_arm,
        "flow_arm": flow_arm,
        "registered": phase2 is not None,
    }
    if phase2 is None:
        reason = (
            f"the design {prereg.name} registers no phase2 section, so no phase 2 runs "
            f"(the decision was {kind})"
        )
        return Phase2Plan(**common, stages=(), reason=reason)
    if kind == "park":
        reason = "the decision parks GRPO-on-sim (no cell qualified), so nothing is trained"
        return Phase2Plan(**common, stages=(), reason=reason)
    if kind == "not_decided":
        reason = (
            "the design is too small to hold its false-go target, so its go is not decided and nothing is "
            "trained (decision.md says the size that would hold it)"
        )
        return Phase2Plan(**common, stages=(), reason=reason)
    missing = [head for head in OUTCOME_KINDS[kind] if head not in phase2.heads]
    if missing:
        raise ValueError(
            f"{prereg.path}: the decision ({kind}) trains the {' and '.join(missing)} head, but "
            f"phase2.heads registers no recipe for it"
        )
    stages: list[Stage] = []
    for head in OUTCOME_KINDS[kind]:
        after = stages[-1].arm if stages else None
        stages.append(Stage(head=head, arm=str(arms[head]), after=after))
    trained = " then ".join(f"{s.head} arm {s.arm}" for s in stages)
    if wiring:
        reason = (
            f"the design is too small to decide, and its pilot checks the machinery (phase2.pilot: "
            f"named_arms): the rule gives {kind}, so GRPO on the {trained} it names"
        )
        return Phase2Plan(**common, stages=tuple(stages), reason=reason)
    return Phase2Plan(**common, stages=tuple(stages), reason=f"the decision is {kind}: GRPO on the {trained}")


def _every_arm_plan(prereg: Prereg, kind: str, ar_arm: str | None, flow_arm: str | None) -> Phase2Plan:
    """Every arm in use whose head has a recipe, one independent stage each, in registered arm order."""
    phase2 = prereg.phase2
    assert phase2 is not None
    stages = tuple(
        Stage(head=prereg.arms[arm].head, arm=arm)
        for arm in prereg.arms_in_use()
        if prereg.arms[arm].head in phase2.heads
    )
    if not stages:
        raise ValueError(
            f"{prereg.path}: phase2.pilot is every_arm, but no arm in use has a head that phase2.heads "
            f"registers a recipe for (heads: {', '.join(phase2.heads)})"
        )
    named = [arm for arm in (ar_arm, flow_arm) if arm is not None]
    prediction = f"the decision's arm(s) {', '.join(named)}" if named else "no arm (the decision parks)"
    trained = ", ".join(f"{s.arm} ({s.head})" for s in stages)
    reason = (
        f"the design registers the pilot on every arm (phase2.pilot: every_arm), so GRPO trains {trained} "
        f"at the same registered compute; the decision is {kind} and names {prediction}"
    )
    return Phase2Plan(
        prereg_sha256=prereg.sha256,
        outcome=kind,
        ar_arm=ar_arm,
        flow_arm=flow_arm,
        registered=True,
        stages=stages,
        reason=reason,
    )


def apply_guard_checks(prereg: Prereg, plan: Phase2Plan, checks: Sequence[GuardCheck]) -> Phase2Plan:
    """The plan with ``checks`` recorded and the arms they refuse taken out.

    A gated pilot with a refused arm trains nothing, its reason the refusals (the decision's stages are
    one prediction, trained in order); a pilot on every arm (``phase2.pilot: every_arm``) drops the
    refused arms and trains the others, its reason followed by the refusals.
    """
    refusals = [(c.arm, text) for c in checks if (text := c.refusal()) is not None]
    if not refusals:
        return replace(plan, guard_checks=tuple(checks))
    refused = {arm for arm, _ in refusals}
    why = "; ".join(text for _, text in refusals)
    every_arm = prereg.phase2 is not None and prereg.phase2.pilot == "every_arm"
    if every_arm:
        stages = tuple(s for s in plan.stages if s.arm not in refused)
        reason = f"{plan.reason}; but {why}"
    else:
        stages = ()
        reason = f"{why}; so nothing is trained (the decision is {plan.outcome})"
    return replace(plan, stages=stages, reason=reason, guard_checks=tuple(checks))


def write_plan(plan: Phase2Plan, path: str | os.PathLike[str]) -> None:
    """Write plan.json atomically (sorted keys, so the bytes depend only on the plan)."""
    atomic_write_json(path, plan.to_dict())


def read_plan(path: str | os.PathLike[str]) -> Phase2Plan:
    """Read plan.json back; a missing or malformed file is an error naming it."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        stages = tuple(Stage(s["head"], s["arm"], s["after"]) for s in raw["stages"])
        return Phase2Plan(
            prereg_sha256=raw["prereg_sha256"],
            outcome=raw["outcome"],
            ar_arm=raw["ar_arm"],
            flow_arm=raw["flow_arm"],
            registered=bool(raw["registered"]),
            stages=stages,
            reason=raw["reason"],
            guard_checks=tuple(GuardCheck.from_dict(c) for c in raw.get("guard_checks", [])),
        )
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: phase-2 plan not found") from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a phase-2 plan ({type(exc).__name__}: {exc})") from None
