"""The signal bar every figure draws is the registered rule's: its signal condition's threshold, a number
the same for every cell or the cell's own chaos floor, and no line where the rule has neither.

Why: the figures once drew ``analysis.signal_bar_cm`` whatever the rule compared with, so the five
chaos-floor designs (Pusher, MetaWorld: ``prereg/rules/signal_over_chaos_floor.yaml``) showed a "signal bar
0.25 cm" line no verdict of theirs was decided against. Only the rule's module reads the field by name.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from matplotlib.figure import Figure

from grpo_probe.analysis.cells.chaos import SeedChaos
from grpo_probe.analysis.cells.group_stats import SeedGroup
from grpo_probe.analysis.page import cell_figures, summary_figures
from grpo_probe.analysis.page.figure_canvas import BarLine
from grpo_probe.analysis.page.figure_set import bar_line
from grpo_probe.analysis.page.report import build_decision
from grpo_probe.analysis.rule.glossary import number
from grpo_probe.prereg import load_prereg
from grpo_probe.prereg.rule import SignalBar, parse_analysis_sections
from shipped_files import extending

from .rollout_factory import anchor_rows, as_prereg, probe_rows, write_table
from .test_replay_reads import AR_DRAWS, REPLAY, SEEDS, _replay_rows, _write_replays

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "grpo_probe"
FIELD = "signal_bar_cm"
CHAOS_FLOOR_RULE = "rules/signal_over_chaos_floor.yaml"


CHAOS_FLOOR_DESIGNS = sorted(p.relative_to(REPO / "prereg").as_posix() for p in extending(CHAOS_FLOOR_RULE))
"""The shipped designs whose signal clause compares with each cell's chaos floor, wherever they lie."""


def test_only_the_rule_module_reads_the_signal_bar_field_by_name() -> None:
    """The page, the figures, the clause words and the template take the bar from the rule: no module or
    template of the package but ``prereg/rule.py`` names the analysis field."""
    naming = sorted(
        p.relative_to(PACKAGE).as_posix()
        for pattern in ("*.py", "*.j2")
        for p in PACKAGE.rglob(pattern)
        if FIELD in p.read_text(encoding="utf-8")
    )
    assert naming == ["prereg/rule.py"]


def test_the_default_designs_bar_is_its_registered_number() -> None:
    prereg = load_prereg(REPO / "prereg" / "grpo_signal_probe.yaml")
    bar = prereg.decision_rule.signal_bar
    assert bar is not None and (bar.role, bar.name, bar.scale) == ("signal bar", "signal bar", "")
    assert bar.condition.read == "choice_std_cm.lower"
    assert bar.fixed == prereg.analysis.signal_bar_cm == 0.25
    assert bar_line(bar, {"chaos_std_cm": 9.0}) == BarLine(0.25, "signal bar 0.25 cm")  # not the floor


def test_some_shipped_designs_compare_with_the_chaos_floor() -> None:
    """The parametrised test below has designs to read: the set comes from the designs, not from a count."""
    assert CHAOS_FLOOR_DESIGNS, "no shipped design extends rules/signal_over_chaos_floor.yaml"


@pytest.mark.parametrize("design", CHAOS_FLOOR_DESIGNS)
def test_a_chaos_floor_designs_bar_is_each_cells_chaos_floor(design: str) -> None:
    prereg = load_prereg(REPO / "prereg" / design)
    bar = prereg.decision_rule.signal_bar
    assert bar is not None and bar.name == "chaos floor"
    assert bar.fixed is None  # no registered number: analysis.signal_bar_cm is not the bar
    assert bar.on({"chaos_std_cm": 1.37189}) == 1.37189
    assert bar_line(bar, {"chaos_std_cm": 1.37189}) == BarLine(1.37189, "chaos floor 1.37 cm")
    assert bar_line(bar, {"chaos_std_cm": None}) is None  # a cell without replays draws no bar
    assert bar_line(bar, {}) is None


def _rule(all_of: list[dict[str, Any]], analysis: dict[str, Any] | None = None) -> SignalBar | None:
    smoke = yaml.safe_load((REPO / "prereg" / "smoke.yaml").read_text())
    raw = {
        "criteria": {"spread": {"description": "d", "all_of": all_of}},
        "qualifies": {"ar": ["spread"], "flow": ["spread"]},
        "arm_choice": {"rank_by": []},
    }
    _, rule = parse_analysis_sections({"analysis": analysis or smoke["analysis"], "decision_rule": raw}, "t")
    return rule.signal_bar


