"""decision.md, decision.json and the figures: the registered decision, built from the rollout tables.

Why: decision.md is what the researcher reads and the owner signs. Every number it shows is computed once
(each cell in :mod:`grpo_probe.analysis.cells.cell_analysis`, the rule, its error rates and every registered
version here), stored in decision.json at full precision (the value the rule compared), and printed from that
same value by :mod:`grpo_probe.analysis.page.decision_md`, so the two files cannot disagree; only the page
rounds. Same inputs give the same bytes: sorted JSON keys, fixed float digits, deterministic PNGs
(:mod:`grpo_probe.analysis.page.figure_set`), atomic writes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from grpo_probe.analysis.cells.cell_analysis import (
    CellResult,
    analyse_cell,
    check_join_keys,
    check_table_keys,
    gradient_files_by_cell,
    json_float,
    read_join,
    replay_tables_by_cell,
)
from grpo_probe.analysis.cells.joined import join_cell
from grpo_probe.analysis.cells.seed_columns import SeedColumns
from grpo_probe.analysis.cells.tables import read_anchor_table, read_probe_table
from grpo_probe.analysis.error_rates.operating import operating_record
from grpo_probe.analysis.page.decision_md import reads_tsv_text, render_decision_md
from grpo_probe.analysis.page.figure_set import draw_figures, draw_rule_figure, table_outline
from grpo_probe.analysis.rule.decision_rule import evaluate_rule, not_decided
from grpo_probe.analysis.rule.glossary import glossary, guard_flags, qualification_notes
from grpo_probe.analysis.rule.versions import outcome_record, version_records
from grpo_probe.atomic_io import atomic_write_text
from grpo_probe.envs.registry import env_spec
from grpo_probe.prereg import AnalysisNumbers, Prereg
from grpo_probe.provenance.machine import environment_summary

__all__ = [
    "build_decision",
    "decision_json_text",
    "decision_record",
    "reads_tsv_text",
    "render_decision_md",
    "write_decision",
]


def _prereg_info(prereg: Prereg) -> dict[str, str]:
    """The design's identity as decision.json records it."""
    return {"name": prereg.name, "sha256": prereg.sha256, "lock_date": prereg.lock_date or "unlocked"}


