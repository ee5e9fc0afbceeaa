"""The registered analysis and decision rule: parsed from the prereg, errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.analysis.reads import READ_NAMES
from grpo_probe.analysis.spec import AnalysisSpec, analysis_schema
from grpo_probe.prereg.canonical import read_yaml

_REPO = Path(__file__).resolve().parents[2]


def test_spec_holds_the_registered_numbers_and_resolved_thresholds(prereg):
    spec = AnalysisSpec.from_prereg(prereg, "p.yaml")
    assert (spec.group_std_ddof, spec.signal_bar_cm, spec.competence_tol_cm) == (1, 0.25, 0.5)
    assert spec.bootstrap.resamples == 200
    clears, keeps = spec.rule.criteria
    assert (clears.all_of[0].threshold, clears.all_of[0].source) == (0.25, "analysis.signal_bar_cm")
    assert (keeps.all_of[0].threshold, keeps.all_of[0].source) == (-0.5, "-1 x analysis.competence_tol_cm")
    assert [c.id for c in spec.cells] == ["c1", "c3"]
    assert [c.head for c in spec.cells] == ["ar", "flow"]


def test_disabled_cells_are_left_out(prereg):
    prereg["cells"][1]["enabled"] = False
    assert [c.id for c in AnalysisSpec.from_prereg(prereg, "p.yaml").cells] == ["c1"]


def test_missing_analysis_key_names_the_file_and_field(prereg):
    del prereg["analysis"]["signal_bar_cm"]
    with pytest.raises(ValueError, match=r"p\.yaml: analysis: 'signal_bar_cm' is a required property"):
        AnalysisSpec.from_prereg(prereg, "p.yaml")


def test_wrong_type_names_the_nested_field(prereg):
    prereg["analysis"]["bootstrap"]["resamples"] = "many"
    with pytest.raises(
        ValueError, match=r"p\.yaml: analysis\.bootstrap\.resamples: 'many' is not of type 'integer'"
    ):
        AnalysisSpec.from_prereg(prereg, "p.yaml")


def test_unknown_read_in_a_condition_names_the_field(prereg):
    prereg["decision_rule"]["criteria"]["clears_signal_bar"]["all_of"][0]["read"] = "vibes"
    with pytest.raises(ValueError, match=r"decision_rule\.criteria\.clears_signal_bar\.all_of\[0\]\.read"):
        AnalysisSpec.from_prereg(prereg, "p.yaml")


def test_qualifies_naming_an_undefined_criterion_names_the_field(prereg):
    prereg["decision_rule"]["qualifies"]["flow"] = ["clears_signal_bar", "looks_good"]
    with pytest.raises(
        ValueError, match=r"p\.yaml: decision_rule\.qualifies\.flow\[1\] names criterion 'looks_good'"
    ):
        AnalysisSpec.from_prereg(prereg, "p.yaml")


def test_cell_on_an_unregistered_arm_names_the_cell(prereg):
    prereg["cells"][1]["arm"] = "ghost"
    with pytest.raises(ValueError, match=r"p\.yaml: cells\[1\]\.arm 'ghost' is not under arms"):
        AnalysisSpec.from_prereg(prereg, "p.yaml")


def test_schema_read_names_are_the_reads_the_analysis_computes():
    assert analysis_schema()["$defs"]["rule_read_name"]["enum"] == list(READ_NAMES)


@pytest.mark.parametrize("name", ["grpo_signal_probe.yaml", "smoke.yaml"])
def test_registered_preregs_parse(name):
    path = _REPO / "prereg" / name
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    spec = AnalysisSpec.from_prereg(read_yaml(path), str(path))
    assert spec.cells