def test_a_scaled_bar_names_its_scale_and_the_value_it_compares() -> None:
    floor = _rule(
        [{"read": "choice_std_cm.lower", "op": ">=", "threshold": {"read": "chaos_std_cm", "scale": 0.5}}]
    )
    assert floor is not None and floor.name == "0.5 x chaos floor"
    assert bar_line(floor, {"chaos_std_cm": 1.3}) == BarLine(0.65, "0.5 x chaos floor (0.65 cm)")
    doubled = _rule(
        [{"read": "median_group_std_progress_cm", "op": ">", "threshold": {"analysis": FIELD, "scale": 2.0}}]
    )
    assert doubled is not None and doubled.fixed == 0.5
    assert bar_line(doubled, {}) == BarLine(0.5, "2 x signal bar (0.5 cm)")


@pytest.mark.parametrize(
    "condition",
    [
        {"read": "median_group_std_progress_cm", "op": ">=", "threshold": 0.25},  # a bare number
        {"read": "choice_std_cm", "op": "<=", "threshold": {"read": "chaos_std_cm"}},  # an upper limit
        {
            "read": "choice_std_cm",
            "op": ">=",
            "threshold": {"read": "median_group_std_progress_cm"},
        },  # not the floor
        {"read": "mean_progress_delta_cm", "op": ">=", "threshold": {"analysis": "competence_tol_cm"}},
    ],
)
def test_a_rule_with_no_signal_bar_draws_none(condition: dict[str, Any]) -> None:
    assert _rule([condition]) is None
    assert bar_line(None, {"chaos_std_cm": 1.0}) is None


# -- the figures of a built decision ------------------------------------------------------------------
def _dashed(fig: Figure) -> dict[str, tuple[float, float]]:
    """A figure's dashed lines by legend label: (first x, first y) of each (an unlabelled one under "")."""
    out = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_linestyle() == "--":
                label = line.get_label()
                out["" if label.startswith("_") else label] = (
                    float(line.get_xdata()[0]),
                    float(line.get_ydata()[0]),
                )
    return out


def _build(tmp_path: Path, prereg: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict]:
    """A decision on two replayed cells, with every figure it draws (by file name) kept for inspection."""
    drawn: dict[str, Figure] = {}
    for module in (cell_figures, summary_figures):
        original = module.save_png

        def keep(fig: Figure, path: Any, _original: Any = original) -> Path:
            drawn[Path(path).name] = fig
            return _original(fig, path)

        monkeypatch.setattr(module, "save_png", keep)
    c1 = probe_rows("c1", "ar_arm", "ar", {s: AR_DRAWS for s in SEEDS})
    c3 = probe_rows("c3", "teacher", "flow", {s: [4.0, 5.0, 5.5, 6.0] for s in SEEDS}, contact=True)
    probes = {"c1": write_table(tmp_path / "c1.parquet", c1), "c3": write_table(tmp_path / "c3.parquet", c3)}
    anchors = {
        "ar_arm": write_table(
            tmp_path / "a_ar.parquet", anchor_rows("ar_arm", "ar", {s: 6.0 for s in SEEDS})
        ),
        "teacher": write_table(
            tmp_path / "a_fl.parquet", anchor_rows("teacher", "flow", {s: 5.0 for s in SEEDS}, contact=True)
        ),
    }
    replays = {
        "c1": [_write_replays(tmp_path / "r1.parquet", _replay_rows(c1, (1.0, -1.0)))],
        "c3": [_write_replays(tmp_path / "r3.parquet", _replay_rows(c3, (0.5, -0.5)))],
    }
    out = tmp_path / "out"
    decision = build_decision(
        probes,
        anchors,
        as_prereg(prereg),
        out / "decision.md",
        out / "decision.json",
        out / "figures",
        [(str(p), "0" * 64) for p in (*probes.values(), *anchors.values())],
        replay_tables=replays,
    )
    return decision, drawn


def _with_signal(prereg: dict[str, Any], threshold: Any) -> dict[str, Any]:
    prereg = copy.deepcopy(prereg) | {"replay": REPLAY}
    prereg["decision_rule"]["criteria"]["clears_signal_bar"]["all_of"] = [
        {"read": "choice_std_cm.lower", "op": ">=", "threshold": threshold},
        {"read": "chaos_share.upper", "op": "<=", "threshold": 0.5},
    ]
    return prereg


