"""The registered decision rule: every outcome, the arm choice and its tie-breaks, thresholds as data."""

from __future__ import annotations

import pytest

from grpo_probe.analysis.rule.decision_rule import condition_text, evaluate_rule
from grpo_probe.analysis.rule.glossary import number

from .rollout_factory import as_prereg


def _four_cells(prereg):
    prereg["arms"]["sde_arm"] = {"head": "flow"}
    prereg["cells"] = [
        {"id": "c1", "arm": "ar_arm", "mode": {"kind": "temperature", "temperature": 1.0}},
        {"id": "c3", "arm": "teacher", "mode": {"kind": "flow_ode"}},
        {"id": "c4", "arm": "short", "mode": {"kind": "flow_ode"}},
        {"id": "c5", "arm": "sde_arm", "mode": {"kind": "flow_sde", "sde_a": 0.5}},
    ]
    return prereg


def _reads(std, delta, engagement=0.0):
    return {
        "median_group_std_progress_cm": std,
        "mean_progress_delta_cm": delta,
        "anchor_engagement_rate": engagement,
    }


def _decide(prereg, reads):
    design = as_prereg(prereg)
    return evaluate_rule(design.decision_rule, design.enabled_cells, reads)


FLAT = _reads(0.1, 0.0)


def test_decision_parks_grpo_when_no_cell_clears_signal_bar(prereg):
    verdicts, outcome = _decide(_four_cells(prereg), {c: FLAT for c in ("c1", "c3", "c4", "c5")})
    assert outcome.kind == "park"
    assert (outcome.ar_arm, outcome.flow_arm) == (None, None)
    assert [v.qualifies for v in verdicts] == [False] * 4
    assert outcome.clauses[0] == (
        "cell c1: clears_signal_bar fails (median group std 0.1 cm is below the 0.25 cm signal bar: fails)"
    )


def test_ar_cell_that_loses_anchor_competence_does_not_qualify(prereg):
    reads = {c: FLAT for c in ("c1", "c3", "c4", "c5")} | {"c1": _reads(0.4, -0.6)}
    verdicts, outcome = _decide(_four_cells(prereg), reads)
    assert outcome.kind == "park"
    assert verdicts[0].passed("clears_signal_bar") and not verdicts[0].passed("keeps_anchor_competence")


def test_ar_cell_clearing_with_competence_routes_phase2_to_ar(prereg):
    reads = {c: FLAT for c in ("c1", "c3", "c4", "c5")} | {"c1": _reads(0.25, -0.5)}  # both bounds inclusive
    _, outcome = _decide(_four_cells(prereg), reads)
    assert (outcome.kind, outcome.ar_arm, outcome.flow_arm) == ("phase2_ar", "ar_arm", None)


def test_only_flow_cells_clearing_routes_to_the_most_engaging_flow_arm(prereg):
    reads = {
        "c1": FLAT,
        "c3": _reads(0.3, 0.0, engagement=0.4),
        "c4": _reads(0.9, 0.0, engagement=0.2),
        "c5": _reads(0.3, 0.0, engagement=0.6),
    }
    _, outcome = _decide(_four_cells(prereg), reads)
    assert (outcome.kind, outcome.flow_arm) == ("phase2_flow", "sde_arm")
    assert dict(outcome.ranking)["flow"] == ("c5", "c3", "c4")


def test_flow_arm_tie_in_engagement_breaks_on_the_next_key_then_registered_order(prereg):
    tie_next_key = {
        "c1": FLAT,
        "c3": _reads(0.3, 0.0, 0.5),
        "c4": _reads(0.4, 0.0, 0.5),
        "c5": _reads(0.3, 0.0, 0.5),
    }
    _, outcome = _decide(_four_cells(prereg), tie_next_key)
    assert dict(outcome.ranking)["flow"] == ("c4", "c3", "c5")
    full_tie = {"c1": FLAT} | {c: _reads(0.3, 0.0, 0.5) for c in ("c5", "c4", "c3")}
    _, outcome = _decide(_four_cells(prereg), full_tie)
    assert dict(outcome.ranking)["flow"] == ("c3", "c4", "c5")
    assert outcome.flow_arm == "teacher"


def test_both_heads_clearing_gives_ar_then_flow(prereg):
    reads = {"c1": _reads(0.5, 0.1), "c3": _reads(0.3, -0.1, 0.2), "c4": FLAT, "c5": FLAT}
    _, outcome = _decide(_four_cells(prereg), reads)
    assert (outcome.kind, outcome.ar_arm, outcome.flow_arm) == ("ar_then_flow", "ar_arm", "teacher")
    assert outcome.clauses[-1].startswith("outcome ar_then_flow:")


def test_raising_the_registered_signal_bar_flips_phase2_to_park(prereg):
    reads = {"c1": _reads(0.3, 0.0), "c3": FLAT}
    assert _decide(prereg, reads)[1].kind == "phase2_ar"
    prereg["analysis"]["signal_bar_cm"] = 0.35
    assert _decide(prereg, reads)[1].kind == "park"


