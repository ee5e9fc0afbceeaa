"""decision.md, decision.json and the figures: the registered decision, built from the rollout tables.

Why: decision.md is what the researcher reads and the owner signs. Every number it shows is computed
here once, quantized (:func:`grpo_probe.analysis.reads.quantize`), stored in decision.json, and printed
from that same value, so the two files cannot disagree and the rule reads exactly what the page shows.
Same inputs give the same bytes: sorted JSON keys, fixed float digits, deterministic PNGs, atomic writes.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pyarrow as pa

from grpo_probe.analysis.anchor_join import SeedJoin, summarize_join
from grpo_probe.analysis.bootstrap import Estimate
from grpo_probe.analysis.chaos import ChaosSummary, chaos_reads, summarize_chaos
from grpo_probe.analysis.decision_rule import evaluate_rule
from grpo_probe.analysis.entropy import EntropySummary, entropy_summary
from grpo_probe.analysis.figures import (
    plot_chaos,
    plot_competence,
    plot_entropy,
    plot_group_std,
    plot_guard_rates,
    plot_trajectories,
)
from grpo_probe.analysis.glossary import glossary, guard_flags, qualification_notes
from grpo_probe.analysis.group_stats import SeedGroup, median_seed, summarize_groups
from grpo_probe.analysis.guards import GuardRate, guard_rates
from grpo_probe.analysis.joined import JoinedCell, join_cell, read_joined_table
from grpo_probe.analysis.reads import quantize, read_rows
from grpo_probe.analysis.stability import SeedColumns, seed_columns
from grpo_probe.analysis.tables import RolloutTable, read_anchor_table, read_probe_table
from grpo_probe.analysis.versions import outcome_record, rule_record, version_records
from grpo_probe.atomic_io import atomic_write_text
from grpo_probe.envs.registry import env_spec
from grpo_probe.prereg import AnalysisNumbers, Cell, Prereg
from grpo_probe.rollout.replay import read_replay_table

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
    """``reports/decision.md.j2`` of the source tree this package runs from (installed editable)."""
    return Path(__file__).resolve().parents[3] / "reports" / "decision.md.j2"


def _q(x: float | None) -> float | None:
    """A read as decision.json holds it: quantized, and None where it is undefined (None or NaN: a rank
    correlation of draws whose rewards never differ, a chaos fraction of groups without spread)."""
    return None if x is None or not math.isfinite(x) else quantize(x)


def _estimate(prefix: str, est: Estimate) -> dict[str, float | None]:
    return {prefix: _q(est.value), f"{prefix}_ci_low": _q(est.ci_low), f"{prefix}_ci_high": _q(est.ci_high)}


def _slug(cell: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", cell)


def _prereg_info(prereg: Prereg) -> dict[str, str]:
    """The design's identity as decision.json records it."""
    return {"name": prereg.name, "sha256": prereg.sha256, "lock_date": prereg.lock_date or "unlocked"}


def _mode_record(cell: Cell) -> dict[str, Any]:
    """The cell's sampling mode as a mapping of the fields its kind takes."""
    mode: dict[str, Any] = {"kind": cell.mode.kind}
    if cell.mode.temperature is not None:
        mode["temperature"] = cell.mode.temperature
    if cell.mode.sde_a is not None:
        mode["sde_a"] = cell.mode.sde_a
    if cell.head == "flow":
        mode["steps"] = cell.mode.steps
    return mode


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
    chaos: ChaosSummary | None = None


def _chaos_record(chaos: ChaosSummary) -> dict[str, Any]:
    """decision.json's ``replay`` of a cell: per perturbation what it did, per replayed seed the parts."""
    return {
        "replayed_seeds": len(chaos.seeds),
        "replays_per_draw": chaos.replays_per_draw,
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
            }
            for s in chaos.seeds
        ],
    }


