"""decision.md / decision.json end to end on fabricated tables: outcomes, numbers, errors, bytes."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from grpo_probe.analysis.cells.reads import read_rows
from grpo_probe.analysis.page.report import build_decision, decision_record
from grpo_probe.analysis.rule.glossary import number
from grpo_probe.envs.boat.spec import boat_spec

from .rollout_factory import anchor_rows, as_prereg, probe_rows, write_table

SEEDS = (0, 1, 2)
SPREAD = [0.0, 0.5, 1.0, 0.5]  # mean 0.5, std at ddof 1 = sqrt(0.5 / 3) = 0.4082 >= 0.25
FLAT = [0.5, 0.5, 0.5, 0.5]


def _write_inputs(root: Path, ar_draws, flow_draws, rows_reversed=False):
    root.mkdir(parents=True, exist_ok=True)
    order = (lambda rows: rows[::-1]) if rows_reversed else (lambda rows: rows)
    c1 = probe_rows("c1", "ar_arm", "ar", {s: ar_draws for s in SEEDS})
    c1[0].update(contact=True, reset_strikes=1, max_boat_speed_m_s=0.9)
    c3 = probe_rows("c3", "teacher", "flow", {s: flow_draws for s in SEEDS}, contact=True)
    probes = {
        "c1": write_table(root / "probe_c1.parquet", order(c1)),
        "c3": write_table(root / "probe_c3.parquet", order(c3)),
    }
    anchors = {
        "ar_arm": write_table(
            root / "anchor_ar.parquet", anchor_rows("ar_arm", "ar", {s: 0.5 for s in SEEDS})
        ),
        "teacher": write_table(
            root / "anchor_teacher.parquet",
            anchor_rows("teacher", "flow", {s: 0.5 for s in SEEDS}, contact=True),
        ),
    }
    return probes, anchors


def _build(out: Path, probes, anchors, prereg, **kwargs):
    return build_decision(
        probes,
        anchors,
        as_prereg(prereg),
        out / "decision.md",
        out / "decision.json",
        out / "figures",
        [(str(p), "0" * 64) for p in (*probes.values(), *anchors.values())],
        **kwargs,
    )


def _json_leaves(value, numbers, strings):
    if isinstance(value, dict):
        for v in value.values():
            _json_leaves(v, numbers, strings)
    elif isinstance(value, list):
        for v in value:
            _json_leaves(v, numbers, strings)
    elif isinstance(value, str):
        strings.append(value)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        numbers.add(number(value))


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def _numbers_not_in_json(md: str, decision: dict) -> list[str]:
    """Numeric tokens of decision.md that are no number of decision.json as the page prints it (three
    significant figures). Text copied verbatim from a JSON string (descriptions, clauses, paths, hashes,
    the lock date) is removed first."""
    printed: set[str] = set()
    strings: list[str] = []
    _json_leaves(decision, printed, strings)
    for s in sorted(set(strings), key=len, reverse=True):
        if len(s) > 2:
            md = md.replace(s, " ")
    return [t for t in _NUMBER.findall(md) if t not in printed]


def _flat(text: str) -> str:
    """The page's text with its wrapped lines joined: the words as a reader reads them."""
    return " ".join(text.split())


def _above_the_fold(md: str) -> str:
    """What a reader sees first: the page up to its first horizontal rule."""
    return md.split("\n---\n", 1)[0]


def _reads_table(md: str) -> dict[str, list[str]]:
    section = md.split("## Reads per cell", 1)[1]
    table = section[section.index("| read |") :].split("\n\n", 1)[0]
    rows = [line.strip("|").split(" | ") for line in table.splitlines()[2:]]
    return {cells[0].strip(): [c.strip(" |") for c in cells[1:]] for cells in rows}


