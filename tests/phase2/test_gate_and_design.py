"""The phase2 section of a design, and the gate that turns decision.json into what phase 2 trains."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.phase2.gate import plan_from_decision
from grpo_probe.prereg import Prereg, load_prereg
from grpo_probe.prereg.phase2 import Phase2Error

from .conftest import REPO, write_design


def _decision(kind: str, ar_arm: str | None = None, flow_arm: str | None = None) -> dict:
    return {"outcome": {"kind": kind, "ar_arm": ar_arm, "flow_arm": flow_arm}}


def test_a_design_without_a_phase2_section_loads_with_none(tmp_path: Path) -> None:
    prereg = load_prereg(write_design(tmp_path / "d.yaml", with_phase2=False))
    assert prereg.phase2 is None
    plan = plan_from_decision(prereg, _decision("phase2_flow", flow_arm="flow_teacher"))
    assert plan.stages == () and not plan.registered
    assert "registers no phase2 section, so no phase 2 runs" in plan.reason


def test_the_registered_designs_register_the_memo_pilot() -> None:
    for name in ("smoke", "grpo_signal_probe"):
        phase2 = load_prereg(REPO / "prereg" / f"{name}.yaml").phase2
        assert phase2 is not None, f"{name}.yaml registers no phase2 section"
        assert phase2.recipe("ar").mode.kind == "temperature"
        assert phase2.recipe("flow").mode.kind == "flow_sde"
        assert (phase2.recipe("ar").clip_ratio_low, phase2.recipe("ar").clip_ratio_high) == (0.2, 0.28)
        assert phase2.recipe("ar").kl_beta == 0.0  # implemented, off by default (memo section 5)
        assert phase2.recipe("flow").kl_beta > 0
    probe = load_prereg(REPO / "prereg" / "grpo_signal_probe.yaml")
    assert probe.phase2 is not None and probe.phase2.rollouts_per_seed == 8


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"train_seeds": [1000, 2001, 2002, 2003]},
            r"phase2\.train_seeds: overlaps the probe's seeds \(seeds\) \(1000\)",
        ),
        ({"eval_seeds": {"first": 2, "count": 3}}, r"phase2\.eval_seeds: overlaps the demo seeds"),
        (
            {"eval_seeds": {"first": 2003, "count": 2}},
            r"phase2\.eval_seeds: overlaps phase2\.train_seeds \(2003\)",
        ),
        (
            {"train_seeds": {"first": 2000, "count": 3}},
            r"phase2\.train_seeds: holds 3 seeds, but iterations x",
        ),
        (
            {"eval_seeds": [3000]},
            r"phase2\.eval_seeds: holds 1 seed, but the held-out verdict's paired t interval needs at least",
        ),
    ],
)
def test_phase2_seed_sets_are_checked_naming_the_file_and_field(
    tmp_path: Path, change: dict, message: str
) -> None:
    with pytest.raises(Phase2Error, match=rf"d\.yaml: {message}"):
        write_design(tmp_path / "d.yaml", **change)


def test_each_head_trains_under_the_sampler_that_records_its_log_probs(tmp_path: Path) -> None:
    from .conftest import PHASE2_SECTION

    heads = {**PHASE2_SECTION["heads"], "ar": {**PHASE2_SECTION["heads"]["ar"], "mode": {"kind": "greedy"}}}
    with pytest.raises(
        Phase2Error, match=r"phase2\.heads\.ar\.mode\.kind: the ar head trains under 'temperature'"
    ):
        write_design(tmp_path / "d.yaml", heads=heads)


def test_a_parking_decision_plans_no_stage_and_says_why(design: Prereg) -> None:
    plan = plan_from_decision(design, _decision("park"))
    assert plan.stages == () and plan.registered
    assert plan.reason == "the decision parks GRPO-on-sim (no cell qualified), so nothing is trained"
    with pytest.raises(ValueError, match=r"phase 2 does not train arm 'flow_teacher': the plan trains none"):
        plan.stage("flow_teacher")


def test_ar_then_flow_trains_the_ar_arm_first_and_the_flow_arm_after_it(design: Prereg) -> None:
    plan = plan_from_decision(design, _decision("ar_then_flow", ar_arm="ar", flow_arm="flow_teacher"))
    assert [(s.head, s.arm, s.after) for s in plan.stages] == [
        ("ar", "ar", None),
        ("flow", "flow_teacher", "ar"),
    ]


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        (_decision("phase2_flow", flow_arm="nope"), r"outcome\.flow_arm 'nope' is not an arm of"),
        (_decision("phase2_flow", flow_arm="ar"), r"outcome\.flow_arm 'ar' has head 'ar'"),
        (
            _decision("phase2_flow"),
            r"outcome\.flow_arm is None, which does not fit outcome\.kind 'phase2_flow'",
        ),
        (_decision("train_everything"), r"outcome\.kind is 'train_everything'"),
    ],
)
def test_a_malformed_decision_is_refused_naming_the_field(
    design: Prereg, decision: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        plan_from_decision(design, decision, "decision.json")


def test_a_design_without_phase2_gets_a_page_that_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grpo_probe.phase2 import pilot_jobs as steps

    from .conftest import write_decision

    monkeypatch.chdir(tmp_path)
    design = write_design(tmp_path / "d.yaml", with_phase2=False)
    decision = write_decision(tmp_path / "decision.json", "phase2_flow", flow_arm="flow_teacher")
    plan, plan_manifest = tmp_path / "phase2" / "plan.json", tmp_path / "phase2" / "plan.manifest.json"
    steps.phase2_plan(design, decision, [], plan, plan_manifest)
    steps.phase2_report(
        design, plan, decision, [plan_manifest], tmp_path / "phase2.md", tmp_path / "phase2.json",
        tmp_path / "figures", tmp_path / "phase2.manifest.json",
    )  # fmt: skip
    page = (tmp_path / "phase2.md").read_text()
    assert "Not tested: nothing was trained, because the design smoke registers no phase2 section" in page
    steps.phase2_compute(design, tmp_path / "benchmarks", tmp_path / "c.md", tmp_path / "c.json")
    assert "registers no phase 2, so there is no gate" in (tmp_path / "c.md").read_text()
