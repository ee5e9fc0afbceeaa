"""decision.md's figure set: every cell's figures and the all-cells figures, drawn from the cells' records.

Why apart from :mod:`grpo_probe.analysis.page.summary_figures` and
:mod:`grpo_probe.analysis.page.cell_figures` (how one figure is drawn): this module decides which figures a
decision has, what each is drawn from and where each file goes, linked relative to the page.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from grpo_probe.analysis.cells.cell_analysis import CellResult
from grpo_probe.analysis.cells.tables import RolloutTable
from grpo_probe.analysis.page.cell_figures import (
    plot_chaos,
    plot_competence,
    plot_entropy,
    plot_group_std,
    plot_guard_rates,
    plot_trajectories,
)
from grpo_probe.analysis.page.figure_canvas import BarLine
from grpo_probe.analysis.page.figure_names import figure_slug
from grpo_probe.analysis.page.summary_figures import (
    ClausePanel,
    ClauseRow,
    CompetenceRow,
    Interval,
    SpreadRow,
    plot_competence_by_cell,
    plot_rule_clauses,
    plot_spread_by_cell,
)
from grpo_probe.analysis.rule.decision_rule import read_words
from grpo_probe.analysis.rule.glossary import number
from grpo_probe.envs.boat.spec import BOAT_ID
from grpo_probe.envs.protocol import EnvSpec
from grpo_probe.prereg import AnalysisNumbers, Cell
from grpo_probe.prereg.rule import Condition, DecisionRule, ReadRef, SignalBar

__all__ = ["bar_line", "draw_figures", "draw_rule_figure", "table_outline"]


def table_outline(env: EnvSpec) -> tuple[float, float, float, float] | None:
    """The boat scene's table as (x0, y0, x1, y1) in metres, read from the ``table`` geom of its scene.xml;
    None for another environment, whose view declares no table.

    Why from the scene file: the trajectory figure outlines the table the boat can be knocked off, and the
    scene is the one place its size is stated.
    """
    if env.id != BOAT_ID:
        return None
    scene = ElementTree.fromstring(resources.files("grpo_probe.envs.boat").joinpath("scene.xml").read_text())
    geom = scene.find(".//geom[@name='table']")
    if geom is None:
        return None
    x, y = (float(v) for v in geom.get("pos", "0 0 0").split()[:2])
    hx, hy = (float(v) for v in geom.get("size", "0 0 0").split()[:2])
    return (x - hx, y - hy, x + hx, y + hy)


def _interval(reads: Mapping[str, Any], read: str) -> Interval:
    return Interval(reads.get(read), reads.get(f"{read}_ci_low"), reads.get(f"{read}_ci_high"))


def bar_line(bar: SignalBar | None, reads: Mapping[str, Any]) -> BarLine | None:
    """The rule's signal bar on one cell as its figures draw it: where it lies, from the cell's reads, and
    its label (``signal bar 0.25 cm``, ``chaos floor 1.37 cm``); None where the rule has no bar or the
    cell none (a chaos floor on a cell without replays).

    Why from the rule's condition: the line is the threshold the cell's verdict was decided against, so a
    design whose rule compares the choice std with the cell's chaos floor draws that floor. A registered
    bar prints as registered; a measured floor at the page's three figures.
    """
    if bar is None:
        return None
    value = bar.on(reads)
    if value is None or not math.isfinite(value):
        return None
    return BarLine(value, bar.label(f"{value:g}" if bar.fixed is not None else number(value)))


def _linthresh(*candidates: float | None) -> float:
    """The first positive, finite candidate: the half-width of a symmetric-log axis's linear part (1 cm
    where none is: a rule without a registered bar and a design without a degenerate tolerance)."""
    return next((c for c in candidates if c is not None and math.isfinite(c) and c > 0), 1.0)


def _all_cells_rows(
    parts: Sequence[CellResult], bar: SignalBar | None = None
) -> tuple[list[SpreadRow], list[CompetenceRow]]:
    """The rows of the two all-cells figures, from the cells' records: the numbers decision.json holds;
    a spread row carries the cell's own bar where the rule's differs from cell to cell."""
    spread, competence = [], []
    for part in parts:
        record, reads = part.record, part.record["reads"]
        replay = record["replay"]
        spread.append(
            SpreadRow(
                cell=record["id"],
                group_std_cm=tuple(s["std_progress_cm"] for s in record["seeds"]),
                median=_interval(reads, "median_group_std_progress_cm"),
                replay_std_cm=()
                if replay is None
                else tuple(s["chaos_std_cm"] for s in replay["seeds"] if s["chaos_std_cm"] is not None),
                choice=None if replay is None else _interval(reads, "choice_std_cm"),
                bar=None if bar is None or bar.fixed is not None else bar_line(bar, reads),
            )
        )
        competence.append(
            CompetenceRow(
                cell=record["id"],
                delta_cm=tuple(s["progress_delta_cm"] for s in record["seeds"]),
                mean=_interval(reads, "mean_progress_delta_cm"),
            )
        )
    return spread, competence


def draw_figures(
    cells: Sequence[Cell],
    parts: Mapping[str, CellResult],
    probes: Mapping[str, RolloutTable],
    anchors: Mapping[str, RolloutTable],
    analysis: AnalysisNumbers,
    rule: DecisionRule,
    figures_dir: Path,
    link_base: Path,
    disk_radius_m: float,
    table: tuple[float, float, float, float] | None = None,
) -> dict[str, Any]:
    """Every cell's figures and the all-cells figures, written under ``figures_dir``; returns their links
    relative to ``link_base`` (per cell, and the all-cells ones by kind).

    The signal bar each spread figure draws is ``rule``'s (:attr:`DecisionRule.signal_bar`): a registered
    number the same for every cell, the cell's own chaos floor, or no line where the rule has neither.
    """
    slugs = {c.id: figure_slug(c.id) for c in cells}
    if len(set(slugs.values())) != len(slugs):
        raise ValueError(
            f"cell ids {sorted(slugs)} collide once made file-name safe: {sorted(slugs.values())}"
        )

    def link(path: Path) -> str:
        return Path(os.path.relpath(path, link_base)).as_posix()

    signal_bar = rule.signal_bar
    fixed = None if signal_bar is None else signal_bar.fixed
    spread_linthresh = _linthresh(analysis.degenerate_tol_cm, fixed)
    per_cell: dict[str, dict[str, str]] = {}
    for cell in cells:
        part, slug = parts[cell.id], slugs[cell.id]
        bar = bar_line(signal_bar, part.record["reads"])
        files = {
            "group_std": plot_group_std(
                figures_dir / f"group_std_{slug}.png",
                cell.id,
                part.groups,
                bar,
                analysis.degenerate_tol_cm,
                spread_linthresh,
            ),
            "competence": plot_competence(
                figures_dir / f"competence_{slug}.png", cell.id, probes[cell.id], part.joins
            ),
            "trajectories": plot_trajectories(
                figures_dir / f"trajectories_{slug}.png",
                cell.id,
                part.record["median_seed"],
                probes[cell.id],
                anchors[cell.arm],
                disk_radius_m,
                table,
            ),
        }
        if part.chaos is not None:
            files["chaos"] = plot_chaos(
                figures_dir / f"chaos_{slug}.png",
                cell.id,
                part.chaos.seeds,
                bar,
                _linthresh(fixed, analysis.degenerate_tol_cm),
            )
        if part.entropy is not None:
            files["entropy"] = plot_entropy(
                figures_dir / f"entropy_{slug}.png", cell.id, probes[cell.id], part.entropy
            )
        per_cell[cell.id] = {name: link(path) for name, path in files.items()}
    guards = plot_guard_rates(
        figures_dir / "guard_rates_all-cells.png", [c.id for c in cells], [parts[c.id].rates for c in cells]
    )
    spread, competence = _all_cells_rows([parts[c.id] for c in cells], signal_bar)
    confidence = analysis.bootstrap.interval_confidence
    # Named <kind>_all-cells.png like the guard-rate figure, so Snakemake's report files them beside it.
    spread_png = plot_spread_by_cell(
        figures_dir / "group_std_all-cells.png",
        spread,
        None if fixed is None else bar_line(signal_bar, {}),
        spread_linthresh,
        confidence,
        None if signal_bar is None else signal_bar.name,
    )
    competence_png = plot_competence_by_cell(
        figures_dir / "competence_all-cells.png", competence, analysis.competence_tol_cm, confidence
    )
    return {
        "cells": per_cell,
        "guard_rates": link(guards),
        "group_std": link(spread_png),
        "competence": link(competence_png),
    }


_OPS = {">=": "\u2265", "<=": "\u2264", ">": ">", "<": "<"}


def _clause_title(criterion: str, condition: Mapping[str, Any]) -> str:
    """``signal: choice std, lower end ≥ 0.25 cm``: the clause in the page's words."""
    ref = ReadRef.parse(condition["read"])
    words, unit = read_words(ref.name)
    end = "" if ref.bound is None else f", {ref.bound} end"
    bar = Condition.from_record(condition).bar_text(number, lambda read: read_words(read)[0], unit)
    return f"{criterion}: {words}{end} {_OPS.get(condition['op'], condition['op'])} {bar}"


def draw_rule_figure(
    cells: Sequence[Mapping[str, Any]],
    rule: Mapping[str, Any],
    path: Path,
    link_base: Path,
    confidence: float,
) -> str:
    """decision.md's first figure, every clause the rule reads across the cells, drawn from the cells'
    records with their verdicts (decision.json's ``cells``) and the rule's record; returns its link
    relative to ``link_base``."""
    panels = []
    for criterion in rule["criteria"]:
        name = criterion["name"]
        for index, condition in enumerate(criterion["all_of"]):
            ref = ReadRef.parse(condition["read"])
            rows = []
            for cell in cells:
                verdict = cell["verdict"]["criteria"][name]["conditions"][index]
                reads = cell["reads"]
                needed = name in rule["qualifies"].get(cell["head"], [])
                rows.append(ClauseRow.of(cell["id"], _interval(reads, ref.name), verdict, needed))
            panels.append(
                ClausePanel(
                    _clause_title(name, condition), read_words(ref.name)[1], condition["op"], tuple(rows)
                )
            )
    plot_rule_clauses(path, panels, [(c["id"], c["verdict"]["qualifies"]) for c in cells], confidence)
    return Path(os.path.relpath(path, link_base)).as_posix()