@pytest.mark.parametrize(
    "ar_draws, flow_draws, kind",
    [
        (FLAT, FLAT, "park"),
        (SPREAD, FLAT, "phase2_ar"),
        (FLAT, SPREAD, "phase2_flow"),
        (SPREAD, SPREAD, "ar_then_flow"),
    ],
)
def test_each_outcome_from_constructed_tables_and_every_md_number_is_in_json(
    tmp_path, prereg, ar_draws, flow_draws, kind
):
    probes, anchors = _write_inputs(tmp_path / "in", ar_draws, flow_draws)
    decision = _build(tmp_path / "out", probes, anchors, prereg)
    assert decision["outcome"]["kind"] == kind
    md = (tmp_path / "out" / "decision.md").read_text()
    assert json.loads((tmp_path / "out" / "decision.json").read_text()) == decision
    assert decision["outcome"]["headline"] in _flat(md)
    assert _numbers_not_in_json(md, decision) == []
    # the reads table, cell by cell, equals decision.json's reads
    table = _reads_table(md)
    for row in read_rows(boat_spec().guard_names, replay=decision["replay"] is not None):
        label = row.label + (" (primary)" if row.primary else "")
        for cell, text in zip(decision["cells"], table[label], strict=True):
            value = cell["reads"][row.read]
            assert text.split(" ")[0] == number(value)
            if value is not None and row.with_ci:
                assert re.findall(r"\[(\S+), (\S+)\]", text)[0] == (
                    number(cell["reads"][row.read + "_ci_low"]),
                    number(cell["reads"][row.read + "_ci_high"]),
                )
    for cell in decision["cells"]:
        for name in cell["figures"].values():
            assert f"]({name})" in md
            assert (tmp_path / "out" / name).read_bytes().startswith(b"\x89PNG")
    # above the fold, in 80 columns x 40 lines: the outcome, the rule's figure embedded, a short line of
    # reasons per cell; the spread and competence figures and the full reasons below
    top, below = md.split("\n---\n", 1)
    assert top.startswith("# GRPO signal probe: decision\n")
    assert f"**{decision['outcome']['headline']}**" in _flat(top)
    assert f"]({decision['figures']['rule']})" in top
    for key in ("rule", "group_std", "competence"):
        assert (tmp_path / "out" / decision["figures"][key]).read_bytes().startswith(b"\x89PNG")
    for key in ("group_std", "competence"):
        assert f"]({decision['figures'][key]})" in below
    for cell in decision["cells"]:
        assert re.search(rf"^- \*\*{cell['id']}\*\* \((AR|flow)\) (qualifies|does not qualify)", top, re.M)
        assert re.search(
            rf"^- \*\*{cell['id']}\*\* \((AR|flow)\) (qualifies|does not qualify)\.", below, re.M
        )
    assert len(top.splitlines()) <= 40 and max(len(line) for line in top.splitlines()) <= 80


def test_reads_from_tables_match_hand_values(tmp_path, prereg):
    probes, anchors = _write_inputs(tmp_path / "in", SPREAD, FLAT)
    decision = _build(tmp_path / "out", probes, anchors, prereg)
    c1, c3 = decision["cells"]
    # decision.json keeps every digit: the reads are the floats the rule compared
    assert c1["reads"]["median_group_std_progress_cm"] == math.sqrt(0.5 / 3)
    assert c1["reads"]["mean_progress_delta_cm"] == 0.0
    assert c1["reads"]["sampled_engagement_rate"] == 1 / 12  # one contact among 12 draws
    assert c1["reads"]["sampled_swat_rate"] == 1 / 12
    assert c1["reads"]["mean_token_entropy"] == 0.6
    assert c3["reads"]["median_group_std_progress_cm"] == 0.0
    assert c3["reads"]["nondegenerate_fraction"] == 0.0
    assert c3["reads"]["mean_token_entropy"] is None
    assert (c1["k"], c1["n_seeds"]) == (4, 3)


def test_raising_the_registered_signal_bar_flips_the_outcome_from_the_same_tables(tmp_path, prereg):
    probes, anchors = _write_inputs(tmp_path / "in", SPREAD, FLAT)
    assert _build(tmp_path / "a", probes, anchors, prereg)["outcome"]["kind"] == "phase2_ar"
    prereg["analysis"]["signal_bar_cm"] = 0.5
    assert _build(tmp_path / "b", probes, anchors, prereg)["outcome"]["kind"] == "park"