def _cell_analysis(
    cell: Cell,
    probe: RolloutTable,
    anchor: RolloutTable,
    joined: JoinedCell,
    spec: AnalysisNumbers,
    replays: Any = None,
) -> tuple[dict[str, float | None], _CellResult]:
    """The cell's reads (flat, quantized) and its analysis; figures are drawn by the caller.

    The per-seed group statistics and anchor differences come from ``joined`` (the join table); the
    summaries over seeds, the guard trips and the AR entropy are computed here from the cell's tables.
    """
    groups = list(joined.groups)
    summary = summarize_groups(groups, spec, cell.id)
    joins = list(joined.joins)
    join = summarize_join(joins, spec, cell.id)
    rates = guard_rates(probe, anchor, spec)
    entropy = entropy_summary(probe)
    chaos = None if replays is None else summarize_chaos(probe, replays, spec, cell.id)
    reads: dict[str, float | None] = {
        **_estimate("median_group_std_progress_cm", summary.median_std_progress_cm),
        **_estimate("median_group_std_best_point_cm", summary.median_std_best_point_cm),
        "nondegenerate_fraction": _q(summary.nondegenerate_fraction),
        **_estimate("mean_progress_delta_cm", join.mean_progress_delta_cm),
        "sampled_engagement_rate": _q(join.sampled_engagement_rate),
        "anchor_engagement_rate": _q(join.anchor_engagement_rate),
        **_estimate("engagement_delta", join.engagement_delta),
        "mean_token_entropy": _q(entropy.mean) if entropy else None,
        "mean_tokens_per_chunk": _q(entropy.mean_tokens_per_chunk) if entropy else None,
    }
    for rate in rates:
        reads[f"sampled_{rate.guard}_rate"] = _q(rate.sampled_rate)
        reads[f"anchor_{rate.guard}_rate"] = _q(rate.anchor_rate)
    if chaos is not None:
        for name, value in chaos_reads(chaos).items():
            if isinstance(value, Estimate):
                reads.update(_estimate(name, value))
            else:
                reads[name] = _q(value)
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
        "n_seeds": summary.n_seeds,
        "k": summary.k,
        "nondegenerate_count": summary.nondegenerate_count,
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
        "replay": None if chaos is None else _chaos_record(chaos),
    }
    return reads, _CellResult(record, groups, joins, rates, entropy, chaos)


def _draw_figures(
    cells: Sequence[Cell],
    parts: Mapping[str, _CellResult],
    probes: Mapping[str, RolloutTable],
    anchors: Mapping[str, RolloutTable],
    spec: AnalysisNumbers,
    figures_dir: Path,
    link_base: Path,
    disk_radius_m: float,
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
                spec.signal_bar_cm,
                spec.degenerate_tol_cm,
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
            ),
        }
        if part.chaos is not None:
            files["chaos"] = plot_chaos(
                figures_dir / f"chaos_{slug}.png", cell.id, part.chaos.seeds, spec.signal_bar_cm
            )
        if part.entropy is not None:
            files["entropy"] = plot_entropy(
                figures_dir / f"entropy_{slug}.png", cell.id, probes[cell.id], part.entropy
            )
        per_cell[cell.id] = {name: link(path) for name, path in files.items()}
    guards = plot_guard_rates(
        figures_dir / "guard_rates_all-cells.png", [c.id for c in cells], [parts[c.id].rates for c in cells]
    )
    return {"cells": per_cell, "guard_rates": link(guards)}


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return f"{value:.4f}"


def _reads_table(decision: Mapping[str, Any]) -> list[list[str]]:
    """Rows of decision.md's reads table: one row per read, one column per cell."""
    cells = decision["cells"]
    rows = []
    replay = any(c.get("replay") is not None for c in cells)
    for row in read_rows(tuple(g["guard"] for g in cells[0]["guards"]), replay):
        line = [row.label + (" (primary)" if row.primary else "")]
        for cell in cells:
            reads = cell["reads"]
            text = _fmt(reads[row.read])
            if row.with_ci and reads[row.read] is not None:
                text += f" [{_fmt(reads[row.read + '_ci_low'])}, {_fmt(reads[row.read + '_ci_high'])}]"
            if row.read == "nondegenerate_fraction":
                text += f" ({cell['nondegenerate_count']}/{cell['n_seeds']})"
            if row.versus is not None:
                text += f" vs {_fmt(reads[row.versus])}"
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
    env.filters["num"] = _fmt
    env.filters["cellsafe"] = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    return env.get_template(path.name).render(d=decision, reads_table=_reads_table(decision))


