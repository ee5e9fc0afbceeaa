"""One cell's analysis: its tables read and checked, its reads computed, its decision.json record.

Why apart from the page: computing what a cell reads and printing it are two jobs; the record built here is
the only thing :mod:`grpo_probe.analysis.page.decision_md` and the figures read, so the page cannot compute a
number of its own. Every value is kept at full precision (:func:`json_float`); only the page rounds.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa

from grpo_probe.analysis.cells.anchor_join import SeedJoin
from grpo_probe.analysis.cells.chaos import ReplayDraws, replay_draws
from grpo_probe.analysis.cells.entropy import EntropySummary, entropy_summary
from grpo_probe.analysis.cells.gradient_noise import GradientColumns, gradient_record, read_gradient_file
from grpo_probe.analysis.cells.group_stats import SeedGroup, median_seed
from grpo_probe.analysis.cells.guards import GuardRate, guard_rates
from grpo_probe.analysis.cells.joined import JoinedCell, read_joined_table
from grpo_probe.analysis.cells.reads import cell_reads
from grpo_probe.analysis.cells.seed_columns import SeedColumns, seed_columns
from grpo_probe.analysis.cells.tables import RolloutTable
from grpo_probe.prereg import AnalysisNumbers, Cell, Prereg
from grpo_probe.rollout.replay import read_replay_table
from grpo_probe.sampling import mode_params

__all__ = [
    "CellResult",
    "analyse_cell",
    "check_join_keys",
    "check_table_keys",
    "gradient_files_by_cell",
    "json_float",
    "read_join",
    "replay_tables_by_cell",
]


T = TypeVar("T")


def json_float(x: float | None) -> float | None:
    """A read as decision.json holds it: every digit (-0.0 as 0.0, so a printed sign is stable), and None
    where it is undefined (None or NaN: a rank correlation of draws whose rewards never differ, a chaos
    share of groups without spread)."""
    return None if x is None or not math.isfinite(x) else float(x) + 0.0


def _mode_record(cell: Cell) -> dict[str, Any]:
    """The cell's sampling mode as a mapping of the fields its kind takes."""
    return {"kind": cell.mode.kind, **mode_params(cell.mode)}


def check_table_keys(
    prereg: Prereg, probe_tables: Mapping[str, Any], anchor_tables: Mapping[str, Any], where: str
) -> None:
    _check_one_table_per_cell(prereg, probe_tables, where, "probe", "table")
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


def check_join_keys(prereg: Prereg, join_tables: Mapping[str, Any], where: str) -> None:
    _check_one_table_per_cell(prereg, join_tables, where, "join", "join table")


def _check_one_table_per_cell(
    prereg: Prereg, tables: Mapping[str, Any], where: str, kind: str, noun: str
) -> None:
    """Every enabled cell has a table of ``kind`` and no other cell has one; else say which differ."""
    enabled = [c.id for c in prereg.enabled_cells]
    without = [c for c in enabled if c not in tables]
    unknown = sorted(set(tables) - set(enabled))
    if without or unknown:
        raise ValueError(
            f"{where}: cells: {kind} tables do not match the enabled cells: enabled cells without a {noun} "
            f"{without}, {noun}s for unknown or disabled cells {unknown}"
        )


def read_join(path: str | os.PathLike[str], cell: Cell, probe: RolloutTable) -> JoinedCell:
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


def _one_per_enabled_cell(
    prereg: Prereg,
    given: Mapping[str, T] | None,
    registered: bool,
    unregistered: str,
    every_cell: str,
    what: str,
) -> dict[str, T]:
    """``given`` (cell -> its inputs) as a dict, checked against the design: empty when the design does
    not register the read (and then ``unregistered`` is the error if any were given), else exactly one
    entry per enabled cell (``every_cell`` is the error, with the cells enabled and given)."""
    if not registered:
        if given:
            raise ValueError(unregistered)
        return {}
    enabled = [c.id for c in prereg.enabled_cells]
    out = dict(given or {})
    if sorted(out) != sorted(enabled):
        raise ValueError(f"{every_cell} (enabled cells: {enabled}; {what} given for: {sorted(out)})")
    return out


def replay_tables_by_cell(
    prereg: Prereg,
    replay_tables: Mapping[str, Sequence[str | os.PathLike[str]]] | None,
    episode_schema: Any,
    where: str,
) -> dict[str, Any]:
    """Per enabled cell, its replay tables read and concatenated (none when the design registers none)."""
    given = _one_per_enabled_cell(
        prereg,
        replay_tables,
        prereg.replay is not None,
        f"{where}: replay tables were given, but the design registers no replay section",
        f"{where}: replay: the design registers replays, so every enabled cell needs its replay tables",
        "tables",
    )
    out = {}
    for cell, paths in given.items():
        tables = [read_replay_table(p, episode_schema) for p in paths]
        out[cell] = pa.concat_tables(tables) if tables else None
    return out


