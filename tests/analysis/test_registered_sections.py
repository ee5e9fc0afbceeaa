"""The registered analysis and decision rule, as typed sections of the prereg: errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.analysis.cells.reads import READ_NAMES, STATISTICS
from grpo_probe.prereg import load_prereg
from grpo_probe.prereg.rule import analysis_schema
from grpo_probe.prereg.vocabulary import READS

from .rollout_factory import as_prereg

_REPO = Path(__file__).resolve().parents[2]


def test_sections_hold_the_registered_numbers_and_resolved_thresholds(prereg):
    design = as_prereg(prereg)
    analysis, rule = design.analysis, design.decision_rule
    assert (analysis.group_std_ddof, analysis.signal_bar_cm, analysis.competence_tol_cm) == (1, 0.25, 0.5)
    assert analysis.bootstrap.resamples == 200
    clears, keeps = rule.criteria
    assert (clears.all_of[0].threshold, clears.all_of[0].source) == (0.25, "analysis.signal_bar_cm")
    assert (keeps.all_of[0].threshold, keeps.all_of[0].source) == (-0.5, "-1 x analysis.competence_tol_cm")
    assert [c.id for c in design.enabled_cells] == ["c1", "c3"]
    assert [c.head for c in design.enabled_cells] == ["ar", "flow"]


def test_disabled_cells_are_left_out(prereg):
    prereg["cells"][1].update(enabled=False, optional=True)
    assert [c.id for c in as_prereg(prereg).enabled_cells] == ["c1"]


def test_missing_analysis_key_names_the_file_and_field(prereg):
    del prereg["analysis"]["signal_bar_cm"]
    with pytest.raises(ValueError, match=r"p\.yaml: analysis: 'signal_bar_cm' is a required property"):
        as_prereg(prereg, "p.yaml")


def test_wrong_type_names_the_nested_field(prereg):
    prereg["analysis"]["bootstrap"]["resamples"] = "many"
    with pytest.raises(
        ValueError, match=r"p\.yaml: analysis\.bootstrap\.resamples: 'many' is not of type 'integer'"
    ):
        as_prereg(prereg, "p.yaml")


def test_unknown_read_in_a_condition_names_the_field(prereg):
    prereg["decision_rule"]["criteria"]["clears_signal_bar"]["all_of"][0]["read"] = "vibes"
    with pytest.raises(ValueError, match=r"decision_rule\.criteria\.clears_signal_bar\.all_of\[0\]\.read"):
        as_prereg(prereg, "p.yaml")


def test_qualifies_naming_an_undefined_criterion_names_the_field(prereg):
    prereg["decision_rule"]["qualifies"]["flow"] = ["clears_signal_bar", "looks_good"]
    with pytest.raises(
        ValueError, match=r"p\.yaml: decision_rule\.qualifies\.flow\[1\] names criterion 'looks_good'"
    ):
        as_prereg(prereg, "p.yaml")


def test_cell_on_an_unregistered_arm_names_the_cell(prereg):
    prereg["cells"][1]["arm"] = "ghost"
    with pytest.raises(ValueError, match=r"p\.yaml: cells\[c3\]\.arm: 'ghost' is not one of the arms"):
        as_prereg(prereg, "p.yaml")


def test_a_head_the_rule_cannot_route_is_refused_naming_the_arm(prereg):
    prereg["arms"]["other_arm"] = {"head": "diffusion", "anchor": {"kind": "flow_ode"}}
    with pytest.raises(ValueError, match=r"p\.yaml: arms\.other_arm\.head: 'diffusion' is not one of"):
        as_prereg(prereg, "p.yaml")


def test_schema_read_names_are_the_reads_the_analysis_computes():
    assert analysis_schema()["$defs"]["rule_fixed_read_name"]["enum"] == list(READ_NAMES)
    assert set(STATISTICS) == set(READS)


@pytest.mark.parametrize("name", ["grpo_signal_probe.yaml", "smoke.yaml"])
def test_registered_preregs_parse_into_typed_sections(name):
    design = load_prereg(_REPO / "prereg" / name)
    assert design.enabled_cells
    assert design.decision_rule.criteria_for("ar")
    assert all(arm.anchor.head == arm.head for arm in design.arms.values())
