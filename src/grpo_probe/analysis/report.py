"""decision.md, decision.json and the figures: the registered decision, built from the rollout tables.

Why: decision.md is what the researcher reads and the owner signs. Every number it shows is computed
here once, stored in decision.json at full precision (the value the rule compared), and printed from
that same value, so the two files cannot disagree; only the page rounds.
Same inputs give the same bytes: sorted JSON keys, fixed float digits, deterministic PNGs, atomic writes.

The page is written for a reader who has not seen the design: the outcome in one sentence that says what
every cell passed or failed, the two figures that show why (group spread against the signal bar,
competence against the anchor), and one line of reasons per cell fit in one screen; the reads, the version
history, the registered design and the hashes follow below. It prints numbers at three significant figures
(:func:`grpo_probe.analysis.glossary.number`); decision.json keeps every digit of the values the rule read.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import jinja2
import pyarrow as pa

from grpo_probe.analysis.anchor_join import SeedJoin
from grpo_probe.analysis.chaos import ReplayDraws, replay_draws
from grpo_probe.analysis.decision_rule import evaluate_rule, rank_text, read_words
from grpo_probe.analysis.entropy import EntropySummary, entropy_summary
from grpo_probe.analysis.figures import (
    CompetenceRow,
    Interval,
    SpreadRow,
    plot_chaos,
    plot_competence,
    plot_competence_by_cell,
    plot_entropy,
    plot_group_std,
    plot_guard_rates,
    plot_spread_by_cell,
    plot_trajectories,
)
from grpo_probe.analysis.glossary import count_words, glossary, guard_flags, number, qualification_notes
from grpo_probe.analysis.group_stats import SeedGroup, median_seed
from grpo_probe.analysis.guards import GuardRate, guard_rates
from grpo_probe.analysis.joined import JoinedCell, join_cell, read_joined_table
from grpo_probe.analysis.operating import operating_record
from grpo_probe.analysis.reads import cell_reads, read_rows
from grpo_probe.analysis.seed_columns import SeedColumns, seed_columns
from grpo_probe.analysis.tables import RolloutTable, read_anchor_table, read_probe_table
from grpo_probe.analysis.versions import outcome_record, rule_record, version_records
from grpo_probe.atomic_io import atomic_write_text
from grpo_probe.envs.boat.spec import BOAT_ID
from grpo_probe.envs.protocol import EnvSpec
from grpo_probe.envs.registry import env_spec
from grpo_probe.prereg import AnalysisNumbers, Cell, Prereg
from grpo_probe.rollout.replay import read_replay_table
from grpo_probe.sampling import mode_params

__all__ = [
    "build_decision",
    "decision_json_text",
    "decision_record",
    "default_template",
    "reads_tsv_text",
    "render_decision_md",
    "write_decision",
]


def default_template() -> Path:
    """The package's ``templates/decision.md.j2``, found through :mod:`importlib.resources`.

    Why package data: a non-editable install renders decision.md without the source tree; a path (not a
    resource handle) because jinja2 loads the template's folder and errors name the file.
    """
    found = resources.files("grpo_probe.analysis").joinpath("templates", "decision.md.j2")
    if not isinstance(found, Path):
        raise RuntimeError(f"{found}: the template must be a file on disk (grpo_probe in an archive)")
    return found


def _q(x: float | None) -> float | None:
    """A read as decision.json holds it: every digit (-0.0 as 0.0, so a printed sign is stable), and None
    where it is undefined (None or NaN: a rank correlation of draws whose rewards never differ, a chaos
    share of groups without spread)."""
    return None if x is None or not math.isfinite(x) else float(x) + 0.0


def _slug(cell: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", cell)


def _prereg_info(prereg: Prereg) -> dict[str, str]:
    """The design's identity as decision.json records it."""
    return {"name": prereg.name, "sha256": prereg.sha256, "lock_date": prereg.lock_date or "unlocked"}


def _mode_record(cell: Cell) -> dict[str, Any]:
    """The cell's sampling mode as a mapping of the fields its kind takes."""
    return {"kind": cell.mode.kind, **mode_params(cell.mode)}