def reads_tsv_text(decision: Mapping[str, Any]) -> str:
    """The reads table of decision.md as tab-separated text (one row per read, one column per cell), for
    readers who want it in a spreadsheet or Snakemake's report."""
    header = ["read", *(c["id"] for c in decision["cells"])]
    rows = [header, *_reads_table(decision)]
    return "".join("\t".join(cell.replace("\t", " ") for cell in row) + "\n" for row in rows)


def decision_json_text(decision: Mapping[str, Any]) -> str:
    """decision.json's text: sorted keys, two-space indent, floats already quantized, no NaN."""
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
    written atomically."""
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
    Returns the record as decision.json will hold it (through its JSON text: quantized floats, plain types).
    """
    info, where = _prereg_info(prereg), str(prereg.path)
    spec = prereg.analysis
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
        c.id: read_probe_table(probe_tables[c.id], c.id, c.arm, c.head, spec.group_std_ddof, env=env)
        for c in cells
    }
    joined = {
        c.id: join_cell(c.id, probes[c.id], anchors[c.arm], spec)
        if join_tables is None
        else _read_join(join_tables[c.id], c, probes[c.id])
        for c in cells
    }
    replays = _replay_tables(prereg, replay_tables, env.episode_schema, where)
    reads: dict[str, dict[str, float | None]] = {}
    parts: dict[str, _CellResult] = {}
    for cell in cells:
        reads[cell.id], parts[cell.id] = _cell_analysis(
            cell, probes[cell.id], anchors[cell.arm], joined[cell.id], spec, replays.get(cell.id)
        )
    verdicts, outcome = evaluate_rule(prereg.decision_rule, cells, reads)
    columns = {
        c.id: seed_columns(
            c, joined[c.id].groups, joined[c.id].joins, probes[c.id], anchors[c.arm], spec, parts[c.id].chaos
        )
        for c in cells
    }

    def reads_for(numbers: AnalysisNumbers) -> tuple[dict[str, Any], dict[str, SeedColumns]]:
        """Reads and per-seed columns under another version's analysis numbers (this run's are reused)."""
        if numbers == spec:
            return reads, columns
        other_reads, other_columns = {}, {}
        for c in cells:
            other = join_cell(c.id, probes[c.id], anchors[c.arm], numbers)
            other_reads[c.id], part = _cell_analysis(
                c, probes[c.id], anchors[c.arm], other, numbers, replays.get(c.id)
            )
            other_columns[c.id] = seed_columns(
                c, other.groups, other.joins, probes[c.id], anchors[c.arm], numbers, part.chaos
            )
        return other_reads, other_columns

    versions = version_records(prereg, cells, reads_for, outcome)

    figures = _draw_figures(
        cells, parts, probes, anchors, spec, Path(figures_dir), Path(page_dir), env.view.target_radius_m
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
        "analysis": spec.to_dict(),
        "replay": None if prereg.replay is None else prereg.replay.to_dict(),
        "decision_rule": rule_record(rule),
        "glossary": glossary(prereg, env),
        "cells": cells_out,
        "outcome": outcome_record(outcome),
        "versions": versions,
        "figures": {"guard_rates": figures["guard_rates"]},
        "compute": _compute_section(compute, compute_gate),
        "provenance": [{"path": str(p), "sha256": str(h)} for p, h in sorted(provenance)],
    }
    return json.loads(decision_json_text(decision))