def test_same_inputs_give_identical_bytes_and_row_order_does_not_matter(tmp_path, prereg):
    probes, anchors = _write_inputs(tmp_path / "in", SPREAD, [0.0, 0.2, 0.1, 0.6])
    out = tmp_path / "out"
    _build(
        out,
        probes,
        anchors,
        prereg,
        compute=[{"stage": "probe", "cpu_s": 10, "gpu_s": 0, "max_rss_mb": 300}],
    )
    first = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert len(first) == 2 + 4 + 3 + 4  # md, json; c1: 4 figures; c3: 3 figures; 4 all-cells figures
    _build(
        out,
        probes,
        anchors,
        prereg,
        compute=[{"stage": "probe", "cpu_s": 10, "gpu_s": 0, "max_rss_mb": 300}],
    )
    again = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert again == first
    shuffled_probes, _ = _write_inputs(tmp_path / "in", SPREAD, [0.0, 0.2, 0.1, 0.6], rows_reversed=True)
    assert shuffled_probes == probes  # same paths, rows written in reverse order
    _build(
        out,
        probes,
        anchors,
        prereg,
        compute=[{"stage": "probe", "cpu_s": 10, "gpu_s": 0, "max_rss_mb": 300}],
    )
    assert (out / "decision.json").read_bytes() == first[Path("decision.json")]


def test_the_record_alone_draws_the_figures_and_writes_no_page(tmp_path, prereg):
    """The workflow's decision step adds to the record before writing it, so decision.md and decision.json
    are written once: ``decision_record`` writes only the figures, and its record is decision.json's."""
    probes, anchors = _write_inputs(tmp_path / "in", SPREAD, FLAT)
    provenance = [(str(p), "0" * 64) for p in (*probes.values(), *anchors.values())]
    out = tmp_path / "out"
    record = decision_record(probes, anchors, as_prereg(prereg), out, out / "figures", provenance)
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written and all(name.startswith("figures/") and name.endswith(".png") for name in written)
    assert _build(tmp_path / "built", probes, anchors, prereg) == record


def test_compute_table_against_the_gate(tmp_path, prereg):
    probes, anchors = _write_inputs(tmp_path / "in", FLAT, FLAT)
    rows = [
        {"stage": "train", "cpu_s": 3600.0, "gpu_s": None, "max_rss_mb": 900},
        {"stage": "probe", "cpu_s": 1800, "gpu_s": 36, "max_rss_mb": 400},
    ]
    d = _build(
        tmp_path / "o",
        probes,
        anchors,
        prereg,
        compute=rows,
        compute_gate={"cpu_hours": 1.0, "gpu_hours": 3.0},
    )
    assert (d["compute"]["total_cpu_hours"], d["compute"]["total_gpu_hours"]) == (1.5, 0.01)
    assert d["compute"]["within_gate"] is False
    md = (tmp_path / "o" / "decision.md").read_text()
    assert "within the gate: no" in md
    assert _numbers_not_in_json(md, d) == []


def test_missing_column_error_names_table_and_column(tmp_path, prereg):
    probes, anchors = _write_inputs(tmp_path / "in", FLAT, FLAT)
    write_table(probes["c3"], probe_rows("c3", "teacher", "flow", {s: FLAT for s in SEEDS}), drop=["contact"])
    with pytest.raises(ValueError, match=r"probe_c3\.parquet: missing column\(s\) contact"):
        _build(tmp_path / "out", probes, anchors, prereg)
    assert not (tmp_path / "out" / "decision.md").exists()


def test_cell_without_anchor_rows_names_the_table_and_cell(tmp_path, prereg):
    probes, anchors = _write_inputs(tmp_path / "in", FLAT, FLAT)
    del anchors["teacher"]
    with pytest.raises(ValueError, match=r"probe_c3\.parquet: cell c3 \(arm teacher\) has no anchor rows"):
        _build(tmp_path / "out", probes, anchors, prereg)


def test_empty_anchor_table_is_refused_naming_it(tmp_path, prereg):
    probes, anchors = _write_inputs(tmp_path / "in", FLAT, FLAT)
    write_table(anchors["teacher"], [])
    with pytest.raises(ValueError, match=r"anchor_teacher\.parquet: has no rows"):
        _build(tmp_path / "out", probes, anchors, prereg)


def test_probe_table_for_an_unregistered_cell_is_refused(tmp_path, prereg):
    probes, anchors = _write_inputs(tmp_path / "in", FLAT, FLAT)
    probes["c7"] = probes["c3"]
    with pytest.raises(
        ValueError, match=r"prereg/test_probe\.yaml: cells: .*unknown or disabled cells \['c7'\]"
    ):
        _build(tmp_path / "out", probes, anchors, prereg)