def _check_table_keys(
    prereg: Prereg, probe_tables: Mapping[str, Any], anchor_tables: Mapping[str, Any], where: str
) -> None:
    enabled = [c.id for c in prereg.enabled_cells]
    without = [c for c in enabled if c not in probe_tables]
    unknown = sorted(set(probe_tables) - set(enabled))
    if without or unknown:
        raise ValueError(
            f"{where}: cells: probe tables do not match the enabled cells: enabled cells without a table "
            f"{without}, tables for unknown or disabled cells {unknown}"
        )
    for arm in sorted(anchor_tables):
        if arm not in prereg.arms:
            raise ValueError(
                f"{anchor_tables[arm]}: anchor table for arm {arm!r}, which {where} does not register"
            )
    for cell in prereg.enabled_cells:
        if cell.arm not in anchor_tables:
            raise ValueError(
                f"{probe_tables[cell.id]}: cell {cell.id} (arm {cell.arm}) has no anchor rows: "
                f"no anchor table was given for arm {cell.arm}"
            )


def _check_join_keys(prereg: Prereg, join_tables: Mapping[str, Any], where: str) -> None:
    enabled = [c.id for c in prereg.enabled_cells]
    without = [c for c in enabled if c not in join_tables]
    unknown = sorted(set(join_tables) - set(enabled))
    if without or unknown:
        raise ValueError(
            f"{where}: cells: join tables do not match the enabled cells: enabled cells without a join "
            f"table {without}, join tables for unknown or disabled cells {unknown}"
        )


def _read_join(path: str | os.PathLike[str], cell: Cell, probe: RolloutTable) -> JoinedCell:
    """The cell's join table, checked against the cell's own table: the same seeds, K draws each."""
    joined = read_joined_table(path, cell.id, cell.arm, probe.seeds.tolist())
    k = int(probe.seeds.size and probe.rows_of(int(probe.seeds[0])).size)
    odd = [g for g in joined.groups if g.k != k]
    if odd:
        raise ValueError(
            f"{path}: column k: seed {odd[0].seed} has k={odd[0].k}, but cell {cell.id}'s table "
            f"({probe.path}) holds K={k} draws per seed"
        )
    return joined


def _replay_tables(
    prereg: Prereg,
    replay_tables: Mapping[str, Sequence[str | os.PathLike[str]]] | None,
    episode_schema: Any,
    where: str,
) -> dict[str, Any]:
    """Per enabled cell, its replay tables read and concatenated (none when the design registers none)."""
    if prereg.replay is None:
        if replay_tables:
            raise ValueError(f"{where}: replay tables were given, but the design registers no replay section")
        return {}
    enabled = [c.id for c in prereg.enabled_cells]
    given = dict(replay_tables or {})
    if sorted(given) != sorted(enabled):
        raise ValueError(
            f"{where}: replay: the design registers replays, so every enabled cell needs its replay tables "
            f"(enabled cells: {enabled}; tables given for: {sorted(given)})"
        )
    out = {}
    for cell, paths in given.items():
        tables = [read_replay_table(p, episode_schema) for p in paths]
        out[cell] = pa.concat_tables(tables) if tables else None
    return out


