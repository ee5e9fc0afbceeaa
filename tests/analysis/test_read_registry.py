"""A read is one declaration (the vocabulary) and one statistic (the analysis): a toy read added here is
validated by the schema, computed with its interval, resampled for the outcome's stability, worded in a
clause and shown in the reads table, with no other file changed; a read declared without a statistic is
refused before any read is computed.

Why: a read used to live in seven places, and one missing from the resampling became NaN on every
resample, so the outcome's stability was misreported with no error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from grpo_probe.analysis.cells.reads import STATISTICS, cell_reads, compute_reads, read_rows
from grpo_probe.analysis.cells.seed_columns import SeedColumns
from grpo_probe.analysis.page.decision_md import NOT_RECORDED, reads_tsv_text, render_decision_md
from grpo_probe.analysis.rule.decision_rule import evaluate_rule, read_words
from grpo_probe.analysis.rule.stability import resample_indices, stability
from grpo_probe.name_registry import EntryClash
from grpo_probe.prereg import load_prereg
from grpo_probe.prereg.rule import parse_analysis_sections
from grpo_probe.prereg.vocabulary import READS, ReadSpec, register_read

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "reference" / "grpo_signal_probe.decision.json"
SMOKE = load_prereg(REPO / "prereg" / "smoke.yaml", require_lock=False)
SMOKE_RAW = yaml.safe_load((REPO / "prereg" / "smoke.yaml").read_text())
CELL = next(c for c in SMOKE.enabled_cells if c.head == "flow")

TOY = ReadSpec(
    "toy_widest_std_cm", "widest toy std", "widest toy std over seeds (cm) [CI]", "cm", interval=True
)
"""A toy read of docs/extending.md's example's shape, under a name of its own (a reader who adds the example
keeps this test passing: tests/test_docs_examples.py)."""


def _toy_statistic(c: SeedColumns, index: np.ndarray) -> np.ndarray:
    return c.std_progress_cm[index].max(axis=-1)


@pytest.fixture
def with_toy_read() -> Iterator[None]:
    """The two registrations a new read takes, for one test: its declaration and its statistic."""
    with READS.registered(TOY.name, TOY), STATISTICS.registered(TOY.name, _toy_statistic):
        yield


def _columns(stds: list[float]) -> SeedColumns:
    n = len(stds)
    zeros = np.zeros(n)
    return SeedColumns(CELL, 4, np.array(stds), zeros, zeros + 1, zeros, zeros, zeros, {}, {}, None, None)


def _rule_section(read: str, rank_by: list[dict]) -> dict:
    condition = {"read": read, "op": ">=", "threshold": 1.0}
    return {
        "criteria": {"wide": {"description": "d", "all_of": [condition]}},
        "qualifies": {"ar": ["wide"], "flow": ["wide"]},
        "arm_choice": {"rank_by": rank_by},
    }


def test_a_new_read_flows_through_schema_reads_resampling_words_and_table(with_toy_read: None) -> None:
    raw = _rule_section("toy_widest_std_cm.lower", [{"read": "toy_widest_std_cm", "prefer": "max"}])
    _, rule = parse_analysis_sections({"analysis": SMOKE_RAW["analysis"], "decision_rule": raw}, "toy.yaml")
    columns = _columns([0.5, 3.0, 1.5, 2.0, 1.0])
    reads = cell_reads(columns, SMOKE.analysis)
    assert reads["toy_widest_std_cm"] == 3.0
    assert reads["toy_widest_std_cm_ci_low"] is not None and reads["toy_widest_std_cm_ci_low"] <= 3.0
    assert (
        compute_reads(columns, np.array([[0, 0, 0, 0, 0]]), {"toy_widest_std_cm"})["toy_widest_std_cm"][0]
        == 0.5
    )
    _, outcome = evaluate_rule(rule, [CELL], {CELL.id: reads})
    index = resample_indices(SMOKE.analysis.bootstrap.seed, 50, 5)  # 5: enough seeds to resample
    found = stability(rule, [CELL], {CELL.id: columns}, outcome, index, SMOKE.analysis.bootstrap)
    assert found.not_resampled is None and sum(c for *_, c in found.outcomes) == 50
    assert read_words("toy_widest_std_cm.lower") == ("lower end of the widest toy std interval", "cm")
    assert "toy_widest_std_cm" in [row.read for row in read_rows(())]


def test_the_schema_refuses_a_read_nothing_declares() -> None:
    raw = _rule_section("toy_widest_std_cm", [])
    with pytest.raises(ValueError, match=r"toy\.yaml: decision_rule\.criteria\.wide\.all_of\[0\]\.read"):
        parse_analysis_sections({"analysis": SMOKE_RAW["analysis"], "decision_rule": raw}, "toy.yaml")


def test_a_read_declared_without_a_statistic_is_refused_before_any_read_is_computed() -> None:
    orphan = ReadSpec("orphan_cm", "orphan", "orphan (cm)", "cm")
    with (
        READS.registered(orphan.name, orphan),
        pytest.raises(
            LookupError,
            match=r"reads declared without a statistic \['orphan_cm'\], statistics no read declares \[\]",
        ),
    ):
        cell_reads(_columns([0.5, 3.0]), SMOKE.analysis)
    with (
        STATISTICS.registered("stray_cm", _toy_statistic),
        pytest.raises(LookupError, match=r"statistics no read declares \['stray_cm'\]"),
    ):
        compute_reads(_columns([0.5, 3.0]), np.array([0, 1]))
    assert cell_reads(_columns([0.5, 3.0]), SMOKE.analysis)  # both taken out again


def test_a_name_is_one_read() -> None:
    taken = READS.get("choice_std_cm")
    with pytest.raises(EntryClash, match=r"read 'choice_std_cm' is already registered"):
        register_read(ReadSpec("choice_std_cm", "another", "another (cm)", "cm"))
    assert register_read(taken) is taken  # the module imported again: the same declaration
    assert READS.suggest("choice_sdt_cm") == "choice_std_cm"


def test_a_read_declared_after_a_record_was_written_renders_as_not_recorded(with_toy_read: None) -> None:
    """docs/extending.md's example on the committed reference record, which predates the read: its row
    says "not recorded" in every cell (in decision.md and reads.tsv) instead of failing with a KeyError,
    and the reads the record holds print as before."""
    reference = json.loads(REFERENCE.read_text())
    assert all(TOY.name not in c["reads"] for c in reference["cells"])
    cells = len(reference["cells"])
    page = render_decision_md(reference)
    rows = [line for line in page.splitlines() if line.startswith(f"| {TOY.label} |")]
    assert rows == ["| " + " | ".join([TOY.label, *[NOT_RECORDED] * cells]) + " |"]
    tsv = reads_tsv_text(reference).splitlines()
    assert "\t".join([TOY.label, *[NOT_RECORDED] * cells]) in tsv
    median = next(line for line in page.splitlines() if line.startswith("| median group std of progress"))
    assert NOT_RECORDED not in median


def test_a_read_recorded_as_undefined_is_not_called_unrecorded(with_toy_read: None) -> None:
    """None in the record is a read the analysis found undefined (n/a), not one it never wrote."""
    reference = json.loads(REFERENCE.read_text())
    for cell in reference["cells"]:
        cell["reads"][TOY.name] = None
    row = next(
        line for line in render_decision_md(reference).splitlines() if line.startswith(f"| {TOY.label}")
    )
    assert NOT_RECORDED not in row and "n/a" in row