def gradient_files_by_cell(
    prereg: Prereg,
    gradient_files: Mapping[str, str | os.PathLike[str]] | None,
    probes: Mapping[str, RolloutTable],
    where: str,
) -> dict[str, GradientColumns]:
    """Per enabled cell, its gradient file read (none when the design does not register the gradient
    reads, ``analysis.gradient_reads``)."""
    given = _one_per_enabled_cell(
        prereg,
        gradient_files,
        prereg.analysis.gradient_reads,
        f"{where}: gradient files were given, but the design registers no gradient reads",
        f"{where}: analysis.gradient_reads: every enabled cell needs its gradient file",
        "files",
    )
    if not given:
        return {}
    out = {}
    for cell in prereg.enabled_cells:
        probe = probes[cell.id]
        k = int(probe.seeds.size and probe.rows_of(int(probe.seeds[0])).size)
        seeds = [int(s) for s in dict.fromkeys(probe.seeds.tolist())]
        out[cell.id] = read_gradient_file(given[cell.id], cell.id, seeds, k)
    return out


@dataclass(frozen=True)
class CellResult:
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
        "total_std_cm": json_float(_total_std(reads)),
        "median_group_std_cm": json_float(chaos.median_group_std_cm),
        "diverged_fraction": json_float(chaos.diverged_fraction),
        "perturbations": [
            {
                "index": p.index,
                "kind": p.kind,
                "scale": p.scale,
                "replays": p.replays,
                "median_abs_change_cm": json_float(p.median_abs_change_cm),
                "diverged_fraction": json_float(p.diverged_fraction),
                "median_divergence_tick": json_float(p.median_divergence_tick),
            }
            for p in chaos.perturbations
        ],
        "seeds": [
            {
                "seed": s.seed,
                "group_std_cm": json_float(s.group_std_cm),
                "replay_std_cm": json_float(s.replay_std_cm),
                "choice_std_cm": json_float(s.choice_std_cm),
                "chaos_std_cm": None
                if s.sums is None
                else json_float(math.sqrt(s.sums.ss_within / s.sums.df_within)),
            }
            for s in chaos.seeds
        ],
    }


def analyse_cell(
    cell: Cell,
    probe: RolloutTable,
    anchor: RolloutTable,
    joined: JoinedCell,
    analysis: AnalysisNumbers,
    replays: Any = None,
    gradient: GradientColumns | None = None,
) -> tuple[dict[str, float | None], CellResult]:
    """The cell's reads (flat, full precision) and its analysis; figures are drawn by the caller.

    The per-seed group statistics and anchor differences come from ``joined`` (the join table); the
    replays' decomposition, the guard trips and the AR entropy from the cell's tables. Every read is its
    registered statistic over the cell's per-seed columns
    (:func:`grpo_probe.analysis.cells.reads.cell_reads`).
    ``gradient``: the cell's gradient file, read, for a design that registers the gradient reads (its
    record then gets ``gradient``; a design without them keeps its bytes).
    """
    groups = list(joined.groups)
    joins = list(joined.joins)
    rates = guard_rates(probe, anchor, analysis)
    entropy = entropy_summary(probe)
    chaos = None if replays is None else replay_draws(probe, replays, analysis, cell.id)
    columns = seed_columns(
        cell, groups, joins, probe, anchor, analysis, None if chaos is None else chaos.seeds, gradient
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
                "std_progress_cm": json_float(g.std_progress_cm),
                "std_best_point_cm": json_float(g.std_best_point_cm),
                "nondegenerate": g.nondegenerate,
                "sampled_mean_progress_cm": json_float(j.sampled_mean_progress_cm),
                "anchor_progress_cm": json_float(j.anchor_progress_cm),
                "progress_delta_cm": json_float(j.progress_delta_cm),
                "sampled_engagement_rate": json_float(j.sampled_engagement_rate),
                "anchor_engaged": j.anchor_engaged,
            }
            for g, j in zip(groups, joins, strict=True)
        ],
        "guards": [
            {
                "guard": r.guard,
                "sampled_count": r.sampled_count,
                "sampled_n": r.sampled_n,
                "sampled_rate": json_float(r.sampled_rate),
                "anchor_count": r.anchor_count,
                "anchor_n": r.anchor_n,
                "anchor_rate": json_float(r.anchor_rate),
            }
            for r in rates
        ],
        "entropy": None
        if entropy is None
        else {
            "n_replans": entropy.n_replans,
            "mean": json_float(entropy.mean),
            "p10": json_float(entropy.p10),
            "median": json_float(entropy.median),
            "p90": json_float(entropy.p90),
            "per_replan_index_mean": [json_float(v) for v in entropy.per_replan_index_mean],
            "mean_tokens_per_chunk": json_float(entropy.mean_tokens_per_chunk),
            "min_tokens_per_chunk": entropy.min_tokens_per_chunk,
            "max_tokens_per_chunk": entropy.max_tokens_per_chunk,
        },
        "replay": None if chaos is None else _chaos_record(chaos, reads),
    }
    if gradient is not None:
        record["gradient"] = gradient_record(gradient)
    return reads, CellResult(record, groups, joins, rates, entropy, columns, chaos)