def test_the_page_explains_a_flow_cell_that_qualifies_without_competence_and_flags_its_guards(
    tmp_path, prereg
):
    prereg["decision_rule"]["qualifies"]["flow"] = ["clears_signal_bar"]
    root = tmp_path / "in"
    probes, anchors = _write_inputs(root, FLAT, FLAT)
    losing = probe_rows("c3", "teacher", "flow", {s: [-2.0, -1.0, 0.0, -1.0] for s in SEEDS}, reset_strikes=1)
    write_table(probes["c3"], losing)
    decision = _build(tmp_path / "out", probes, anchors, prereg)
    c3 = next(c for c in decision["cells"] if c["id"] == "c3")
    assert c3["verdict"]["qualifies"] is True
    assert not c3["verdict"]["criteria"]["keeps_anchor_competence"]["passed"]
    assert "asks a flow cell to pass only clears_signal_bar" in c3["verdict"]["note"]
    assert c3["verdict"]["flags"] == ["reset_strike trips in 12/12 sampled episodes (anchor 0/3)"]
    md = (tmp_path / "out" / "decision.md").read_text()
    top, below = md.split("\n---\n", 1)
    assert "c3 qualifies for flow, which needs only clears_signal_bar; c1 does not." in _flat(top)
    assert (
        "- **c3** (flow) qualifies: `clears_signal_bar` holds. Flags (sampled, anchor): reset_strike 12/12, "
        "0/3." in _flat(top)
    )
    (line,) = [line for line in below.splitlines() if line.startswith("- **c3**")]
    assert line.startswith("- **c3** (flow) qualifies.")
    assert (
        "`keeps_anchor_competence` fails: sampled minus anchor progress -1.5 cm [-1.5, -1.5] is below the "
        "-0.5 cm tolerance: fails." in line
    )
    assert line.endswith(
        "**Flag** (not read by the rule): reset_strike trips in 12/12 sampled episodes (anchor 0/3)."
    )
    terms = {g["term"]: g["meaning"] for g in decision["glossary"]}
    assert "sim.table_force_limit_n = 25 N" in terms["reset_strike"]
    assert "analysis.away_tail_cm = -2 cm" in terms["away_tail"]
    assert "- **expert only**: Flow-GRPO updates the flow head" in md


def test_the_outcome_sentence_says_what_every_cell_failed(tmp_path, prereg):
    probes, anchors = _write_inputs(tmp_path / "in", FLAT, FLAT)
    decision = _build(tmp_path / "out", probes, anchors, prereg)
    md = (tmp_path / "out" / "decision.md").read_text()
    assert decision["outcome"]["kind"] == "park"
    top, below = md.split("\n---\n", 1)
    assert f"**{decision['outcome']['headline']}** No cell qualifies." in _flat(top)
    assert (
        "- **c1** (AR) does not qualify: `clears_signal_bar` fails (median group std 0 < 0.25 cm)"
        in _flat(top)
    )
    (c1,) = [line for line in below.splitlines() if line.startswith("- **c1**")]
    assert (
        "`clears_signal_bar` fails: median group std 0 cm [0, 0] is below the 0.25 cm signal bar: fails."
        in c1
    )


def test_decision_json_keeps_the_rules_numbers_beside_the_words(tmp_path, prereg):
    """The page rounds to three figures; decision.json keeps every digit of the value the rule compared,
    and each condition's words beside its machine-readable fields."""
    probes, anchors = _write_inputs(tmp_path / "in", SPREAD, FLAT)
    decision = _build(tmp_path / "out", probes, anchors, prereg)
    (condition,) = decision["cells"][0]["verdict"]["criteria"]["clears_signal_bar"]["conditions"]
    assert {k: v for k, v in condition.items() if k != "text"} == {
        "read": "median_group_std_progress_cm",
        "value": math.sqrt(0.5 / 3),
        "op": ">=",
        "threshold": 0.25,
        "source": "analysis.signal_bar_cm",
        "passed": True,
    }
    assert condition["text"] == (
        "median group std 0.408 cm [0.408, 0.408] is at or above the 0.25 cm signal bar: passes"
    )
    assert condition["text"] in (tmp_path / "out" / "decision.md").read_text()
    assert "0.4082" not in (tmp_path / "out" / "decision.md").read_text()