def test_a_chaos_floor_rules_figures_draw_each_cells_floor_and_no_signal_bar(
    tmp_path: Path, prereg: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    prereg["analysis"]["signal_bar_cm"] = 0.4  # registered, and read by no condition of this rule
    decision, drawn = _build(tmp_path, _with_signal(prereg, {"read": "chaos_std_cm"}), monkeypatch)
    floors = {c["id"]: c["reads"]["chaos_std_cm"] for c in decision["cells"]}
    assert floors["c1"] == pytest.approx(1.0) and floors["c3"] == pytest.approx(0.5)
    for cell, floor in floors.items():
        label = f"chaos floor {number(floor)} cm"
        assert _dashed(drawn[f"group_std_{cell}.png"])[label][0] == floor
        chaos = _dashed(drawn[f"chaos_{cell}.png"])
        assert chaos[label][1] == floor and chaos[""][0] == floor  # horizontal and vertical at the floor
    spread = drawn["group_std_all-cells.png"]
    rows = _dashed(spread)
    assert (
        rows[f"chaos floor {number(floors['c1'])} cm"][0] == floors["c1"]
    )  # each row its own, labelled once
    assert rows[""][0] == floors["c3"]
    assert spread.axes[0].get_title() == "Group spread per cell against the chaos floor"
    labels = [label for fig in drawn.values() for label in _dashed(fig)]
    assert not any("signal bar" in label for label in labels), labels
    # the verdicts were decided against the same floors the figures draw
    for cell in decision["cells"]:
        clause = cell["verdict"]["criteria"]["clears_signal_bar"]["conditions"][0]
        assert clause["threshold"] == floors[cell["id"]]


def test_a_signal_bar_rules_figures_draw_the_registered_bar(
    tmp_path: Path, prereg: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    prereg["analysis"]["signal_bar_cm"] = 0.4
    _, drawn = _build(tmp_path, _with_signal(prereg, {"analysis": FIELD}), monkeypatch)
    for cell in ("c1", "c3"):
        assert _dashed(drawn[f"group_std_{cell}.png"])["signal bar 0.4 cm"][0] == 0.4
        assert _dashed(drawn[f"chaos_{cell}.png"])["signal bar 0.4 cm"][1] == 0.4
    spread = drawn["group_std_all-cells.png"]
    assert _dashed(spread)["signal bar 0.4 cm"][0] == 0.4
    assert spread.axes[0].get_title() == "Group spread per cell against the signal bar"
    assert not any("chaos floor" in label for fig in drawn.values() for label in _dashed(fig))
    # the page lists the registered analysis numbers in their order, the template naming none of them
    md = " ".join((tmp_path / "out" / "decision.md").read_text().split())
    assert (
        "Registered analysis numbers: group_std_ddof 1 (within-group std), signal_bar_cm 0.4, "
        "degenerate_tol_cm 0.05, competence_tol_cm 0.5, away_tail_cm -2, swat_speed_m_s 0.6; percentile"
    ) in md


def test_a_cell_without_a_bar_gets_figures_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rule with no bar, or a chaos floor undefined for the cell: the spread figures draw no bar line
    (only the degenerate tolerance, dotted) and still have a symmetric-log axis to draw on."""
    drawn: dict[str, Figure] = {}
    monkeypatch.setattr(cell_figures, "save_png", lambda fig, path: drawn.setdefault(Path(path).name, fig))
    groups = [SeedGroup(s, 4, std, std, 5.0, True) for s, std in enumerate((0.5, 2.0, 8.0))]
    cell_figures.plot_group_std(tmp_path / "group_std.png", "c1", groups, None, 0.0, 1.0)
    seeds = [SeedChaos(s, v, v / 4, (1.0,)) for s, v in enumerate((1.0, 4.0, 16.0))]
    cell_figures.plot_chaos(tmp_path / "chaos.png", "c1", seeds, None, 0.05)
    monkeypatch.setattr(summary_figures, "save_png", lambda fig, path: drawn.setdefault(Path(path).name, fig))
    row = summary_figures.SpreadRow("c1", (0.5, 2.0), summary_figures.Interval(1.25, 0.5, 2.0))
    summary_figures.plot_spread_by_cell(tmp_path / "spread.png", [row], None, 1.0, 0.95, None)
    assert set(drawn) == {"group_std.png", "chaos.png", "spread.png"}
    assert drawn["spread.png"].axes[0].get_title() == "Group spread per cell"
    assert all(_dashed(fig) == {} for fig in drawn.values())
    assert "linear within ±1" in drawn["group_std.png"].axes[0].get_xlabel()
