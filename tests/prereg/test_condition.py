"""A rule's condition compares, records and prints its own threshold (grpo_probe.prereg.rule.Condition)."""

from __future__ import annotations

import numpy as np

from grpo_probe.analysis.rule.glossary import number
from grpo_probe.prereg.rule import Condition, DecisionRule, ReadRef

ABSOLUTE = Condition("chaos_share.upper", "<=", 0.5, "registered value")
RELATIVE = Condition("choice_std_cm.lower", ">=", None, "0.5 x chaos_std_cm", ReadRef("chaos_std_cm"), 0.5)


def test_compare_on_one_cells_reads():
    assert ABSOLUTE.compare({"chaos_share_ci_high": 0.4}) == (0.4, 0.5, True)
    assert ABSOLUTE.compare({"chaos_share_ci_high": 0.6})[2] is False
    assert ABSOLUTE.compare({}) == (None, 0.5, False)  # an undefined read fails
    assert RELATIVE.compare({"choice_std_cm_ci_low": 2.0, "chaos_std_cm": 3.0}) == (2.0, 1.5, True)
    assert RELATIVE.compare({"choice_std_cm_ci_low": 1.0, "chaos_std_cm": 3.0})[2] is False
    assert RELATIVE.compare({"choice_std_cm_ci_low": 2.0})[2] is False  # its relative read is undefined


def test_compare_elementwise_on_resampled_reads():
    reads = {"choice_std_cm_ci_low": np.array([2.0, 1.0, np.nan]), "chaos_std_cm": np.array([3.0, 3.0, 3.0])}
    assert RELATIVE.passes(reads).tolist() == [True, False, False]  # NaN fails, without a warning
    assert ABSOLUTE.passes({"chaos_share_ci_high": np.array([0.2, 0.5, 0.7])}).tolist() == [True, True, False]


def test_the_record_round_trips_and_prints_the_bar():
    for condition in (ABSOLUTE, RELATIVE):
        assert Condition.from_record(condition.to_record()) == condition
    assert ABSOLUTE.bar_text(number, unit="cm") == "0.5 cm"
    assert RELATIVE.bar_text(number) == "0.5 x chaos_std_cm"
    assert RELATIVE.bar_text(number, lambda read: read.replace("_", " ")) == "0.5 x chaos std cm"
    assert RELATIVE.keys == ("choice_std_cm_ci_low", "chaos_std_cm")
    assert RELATIVE.read_names == ("choice_std_cm", "chaos_std_cm")


def test_conditions_for_a_head_are_those_of_the_criteria_it_needs():
    raw = {
        "criteria": {
            "signal": {
                "description": "s",
                "all_of": [{"read": "chaos_share.upper", "op": "<=", "threshold": 0.5}],
            },
            "competence": {
                "description": "c",
                "all_of": [{"read": "mean_progress_delta_cm", "op": ">=", "threshold": {"analysis": "tol"}}],
            },
        },
        "qualifies": {"ar": ["signal", "competence"], "flow": ["signal"]},
        "arm_choice": {"rank_by": []},
    }
    rule = DecisionRule.from_dict(raw, {"tol": 0.5}, "design.yaml")
    assert [c.read for c in rule.conditions_for("ar")] == ["chaos_share.upper", "mean_progress_delta_cm"]
    assert [c.read for c in rule.conditions_for("flow")] == ["chaos_share.upper"]
    assert rule.conditions_for("teacher") == ()
    competence = rule.conditions_for("ar")[1]
    assert competence.threshold == 0.5 and competence.source == "analysis.tol"
    assert rule.to_record()["criteria"][0]["all_of"] == [ABSOLUTE.to_record()]
