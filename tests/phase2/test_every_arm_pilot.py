"""A validation design's pilot on every arm: the plan trains each arm in use on its own, whatever the gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.phase2.gate import plan_from_decision, read_plan, write_plan
from grpo_probe.phase2.report import _answer
from grpo_probe.prereg import load_prereg

from .conftest import write_design


def _decision(kind: str, ar_arm: str | None = None, flow_arm: str | None = None) -> dict:
    return {"outcome": {"kind": kind, "ar_arm": ar_arm, "flow_arm": flow_arm}}


@pytest.mark.parametrize(
    ("kind", "ar_arm", "flow_arm"),
    [("park", None, None), ("phase2_flow", None, "flow_teacher"), ("ar_then_flow", "ar", "flow_teacher")],
)
def test_every_arm_trains_each_arm_in_use_independently_whatever_the_decision(
    tmp_path: Path, kind: str, ar_arm: str | None, flow_arm: str | None
) -> None:
    prereg = load_prereg(write_design(tmp_path / "v.yaml", pilot="every_arm"))
    plan = plan_from_decision(prereg, _decision(kind, ar_arm, flow_arm))
    in_use = [a for a in prereg.arms_in_use() if prereg.arms[a].head in ("ar", "flow")]
    assert [s.arm for s in plan.stages] == in_use and len(in_use) >= 2
    assert all(s.after is None for s in plan.stages), "validation stages must not wait on each other"
    assert [s.head for s in plan.stages] == [prereg.arms[a].head for a in in_use]
    assert (plan.ar_arm, plan.flow_arm, plan.outcome) == (ar_arm, flow_arm, kind)
    assert "every_arm" in plan.reason and kind in plan.reason
    write_plan(plan, tmp_path / "plan.json")
    assert read_plan(tmp_path / "plan.json") == plan


def test_the_gated_pilot_is_unchanged_by_the_new_field(tmp_path: Path) -> None:
    gated = load_prereg(write_design(tmp_path / "g.yaml"))
    assert gated.phase2 is not None and gated.phase2.pilot == "gated"
    assert plan_from_decision(gated, _decision("park")).stages == ()
    flow = plan_from_decision(gated, _decision("phase2_flow", flow_arm="flow_teacher"))
    assert [s.arm for s in flow.stages] == ["flow_teacher"]


def test_an_unknown_pilot_scope_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"phase2\.pilot|pilot"):
        load_prereg(write_design(tmp_path / "bad.yaml", pilot="some_arms"))


def _stage(arm: str, verdict: str, predicted: bool) -> dict:
    return {
        "arm": arm,
        "head": "flow",
        "verdict": verdict,
        "sentence": f"{verdict}: (+1.00 cm, +0.10 to +2.00)",
        "guards_worse": [],
        "predicted": predicted,
    }


def test_the_verdict_reads_the_predicted_arm_and_lists_the_others() -> None:
    verdict, text = _answer(
        [_stage("flow_teacher", "held", True), _stage("flow_student", "did not hold", False)], "reason"
    )
    assert verdict == "held"
    assert text.startswith("Held. GRPO on arm flow_teacher")
    assert "Also trained, at the same compute (the decision did not name them): arm flow_student" in text
    verdict, text = _answer([_stage("flow_teacher", "held", False)], "reason")
    assert verdict == "not tested" and "the decision names no arm" in text