def _hours_or_seconds(value: Any, field: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{field} must be a finite number >= 0, got {value!r}")
    return _q(float(value))


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
    cpu_hours = _q(sum(r["cpu_s"] for r in rows) / 3600.0)
    gpu_hours = _q(sum(r["gpu_s"] or 0.0 for r in rows) / 3600.0)
    section: dict[str, Any] = {"stages": rows, "total_cpu_hours": cpu_hours, "total_gpu_hours": gpu_hours}
    if gate is None:
        return section | {"gate": None, "within_gate": None}
    limits = {
        key: _hours_or_seconds(gate.get(key), f"compute_gate.{key}") for key in ("cpu_hours", "gpu_hours")
    }
    within = cpu_hours <= limits["cpu_hours"] and gpu_hours <= limits["gpu_hours"]
    return section | {"gate": limits, "within_gate": within}


@dataclass(frozen=True)
class _CellResult:
    """One cell's analysis: its decision.json record and what its figures are drawn from."""

    record: dict[str, Any]
    groups: list[SeedGroup]
    joins: list[SeedJoin]
    rates: list[GuardRate]
    entropy: EntropySummary | None
    columns: SeedColumns
    chaos: ReplayDraws | None = None


def _total_std(reads: Mapping[str, float | None]) -> float | None:
    """sqrt(sigma_b^2 + sigma_w^2): the spread of one reward that the decomposition splits (pooled)."""
    choice, chaos = reads.get("choice_std_cm"), reads.get("chaos_std_cm")
    return None if choice is None or chaos is None else math.hypot(choice, chaos)


def _chaos_record(chaos: ReplayDraws, reads: Mapping[str, float | None]) -> dict[str, Any]:
    """decision.json's ``replay`` of a cell: per perturbation what it did, per replayed seed the parts."""
    return {
        "replayed_seeds": len(chaos.seeds),
        "replays": chaos.replays,
        "total_std_cm": _q(_total_std(reads)),
        "median_group_std_cm": _q(chaos.median_group_std_cm),
        "diverged_fraction": _q(chaos.diverged_fraction),
        "perturbations": [
            {
                "index": p.index,
                "kind": p.kind,
                "scale": p.scale,
                "replays": p.replays,
                "median_abs_change_cm": _q(p.median_abs_change_cm),
                "diverged_fraction": _q(p.diverged_fraction),
                "median_divergence_tick": _q(p.median_divergence_tick),
            }
            for p in chaos.perturbations
        ],
        "seeds": [
            {
                "seed": s.seed,
                "group_std_cm": _q(s.group_std_cm),
                "replay_std_cm": _q(s.replay_std_cm),
                "choice_std_cm": _q(s.choice_std_cm),
                "chaos_std_cm": None
                if s.sums is None
                else _q(math.sqrt(s.sums.ss_within / s.sums.df_within)),
            }
            for s in chaos.seeds
        ],
    }


def _cell_analysis(
    cell: Cell,
    probe: RolloutTable,
    anchor: RolloutTable,
    joined: JoinedCell,
    analysis: AnalysisNumbers,
    replays: Any = None,
) -> tuple[dict[str, float | None], _CellResult]:
    """The cell's reads (flat, full precision) and its analysis; figures are drawn by the caller.

    The per-seed group statistics and anchor differences come from ``joined`` (the join table); the
    replays' decomposition, the guard trips and the AR entropy from the cell's tables. Every read is its
    registered statistic over the cell's per-seed columns (:func:`grpo_probe.analysis.reads.cell_reads`).
    """
    groups = list(joined.groups)
    joins = list(joined.joins)
    rates = guard_rates(probe, anchor, analysis)
    entropy = entropy_summary(probe)
    chaos = None if replays is None else replay_draws(probe, replays, analysis, cell.id)
    columns = seed_columns(
        cell, groups, joins, probe, anchor, analysis, None if chaos is None else chaos.seeds
    )
    reads = cell_reads(columns, analysis)
    nondegenerate = sum(g.nondegenerate for g in groups)
    record: dict[str, Any] = {
        "id": cell.id,
        "arm": cell.arm,
        "head": cell.head,
        "mode": _mode_record(cell),
        "mode_text": cell.mode_text(),
        "optional": cell.optional,
        "description": cell.description,
        "probe_table": probe.path,
        "anchor_table": anchor.path,
        "join_table": joined.path,
        "n_seeds": len(groups),
        "k": groups[0].k,
        "nondegenerate_count": nondegenerate,
        "median_seed": median_seed(groups),
        "reads": reads,
        "seeds": [
            {
                "seed": g.seed,
                "std_progress_cm": _q(g.std_progress_cm),
                "std_best_point_cm": _q(g.std_best_point_cm),
                "nondegenerate": g.nondegenerate,
                "sampled_mean_progress_cm": _q(j.sampled_mean_progress_cm),
                "anchor_progress_cm": _q(j.anchor_progress_cm),
                "progress_delta_cm": _q(j.progress_delta_cm),
                "sampled_engagement_rate": _q(j.sampled_engagement_rate),
                "anchor_engaged": j.anchor_engaged,
            }
            for g, j in zip(groups, joins, strict=True)
        ],
        "guards": [
            {
                "guard": r.guard,
                "sampled_count": r.sampled_count,
                "sampled_n": r.sampled_n,
                "sampled_rate": _q(r.sampled_rate),
                "anchor_count": r.anchor_count,
                "anchor_n": r.anchor_n,
                "anchor_rate": _q(r.anchor_rate),
            }
            for r in rates
        ],
        "entropy": None
        if entropy is None
        else {
            "n_replans": entropy.n_replans,
            "mean": _q(entropy.mean),
            "p10": _q(entropy.p10),
            "median": _q(entropy.median),
            "p90": _q(entropy.p90),
            "per_replan_index_mean": [_q(v) for v in entropy.per_replan_index_mean],
            "mean_tokens_per_chunk": _q(entropy.mean_tokens_per_chunk),
            "min_tokens_per_chunk": entropy.min_tokens_per_chunk,
            "max_tokens_per_chunk": entropy.max_tokens_per_chunk,
        },
        "replay": None if chaos is None else _chaos_record(chaos, reads),
    }
    return reads, _CellResult(record, groups, joins, rates, entropy, columns, chaos)


def _table_outline(env: EnvSpec) -> tuple[float, float, float, float] | None:
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


def _all_cells_rows(parts: Sequence[_CellResult]) -> tuple[list[SpreadRow], list[CompetenceRow]]:
    """The rows of the two all-cells figures, from the cells' records: the numbers decision.json holds."""
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


def _draw_figures(
    cells: Sequence[Cell],
    parts: Mapping[str, _CellResult],
    probes: Mapping[str, RolloutTable],
    anchors: Mapping[str, RolloutTable],
    analysis: AnalysisNumbers,
    figures_dir: Path,
    link_base: Path,
    disk_radius_m: float,
    table: tuple[float, float, float, float] | None = None,
) -> dict[str, Any]:
    slugs = {c.id: _slug(c.id) for c in cells}
    if len(set(slugs.values())) != len(slugs):
        raise ValueError(
            f"cell ids {sorted(slugs)} collide once made file-name safe: {sorted(slugs.values())}"
        )

    def link(path: Path) -> str:
        return Path(os.path.relpath(path, link_base)).as_posix()

    per_cell: dict[str, dict[str, str]] = {}
    for cell in cells:
        part, slug = parts[cell.id], slugs[cell.id]
        files = {
            "group_std": plot_group_std(
                figures_dir / f"group_std_{slug}.png",
                cell.id,
                part.groups,
                analysis.signal_bar_cm,
                analysis.degenerate_tol_cm,
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
                figures_dir / f"chaos_{slug}.png", cell.id, part.chaos.seeds, analysis.signal_bar_cm
            )
        if part.entropy is not None:
            files["entropy"] = plot_entropy(
                figures_dir / f"entropy_{slug}.png", cell.id, probes[cell.id], part.entropy
            )
        per_cell[cell.id] = {name: link(path) for name, path in files.items()}
    guards = plot_guard_rates(
        figures_dir / "guard_rates_all-cells.png", [c.id for c in cells], [parts[c.id].rates for c in cells]
    )
    spread, competence = _all_cells_rows([parts[c.id] for c in cells])
    confidence = analysis.bootstrap.confidence
    # Named <kind>_all-cells.png like the guard-rate figure, so Snakemake's report files them beside it.
    spread_png = plot_spread_by_cell(
        figures_dir / "group_std_all-cells.png",
        spread,
        analysis.signal_bar_cm,
        analysis.degenerate_tol_cm if analysis.degenerate_tol_cm > 0 else analysis.signal_bar_cm,
        confidence,
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


_HEADS = {"ar": "AR", "flow": "flow"}
"""How the page names a head."""


def _names(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _criterion_order(decision: Mapping[str, Any]) -> list[str]:
    return [c["name"] for c in decision["decision_rule"]["criteria"]]


def _failed_on(criterion: str, failing: Sequence[Mapping[str, Any]]) -> str:
    """`` on the chaos fraction`` when every failing cell failed the same part of a criterion of several
    conditions; empty otherwise (one condition, or cells that failed it differently)."""
    parts = [c["verdict"]["criteria"][criterion]["conditions"] for c in failing]
    if not parts or len(parts[0]) < 2:
        return ""
    failed = {tuple(x["read"] for x in conditions if not x["passed"]) for conditions in parts}
    if len(failed) != 1:
        return ""
    (reads,) = failed
    if not reads or len(reads) == len(parts[0]):
        return ""
    return " on the " + _names([read_words(r)[0] for r in reads])


def _outcome_summary(decision: Mapping[str, Any]) -> str:
    """The sentence under the headline: which cells qualify, and what every cell failed.

    E.g. "c3 and c5 qualify for flow, which needs only signal; c1 does not: all three cells fail
    competence; c1 also fails signal on the chaos fraction." Criteria are named by their registered names,
    the most often failed first.
    """
    cells = decision["cells"]
    rule = decision["decision_rule"]
    order = _criterion_order(decision)
    qualifying = [c for c in cells if c["verdict"]["qualifies"]]
    left_out = [c["id"] for c in cells if c["verdict"]["qualifies"] is False]
    if not qualifying:
        lead = "No cell qualifies"
    else:
        parts = []
        for head, label in _HEADS.items():
            ids = [c["id"] for c in qualifying if c["head"] == head]
            if not ids:
                continue
            need = rule["qualifies"].get(head, [])
            only = f", which needs only {_names(need)}" if need and set(need) < set(order) else ""
            parts.append(f"{_names(ids)} {'qualifies' if len(ids) == 1 else 'qualify'} for {label}{only}")
        lead = "; ".join(parts)
        if left_out:
            lead += f"; {_names(left_out)} {'does' if len(left_out) == 1 else 'do'} not"
    failing = {name: [c for c in cells if not c["verdict"]["criteria"][name]["passed"]] for name in order}
    said: set[str] = set()
    clauses = []
    for name in sorted(order, key=lambda n: (-len(failing[n]), order.index(n))):
        ids = [c["id"] for c in failing[name]]
        if not ids:
            continue
        if len(ids) == len(cells) > 1:
            who = "both cells" if len(cells) == 2 else f"all {count_words(len(cells))} cells"
        elif not said and qualifying and set(ids) == set(left_out):  # the cells the lead just named
            who = "it" if len(ids) == 1 else "they"
        else:
            who = _names(ids)
        verb = "fails" if len(ids) == 1 else "fail"
        also = " also" if said and set(ids) <= said else ""
        clauses.append(f"{who}{also} {verb} {name}{_failed_on(name, failing[name])}")
        said |= set(ids)
    unrouted = [c for c in cells if c["verdict"]["qualifies"] is None]
    if unrouted:
        heads = sorted({c["head"] for c in unrouted})
        clauses.append(
            f"{_names([c['id'] for c in unrouted])} (head {', '.join(heads)}) not routed by the rule"
        )
    return f"{lead}: {'; '.join(clauses) if clauses else 'every cell passes every criterion'}."


def _arm_lines(decision: Mapping[str, Any]) -> list[str]:
    """Per head the outcome names an arm for, why that arm: the qualifying cells as the rule ranked them."""
    outcome, rule = decision["outcome"], decision["decision_rule"]
    by_id = {c["id"]: c for c in decision["cells"]}
    keys = [(k["read"], k["prefer"]) for k in rule["rank_by"]]
    lines = []
    for head, label in _HEADS.items():
        arm = outcome[f"{head}_arm"]
        if arm is None:
            continue
        ranked = outcome["ranking"][head]
        if len(ranked) == 1:
            lines.append(
                f"Phase 2 trains the {label} arm `{arm}`, the arm of {ranked[0]}, the only {label} cell "
                "that qualifies."
            )
            continue
        rows = [(i, by_id[i]["arm"], [by_id[i]["reads"].get(r) for r, _ in keys]) for i in ranked]
        lines.append(
            f"Phase 2 trains the {label} arm `{arm}`, the arm of the first qualifying {label} cell "
            f"{rank_text(keys, rows)}."
        )
    return lines


def _arms_text(outcome: Mapping[str, Any]) -> str:
    arms = [f"{_HEADS[h]} `{outcome[f'{h}_arm']}`" for h in _HEADS if outcome.get(f"{h}_arm") is not None]
    return ", ".join(arms) or "no arm"


def _percent(rate: Mapping[str, Any] | None) -> str:
    """``4.2 % [3.1, 5.6]``: a simulated rate with its Wilson interval, in percent."""
    if rate is None:
        return "not simulated"
    return f"{number(rate['percent'])} % [{number(rate['low_percent'])}, {number(rate['high_percent'])}]"


def _error_rates_line(decision: Mapping[str, Any]) -> str | None:
    """The rule's false-go rate and its go rate at the measured levels, as the page states them beside
    the outcome (:mod:`grpo_probe.analysis.operating`)."""
    op = decision.get("operating")
    if not op or op["design"]["false_go"] is None:
        return None
    design = op["design"]
    target = f"{number(op['false_go_target_percent'])} %"
    within = "within" if op["within_target"] else "**above**"
    how = f"{op['simulations']} simulated runs of this design's size, seed {op['seed']}" + (
        "" if op["registered"] else ", the defaults: the design registers no simulation"
    )
    text = (
        f"**How often this rule is wrong** ({how}): under pure chaos (no choice signal, each cell's chaos at "
        f"its measured level) it says go in {_percent(design['false_go'])} of runs, {within} the {target} "
        "the design accepts"
    )
    if design["go_at_measured"] is None:
        return text + (
            "; its power at the measured levels is not simulated: without replays the choice and the chaos "
            "are not separated."
        )
    kind = decision["outcome"]["kind"]
    return text + (
        f"; at the measured levels it says go in {_percent(design['go_at_measured'])} and gives this "
        f"outcome ({kind}) in {_percent(design['same_kind_at_measured'])}."
    )


def _error_rate_rows(decision: Mapping[str, Any]) -> list[list[str]]:
    """Per cell: its sizes, the levels simulated, its false-go rate and its power."""
    op = decision.get("operating")
    if not op:
        return []
    rows = []
    for cell in op["cells"]:
        null, measured = cell["levels"]["pure_chaos"], cell["levels"]["measured"]
        rows.append(
            [
                cell["id"],
                cell["size_text"],
                f"{number(null['chaos_std_cm'])} cm",
                _percent(cell["false_go"]),
                "not simulated"
                if measured is None
                else f"{number(measured['choice_std_cm'])} cm, {number(measured['chaos_std_cm'])} cm",
                _percent(cell["power"]),
            ]
        )
    return rows


def _resampled_line(decision: Mapping[str, Any]) -> str | None:
    """How often the outcome holds when the seeds are resampled, and which versions decide otherwise."""
    versions = decision["versions"]
    current = next((v for v in versions if v["current"]), None)
    parts = []
    stability = None if current is None else current["stability"]
    if stability is not None and stability["not_resampled"] is None:
        parts.append(
            f"The outcome and its arm hold in {stability['same_outcome']} of {stability['resamples']} "
            f"resamples of the {stability['n_seeds']} seeds"
            + (
                f" (the outcome kind in {stability['same_kind']})"
                if stability["same_kind"] != stability["same_outcome"]
                else ""
            )
            + "."
        )
    elif stability is not None:
        parts.append(f"The outcome is not resampled: {stability['not_resampled']}.")
    mine = decision["outcome"]
    key = (mine["kind"], mine["ar_arm"], mine["flow_arm"])
    other, unevaluated = [], []
    for v in versions:
        if v["current"]:
            continue
        if v["outcome"] is None:
            unevaluated.append(str(v["version"]))
        elif (v["outcome"]["kind"], v["outcome"]["ar_arm"], v["outcome"]["flow_arm"]) != key:
            other.append(
                f"version {v['version']} ({v['label']}) gives {v['outcome']['kind']} with "
                f"{_arms_text(v['outcome'])}"
            )
    see = "(see [what each registered version decides](#what-each-registered-version-decides))"
    if other:
        parts.append(f"Not every registered version agrees: {'; '.join(other)} {see}.")
    elif len(versions) > 1 and not unevaluated:
        parts.append(f"All {count_words(len(versions))} registered versions of the design give the same.")
    if unevaluated:
        parts.append(
            f"Version{'s' if len(unevaluated) > 1 else ''} {_names(unevaluated)} of the design cannot be "
            f"evaluated{'' if other else ' ' + see}."
        )
    return " ".join(parts) or None


def _conditions(criterion: Mapping[str, Any]) -> str:
    def bar(x: Mapping[str, Any]) -> str:
        if x.get("threshold_read") is None:
            return number(x["threshold"])
        return x["threshold_read"] if x["scale"] == 1.0 else f"{number(x['scale'])} x {x['threshold_read']}"

    return " and ".join(f"`{x['read']} {x['op']} {bar(x)}`" for x in criterion["all_of"])


def _rank_keys(rule: Mapping[str, Any]) -> str:
    return ", then ".join(f"`{k['read']}` ({k['prefer']})" for k in rule["rank_by"]) or "registered order"


def _rule_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What a version's rule changes against the version before it, criterion by criterion."""
    was = {c["name"]: c for c in before["criteria"]}
    now = {c["name"]: c for c in after["criteria"]}
    out = []
    for name, criterion in now.items():
        if name not in was:
            out.append(f"adds criterion `{name}`: {_conditions(criterion)}")
        elif criterion["all_of"] != was[name]["all_of"]:
            out.append(f"`{name}` reads {_conditions(criterion)} (was {_conditions(was[name])})")
    out += [f"drops criterion `{name}`" for name in was if name not in now]
    for head in sorted(set(before["qualifies"]) | set(after["qualifies"])):
        old, new = before["qualifies"].get(head, []), after["qualifies"].get(head, [])
        if old != new:
            out.append(
                f"a {head} cell needs {', '.join(new) or 'nothing'} (was {', '.join(old) or 'nothing'})"
            )
    if before["rank_by"] != after["rank_by"]:
        out.append(f"arms ranked by {_rank_keys(after)} (was {_rank_keys(before)})")
    return out


def _first_sentence(text: str) -> str:
    """The first sentence of an amendment's reason: up to a full stop that a capital letter follows (so
    "e.g. the boat" or "1e-4 m. nudge" do not end it)."""
    return re.split(r"(?<=\.)\s+(?=[A-Z])", " ".join(text.split()), maxsplit=1)[0]


_YES_NO = {True: "yes", False: "no", None: "not recorded"}


def _version_rows(decision: Mapping[str, Any]) -> list[list[str]]:
    """decision.md's version table: per registered version only what differs from the version before it
    (the amendment's reason in its first sentence, the paths it changed, how its rule changed), its outcome
    and how often that holds in resamples of the seeds. The hashes are in the page's footer."""
    rows = []
    before: Mapping[str, Any] | None = None
    for v in decision["versions"]:
        amendment = v["amendment"]
        changes = []
        if amendment is None:
            changes.append("As first registered" if v["version"] == 0 else "No amendment recorded")
        else:
            changes.append(_first_sentence(amendment["reason"]).rstrip("."))
            if amendment["replaces"] is not None:
                paths = ", ".join(f"`{c['path']}` ({c['change']})" for c in amendment["replaces"])
                changes.append(f"Changes {paths}")
            if amendment["undeclared"]:
                changes.append(
                    f"Of these, {', '.join(f'`{p}`' for p in amendment['undeclared'])} not named in its "
                    f"fields ({', '.join(amendment['fields'])})"
                )
        if v["rule"] is not None and before is not None:
            changes += [f"Rule: {change}" for change in _rule_changes(before, v["rule"])]
        if v["analysis_recomputed"]:
            changes.append(
                "Its analysis numbers differ from this run's, so every read was recomputed with them"
            )
        if v["problem"] is not None:
            shown = next(w["version"] for w in decision["versions"] if w["problem"] == v["problem"])
            same = f" (as version {shown})" if shown != v["version"] else f": {v['problem']}"
            outcome = f"cannot be evaluated{same}"
        elif v["outcome"] is None:
            outcome = "cannot be evaluated"
        else:
            outcome = f"{v['outcome']['kind']}: {_arms_text(v['outcome'])}"
        stability = v["stability"]
        if stability is None or stability["not_resampled"] is not None:
            held = "n/a"
        else:
            held = f"{stability['same_outcome']}/{stability['resamples']}"
            if stability["same_kind"] != stability["same_outcome"]:
                held += f" (kind {stability['same_kind']}/{stability['resamples']})"
        rows.append(
            [
                f"{v['version']}: {v['label']}" + (" (this run's design)" if v["current"] else ""),
                v["locked"] or "not recorded",
                "n/a" if amendment is None else _YES_NO[amendment["after_results"]],
                "".join(f"{change}. " for change in changes).rstrip(),
                outcome,
                held,
            ]
        )
        if v["rule"] is not None:
            before = v["rule"]
    return rows


def _guard_counts(cell: Mapping[str, Any], read: str) -> tuple[str, str] | None:
    """(``3/120``, ``0/15``) for a guard's rate row: the episodes behind the sampled and anchor rates."""
    found = re.fullmatch(r"sampled_(\w+)_rate", read)
    if found is None:
        return None
    for g in cell["guards"]:
        if g["guard"] == found[1]:
            return f"{g['sampled_count']}/{g['sampled_n']}", f"{g['anchor_count']}/{g['anchor_n']}"
    return None


def _exact(value: Any) -> str:
    """A value as reads.tsv holds it: every digit decision.json holds (the shortest text that reads back as
    the same float), for a spreadsheet."""
    if value is None or isinstance(value, (bool, int)):
        return number(value)
    return repr(float(value))


def _reads_table(decision: Mapping[str, Any], fmt: Callable[[Any], str] = number) -> list[list[str]]:
    """Rows of decision.md's reads table: one row per read, one column per cell (a guard's rate with the
    episode counts behind it); values written by ``fmt`` (three significant figures on the page)."""
    cells = decision["cells"]
    rows = []
    replay = any(c.get("replay") is not None for c in cells)
    for row in read_rows(tuple(g["guard"] for g in cells[0]["guards"]), replay):
        line = [row.label + (" (primary)" if row.primary else "")]
        for cell in cells:
            reads = cell["reads"]
            text = fmt(reads[row.read])
            if row.with_ci and reads[row.read] is not None:
                text += f" [{fmt(reads[row.read + '_ci_low'])}, {fmt(reads[row.read + '_ci_high'])}]"
            if row.read == "nondegenerate_fraction":
                text += f" ({cell['nondegenerate_count']}/{cell['n_seeds']})"
            counts = _guard_counts(cell, row.read)
            if counts is not None:
                text += f" ({counts[0]})"
            if row.versus is not None:
                text += f" vs {fmt(reads[row.versus])}"
                if counts is not None:
                    text += f" ({counts[1]})"
            line.append(text)
        rows.append(line)
    for criterion in decision["decision_rule"]["criteria"]:
        name = criterion["name"]
        rows.append(
            [f"criterion {name}"]
            + [("holds" if c["verdict"]["criteria"][name]["passed"] else "fails") for c in cells]
        )
    rows.append(
        ["qualifies for phase 2"]
        + [{True: "yes", False: "no", None: "not routed"}[c["verdict"]["qualifies"]] for c in cells]
    )
    return rows


def render_decision_md(decision: Mapping[str, Any], template: str | os.PathLike[str] | None = None) -> str:
    """decision.md's text from the decision record (the content of decision.json) and the jinja2 template."""
    path = Path(template) if template is not None else default_template()
    if not path.exists():
        raise FileNotFoundError(f"{path}: decision.md template not found")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(path.parent),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["num"] = number
    env.filters["cellsafe"] = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    return env.get_template(path.name).render(
        d=decision,
        heads=_HEADS,
        reads_table=_reads_table(decision),
        summary=_outcome_summary(decision),
        arm_lines=_arm_lines(decision),
        resampled=_resampled_line(decision),
        error_rates=_error_rates_line(decision),
        error_rate_rows=_error_rate_rows(decision),
        version_rows=_version_rows(decision),
    )


def reads_tsv_text(decision: Mapping[str, Any]) -> str:
    """The reads table of decision.md as tab-separated text (one row per read, one column per cell), for
    readers who want it in a spreadsheet or Snakemake's report: with every digit decision.json holds."""
    header = ["read", *(c["id"] for c in decision["cells"])]
    rows = [header, *_reads_table(decision, _exact)]
    return "".join("\t".join(cell.replace("\t", " ") for cell in row) + "\n" for row in rows)


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
    its replay tables (the replay rule's, one per shard), read when the design registers replays. Besides
    this run's outcome, the record holds what every registered version of the rule decides on the same
    tables (``versions``).
    Returns the record as decision.json will hold it (through its JSON text: plain types).
    """
    info, where = _prereg_info(prereg), str(prereg.path)
    analysis = prereg.analysis
    env = env_spec(prereg.env)
    cells = prereg.enabled_cells
    _check_table_keys(prereg, probe_tables, anchor_tables, where)
    if join_tables is not None:
        _check_join_keys(prereg, join_tables, where)
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
        else _read_join(join_tables[c.id], c, probes[c.id])
        for c in cells
    }
    replays = _replay_tables(prereg, replay_tables, env.episode_schema, where)
    reads: dict[str, dict[str, float | None]] = {}
    parts: dict[str, _CellResult] = {}
    for cell in cells:
        reads[cell.id], parts[cell.id] = _cell_analysis(
            cell, probes[cell.id], anchors[cell.arm], joined[cell.id], analysis, replays.get(cell.id)
        )
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
            other_reads[c.id], part = _cell_analysis(
                c, probes[c.id], anchors[c.arm], other, numbers, replays.get(c.id)
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
        outcome.kind,
    )

    figures = _draw_figures(
        cells,
        parts,
        probes,
        anchors,
        analysis,
        Path(figures_dir),
        Path(page_dir),
        env.view.target_radius_m,
        _table_outline(env),
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
                    "conditions": [
                        {
                            "read": c.read,
                            "value": c.value,
                            "op": c.op,
                            "threshold": _q(c.threshold),
                            "source": c.source,
                            "passed": c.passed,
                            "text": c.text(),
                        }
                        for c in conditions
                    ],
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
        "decision_rule": rule_record(rule),
        "glossary": glossary(prereg, env),
        "cells": cells_out,
        "outcome": outcome_record(outcome),
        "operating": operating,
        "versions": versions,
        "figures": {name: figures[name] for name in ("competence", "group_std", "guard_rates")},
        "compute": _compute_section(compute, compute_gate),
        "provenance": [{"path": str(p), "sha256": str(h)} for p, h in sorted(provenance)],
    }
    return json.loads(decision_json_text(decision))