def test_qualifies_list_is_data_flow_without_competence_qualifies(prereg):
    reads = {"c1": FLAT, "c3": _reads(0.3, -3.0)}
    assert _decide(prereg, reads)[1].kind == "park"
    prereg["decision_rule"]["qualifies"]["flow"] = ["clears_signal_bar"]
    assert _decide(prereg, reads)[1].kind == "phase2_flow"


def test_undefined_read_fails_its_condition(prereg):
    prereg["decision_rule"]["criteria"]["clears_signal_bar"]["all_of"].append(
        {"read": "mean_token_entropy", "op": ">", "threshold": 0.1}
    )
    reads = {
        "c1": _reads(0.3, 0.0) | {"mean_token_entropy": 0.8},
        "c3": _reads(0.3, 0.0) | {"mean_token_entropy": None},
    }
    verdicts, outcome = _decide(prereg, reads)
    assert [v.qualifies for v in verdicts] == [True, False]
    assert "token entropy is undefined for this cell: fails" in " ".join(outcome.clauses)
    assert "token entropy 0.8 nats is above the registered minimum 0.1 nats: passes" in " ".join(
        outcome.clauses
    )


@pytest.mark.parametrize("op, expected", [(">=", True), (">", False), ("<=", True), ("<", False)])
def test_comparison_operators_at_the_boundary(prereg, op, expected):
    prereg["decision_rule"]["criteria"]["clears_signal_bar"]["all_of"][0]["op"] = op
    verdicts, _ = _decide(prereg, {"c1": _reads(0.25, 0.0), "c3": FLAT})
    assert verdicts[0].passed("clears_signal_bar") is expected


@pytest.mark.parametrize(
    "op, value, passed, words",
    [
        (">=", -34.1486, False, "is below"),
        (">=", -0.5, True, "is at or above"),
        (">", -0.5, False, "is at or below"),
        (">", 1.0, True, "is above"),
        ("<=", 0.72, False, "is above"),
        ("<=", 0.5, True, "is at or below"),
        ("<", 0.5, False, "is at or above"),
        ("<", 0.1, True, "is below"),
    ],
)
def test_a_condition_reads_as_a_sentence_in_either_direction(op, value, passed, words):
    text = condition_text(
        "mean_progress_delta_cm", value, op, -0.5, "-1 x analysis.competence_tol_cm", passed
    )
    assert text == (
        f"sampled minus anchor progress {number(value)} cm {words} the -0.5 cm tolerance: "
        f"{'passes' if passed else 'fails'}"
    )


def test_a_condition_names_the_threshold_by_its_role_and_shows_the_interval():
    assert condition_text(
        "median_choice_std_cm", 13.5483, ">=", 0.25, "analysis.signal_bar_cm", True, (0.0, 27.0965)
    ) == ("median choice std 13.5 cm [0, 27.1] is at or above the 0.25 cm signal bar: passes")
    assert condition_text("choice_std_cm.lower", 3.44, ">=", 0.25, "analysis.signal_bar_cm", True) == (
        "lower end of the choice std interval 3.44 cm is at or above the 0.25 cm signal bar: passes"
    )
    assert condition_text(
        "chaos_share.upper", 0.606, "<=", 0.5, "registered value", False, (0.368, 0.606), 0.505
    ) == ("chaos share 0.505 [0.368, 0.606]: its upper end 0.606 is above the registered maximum 0.5: fails")
    assert condition_text("chaos_fraction", 0.7213, "<=", 0.5, "registered value", False) == (
        "chaos fraction 0.721 is above the registered maximum 0.5: fails"
    )
    assert condition_text("sampled_swat_rate", 0.25, ">=", 0.1, "registered value", True) == (
        "sampled swat rate 0.25 is at or above the registered minimum 0.1: passes"
    )


def test_a_value_three_figures_would_print_as_the_threshold_gets_more():
    """0.2499 rounds to the 0.25 bar at three figures; the clause must not read "0.25 is below 0.25"."""
    text = condition_text("median_group_std_progress_cm", 0.2499, ">=", 0.25, "analysis.signal_bar_cm", False)
    assert text == "median group std 0.2499 cm is below the 0.25 cm signal bar: fails"
    assert condition_text(
        "median_group_std_progress_cm", 0.25, ">=", 0.25, "analysis.signal_bar_cm", True
    ).startswith("median group std 0.25 cm is at or above")
    assert condition_text("chaos_fraction", 0.25, ">=", 0.2499, "registered value", True) == (
        "chaos fraction 0.25 is at or above the registered minimum 0.2499: passes"
    )


@pytest.mark.parametrize(
    "value, shown",
    [
        (-34.1486, "-34.1"),
        (0.25, "0.25"),
        (1234.5, "1230"),
        (0.0833, "0.0833"),
        (99.96, "100"),
        (-0.0, "0"),
        (1.0, "1"),
        (20260812, "20260812"),
        (None, "n/a"),
        (True, "yes"),
    ],
)
def test_numbers_print_at_three_significant_figures(value, shown):
    assert number(value) == shown