def _hours_or_seconds(value: Any, field: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{field} must be a finite number >= 0, got {value!r}")
    return json_float(float(value))


def _compute_section(
    compute: Sequence[Mapping[str, Any]] | None, gate: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """Per-stage CPU-seconds, GPU-seconds (None: no GPU used) and peak RSS, totals in hours, and the gate."""
    if compute is None:
        return None
    rows = []
    for i, row in enumerate(compute):
        stage = row.get("stage")
        if not isinstance(stage, str):
            raise ValueError(f"compute[{i}].stage must be a string, got {stage!r}")
        gpu_s = row.get("gpu_s")
        rows.append(
            {
                "stage": stage,
                "cpu_s": _hours_or_seconds(row.get("cpu_s"), f"compute[{i}].cpu_s ({stage})"),
                "gpu_s": None if gpu_s is None else _hours_or_seconds(gpu_s, f"compute[{i}].gpu_s ({stage})"),
                "max_rss_mb": _hours_or_seconds(row.get("max_rss_mb"), f"compute[{i}].max_rss_mb ({stage})"),
            }
        )
    cpu_hours = json_float(sum(r["cpu_s"] for r in rows) / 3600.0)
    gpu_hours = json_float(sum(r["gpu_s"] or 0.0 for r in rows) / 3600.0)
    section: dict[str, Any] = {"stages": rows, "total_cpu_hours": cpu_hours, "total_gpu_hours": gpu_hours}
    if gate is None:
        return section | {"gate": None, "within_gate": None}
    limits = {
        key: _hours_or_seconds(gate.get(key), f"compute_gate.{key}") for key in ("cpu_hours", "gpu_hours")
    }
    within = cpu_hours <= limits["cpu_hours"] and gpu_hours <= limits["gpu_hours"]
    return section | {"gate": limits, "within_gate": within}


def decision_json_text(decision: Mapping[str, Any]) -> str:
    """decision.json's text: sorted keys, two-space indent, floats at full precision, no NaN."""
    return json.dumps(decision, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def build_decision(
    probe_tables: Mapping[str, str | os.PathLike[str]],
    anchor_tables: Mapping[str, str | os.PathLike[str]],
    prereg: Prereg,
    out_md: str | os.PathLike[str],
    out_json: str | os.PathLike[str],
    figures_dir: str | os.PathLike[str],
    provenance: Sequence[tuple[str, str]],
    compute: Sequence[Mapping[str, Any]] | None = None,
    compute_gate: Mapping[str, Any] | None = None,
    *,
    template: str | os.PathLike[str] | None = None,
    join_tables: Mapping[str, str | os.PathLike[str]] | None = None,
    replay_tables: Mapping[str, Sequence[str | os.PathLike[str]]] | None = None,
) -> dict[str, Any]:
    """:func:`decision_record`, written: decision.json and decision.md (rendered from ``template``) beside
    the figures. Returns the record, which is exactly what decision.json holds."""
    decision = decision_record(
        probe_tables, anchor_tables, prereg, Path(out_md).parent, figures_dir, provenance, compute,
        compute_gate, join_tables=join_tables, replay_tables=replay_tables,
    )  # fmt: skip
    write_decision(decision, out_md, out_json, template)
    return decision


def write_decision(
    decision: Mapping[str, Any],
    out_md: str | os.PathLike[str],
    out_json: str | os.PathLike[str],
    template: str | os.PathLike[str] | None = None,
    edit: Callable[[str], str] = str,
) -> None:
    """decision.json and decision.md (the template's text, passed through ``edit``) from the record, each
    written atomically.

    The page opens with its title and outcome whatever ``edit`` adds: text it puts before the title (the
    root copy's note of where it was rendered from, with the sha256 of its decision.json) is moved to the
    end of the page, after the hashes it belongs with.
    """
    atomic_write_text(out_json, decision_json_text(decision))
    atomic_write_text(out_md, edit(render_decision_md(decision, template)))


def decision_record(
    probe_tables: Mapping[str, str | os.PathLike[str]],
    anchor_tables: Mapping[str, str | os.PathLike[str]],
    prereg: Prereg,
    page_dir: str | os.PathLike[str],
    figures_dir: str | os.PathLike[str],
    provenance: Sequence[tuple[str, str]],
    compute: Sequence[Mapping[str, Any]] | None = None,
    compute_gate: Mapping[str, Any] | None = None,
    *,
    join_tables: Mapping[str, str | os.PathLike[str]] | None = None,
    replay_tables: Mapping[str, Sequence[str | os.PathLike[str]]] | None = None,
    gradient_files: Mapping[str, str | os.PathLike[str]] | None = None,
) -> dict[str, Any]:
    """Analyse every enabled cell, apply the registered rule and draw the figures (linked relative to
    ``page_dir``, the folder the decision page will be in): the decision record, not yet written.

    Why apart from :func:`build_decision`: the workflow's decision step adds to the record (the design's
    files) and maps its paths before anything is written, so decision.json and decision.md are each
    written once, from the final record.

    ``probe_tables``: cell id -> probe table (the merged cell table); ``anchor_tables``: arm id -> anchor
    table; ``prereg``: the registered design; ``provenance``: (artifact path, sha256) pairs for the footer;
    ``compute``: per stage ``{stage, cpu_s, gpu_s, max_rss_mb}``; ``compute_gate``: ``{cpu_hours,
    gpu_hours}``; ``join_tables``: cell id -> the join rule's table, whose per-seed group statistics are
    the ones reported (without it they are joined here, by the same code); ``replay_tables``: cell id ->
    its replay tables (the replay rule's, one per shard), read when the design registers replays;
    ``gradient_files``: cell id -> its gradient file (the gradients rule's), read when the design
    registers the gradient reads (``analysis.gradient_reads``). Besides
    this run's outcome, the record holds what every registered version of the rule decides on the same
    tables (``versions``).
    Returns the record as decision.json will hold it (through its JSON text: plain types).
    """
    info, where = _prereg_info(prereg), str(prereg.path)
    analysis = prereg.analysis
    env = env_spec(prereg.env)
    cells = prereg.enabled_cells
    check_table_keys(prereg, probe_tables, anchor_tables, where)
    if join_tables is not None:
        check_join_keys(prereg, join_tables, where)
    used_arms = sorted({c.arm for c in cells})
    anchors = {
        arm: read_anchor_table(anchor_tables[arm], arm, prereg.arm_head(arm), env=env) for arm in used_arms
    }
    probes = {
        c.id: read_probe_table(probe_tables[c.id], c.id, c.arm, c.head, analysis.group_std_ddof, env=env)
        for c in cells
    }
    joined = {
        c.id: join_cell(c.id, probes[c.id], anchors[c.arm], analysis)
        if join_tables is None
        else read_join(join_tables[c.id], c, probes[c.id])
        for c in cells
    }
    replays = replay_tables_by_cell(prereg, replay_tables, env.episode_schema, where)
    gradients = gradient_files_by_cell(prereg, gradient_files, probes, where)
    reads: dict[str, dict[str, float | None]] = {}
    parts: dict[str, CellResult] = {}
    for cell in cells:
        reads[cell.id], parts[cell.id] = analyse_cell(
            cell, probes[cell.id], anchors[cell.arm], joined[cell.id], analysis, replays.get(cell.id),
            gradients.get(cell.id),
        )  # fmt: skip
    verdicts, outcome = evaluate_rule(prereg.decision_rule, cells, reads)
    columns = {c.id: parts[c.id].columns for c in cells}

    def reads_for(numbers: AnalysisNumbers) -> tuple[dict[str, Any], dict[str, SeedColumns]]:
        """Reads and per-seed columns under another version's analysis numbers (this run's are reused where
        only how the error rates are simulated differs, which changes no read)."""
        if dataclasses.replace(numbers, operating=analysis.operating) == analysis:
            return reads, columns
        other_reads, other_columns = {}, {}
        for c in cells:
            other = join_cell(c.id, probes[c.id], anchors[c.arm], numbers)
            other_reads[c.id], part = analyse_cell(
                c, probes[c.id], anchors[c.arm], other, numbers, replays.get(c.id), gradients.get(c.id)
            )
            other_columns[c.id] = part.columns
        return other_reads, other_columns

    versions = version_records(prereg, cells, reads_for, outcome)
    replay = prereg.replay
    operating = operating_record(
        prereg.decision_rule,
        cells,
        reads,
        columns,
        0 if replay is None else len(replay.seeds),
        0 if replay is None else replay.replays,
        analysis,
        outcome,
    )
    worst = operating.get("worst_point")
    if worst is not None and worst["above_target"]:
        outcome = not_decided(
            outcome, worst["rate"]["percent"], operating["false_go_target_percent"], worst["point"]
        )

    figures = draw_figures(
        cells,
        parts,
        probes,
        anchors,
        analysis,
        prereg.decision_rule,
        Path(figures_dir),
        Path(page_dir),
        env.view.target_radius_m,
        table_outline(env),
    )
    cells_out = []
    for cell, verdict in zip(cells, verdicts, strict=True):
        record = dict(parts[cell.id].record)
        record["figures"] = figures["cells"][cell.id]
        record["verdict"] = {
            "qualifies": verdict.qualifies,
            "criteria": {
                name: {
                    "passed": ok,
                    "conditions": [c.to_record() for c in conditions],
                }
                for name, ok, conditions in verdict.criteria
            },
        }
        cells_out.append(record)
    required = {head: list(names) for head, names in prereg.decision_rule.qualifies}
    notes = qualification_notes([{"head": c["head"], **c["verdict"]} for c in cells_out], required)
    for record, note in zip(cells_out, notes, strict=True):
        record["verdict"]["note"] = note
        record["verdict"]["flags"] = guard_flags(record["guards"], record["verdict"]["qualifies"])
    rule = prereg.decision_rule
    decision: dict[str, Any] = {
        "format": "grpo-probe decision 1",
        "prereg": info,
        "env": {
            "id": env.id,
            "version": env.version,
            "engagement": env.engagement,
            "state_perturbation": env.state_perturbation,
        },
        "analysis": analysis.to_dict(),
        "replay": None if prereg.replay is None else prereg.replay.to_dict(),
        "decision_rule": rule.to_record(),
        "glossary": glossary(prereg, env),
        "cells": cells_out,
        "outcome": outcome_record(outcome),
        "operating": operating,
        "versions": versions,
        "figures": {
            **{name: figures[name] for name in ("competence", "group_std", "guard_rates")},
            # Named <kind>_all-cells.png like the others, so Snakemake's report files it beside them.
            "rule": draw_rule_figure(
                cells_out,
                rule.to_record(),
                Path(figures_dir) / "rule_all-cells.png",
                Path(page_dir),
                analysis.bootstrap.interval_confidence,
            ),
        },
        "compute": _compute_section(compute, compute_gate),
        "provenance": [{"path": str(p), "sha256": str(h)} for p, h in sorted(provenance)],
        # the lock and numerics setting the decision's bytes hold for (docs/auditing.md, "On another machine")
        "environment": environment_summary(),
    }
    return json.loads(decision_json_text(decision))
