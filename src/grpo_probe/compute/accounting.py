"""Compute per stage from Snakemake's ``benchmark:`` files, the registered gate, and a cost estimate.

Why a report of its own rather than a table inside decision.md: timings differ on every run, while
decision.md and decision.json must be byte-identical when an auditor reruns the workflow. So the
measured compute lives in ``compute.md`` / ``compute.json`` beside the decision, and decision.md links
to it. The estimate extrapolates the parallel oracle's CPU time per episode to the whole run, so a user
can price the probe on their machine after the first stages and before the bulk of the rollouts.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grpo_probe.atomic_io import atomic_write_text
from grpo_probe.prereg import Prereg

__all__ = [
    "StageCompute",
    "compute_report",
    "estimate_run",
    "oracle_episodes",
    "read_benchmarks",
    "run_episodes",
]

_STAGE_ORDER = (
    "prereg_check",
    "demos",
    "train",
    "parallel_oracle",
    "anchors",
    "probe",
    "draw0_oracle",
    "join",
    "decision",
)


@dataclass(frozen=True)
class StageCompute:
    """One stage (rule): its jobs, summed wall and CPU seconds, and the largest resident set."""

    stage: str
    jobs: int
    wall_s: float
    cpu_s: float
    max_rss_mb: float
    gpu_s: float = 0.0
    """Not measured by Snakemake's benchmark files; kept for a GPU run's report (0 on CPU)."""


def _number(row: dict[str, str], column: str, path: Path) -> float:
    value = row.get(column, "")
    if value in ("", "NA", "-"):
        return 0.0
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{path}: column {column!r} is {value!r}, not a number") from None


def read_benchmarks(bench_dir: str | os.PathLike[str]) -> list[StageCompute]:
    """Sum every ``<stage>[/...].tsv`` under ``bench_dir`` by stage (its first path component)."""
    root = Path(bench_dir)
    totals: dict[str, list[float]] = {}
    for path in sorted(root.rglob("*.tsv")):
        stage = path.relative_to(root).parts[0].removesuffix(".tsv")
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        if not rows:
            raise ValueError(f"{path}: benchmark file has no rows")
        row = rows[-1]
        entry = totals.setdefault(stage, [0, 0.0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += _number(row, "s", path)
        entry[2] += _number(row, "cpu_time", path)
        entry[3] = max(entry[3], _number(row, "max_rss", path))
    order = {name: i for i, name in enumerate(_STAGE_ORDER)}
    return [
        StageCompute(stage, int(v[0]), v[1], v[2], v[3])
        for stage, v in sorted(totals.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
    ]


def oracle_episodes(prereg: Prereg) -> int:
    """Episodes of the parallel oracle, counting one side (each runs twice: sequential and parallel)."""
    spec = prereg.oracles.parallel
    pairs = sum(1 for arm in spec.arms for mode in spec.modes if mode.head == prereg.arms[arm].head)
    return pairs * len(spec.seeds) * spec.draws


def run_episodes(prereg: Prereg) -> dict[str, int]:
    """Episodes each rollout stage runs for this design."""
    cells = prereg.enabled_cells
    arms = {cell.arm for cell in cells} | set(prereg.oracles.parallel.arms)
    return {
        "parallel_oracle": 2 * oracle_episodes(prereg),
        "anchors": len(arms) * len(prereg.seeds),
        "probe": len(cells) * len(prereg.seeds) * prereg.group_size,
        "draw0_oracle": 2 * len(cells) * len(prereg.oracles.draw0_seeds),
    }


def estimate_run(prereg: Prereg, bench_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Price the rollout stages from the parallel oracle's measured CPU seconds per episode."""
    stages = {s.stage: s for s in read_benchmarks(bench_dir)}
    if "parallel_oracle" not in stages:
        raise ValueError(
            f"{bench_dir}: no parallel_oracle benchmark yet; run the workflow up to the oracle first "
            "(snakemake --until parallel_oracle)"
        )
    per_episode = stages["parallel_oracle"].cpu_s / (2 * oracle_episodes(prereg))
    episodes = run_episodes(prereg)
    cpu_s = {stage: n * per_episode for stage, n in episodes.items()}
    measured_other = sum(s.cpu_s for s in stages.values() if s.stage in ("demos", "train", "prereg_check"))
    total_h = (sum(cpu_s.values()) + measured_other) / 3600.0
    gate = prereg.compute_gate
    return {
        "cpu_s_per_episode": per_episode,
        "episodes": episodes,
        "estimated_cpu_s": cpu_s,
        "measured_training_cpu_s": measured_other,
        "estimated_total_cpu_hours": total_h,
        "gate_cpu_hours": gate.cpu_hours,
        "within_gate": total_h <= gate.cpu_hours,
    }


def compute_report(
    prereg: Prereg,
    bench_dir: str | os.PathLike[str],
    out_md: str | os.PathLike[str],
    out_json: str | os.PathLike[str],
    decision_md: str = "decision.md",
) -> dict[str, Any]:
    """Write compute per stage against the registered gate, as markdown and JSON."""
    stages = read_benchmarks(bench_dir)
    gate = prereg.compute_gate
    total_cpu_h = sum(s.cpu_s for s in stages) / 3600.0
    total_gpu_h = sum(s.gpu_s for s in stages) / 3600.0
    record = {
        "prereg": prereg.name,
        "prereg_sha256": prereg.sha256,
        "stages": [asdict(s) for s in stages],
        "total_cpu_hours": total_cpu_h,
        "total_gpu_hours": total_gpu_h,
        "total_wall_s": sum(s.wall_s for s in stages),
        "gate": {"cpu_hours": gate.cpu_hours, "gpu_hours": gate.gpu_hours},
        "within_gate": total_cpu_h <= gate.cpu_hours and total_gpu_h <= gate.gpu_hours,
    }
    lines = [
        f"# Compute: {prereg.name}",
        "",
        "What each stage of the run used (Snakemake `benchmark:` files), against the compute gate "
        f"registered in the prereg. The scientific record is [{decision_md}]({decision_md}); "
        "this page changes from run to run, that one does not.",
        "",
        "| stage | jobs | wall (s) | CPU (s) | GPU (s) | peak RSS (MB) |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {s.stage} | {s.jobs} | {s.wall_s:.1f} | {s.cpu_s:.1f} | {s.gpu_s:.1f} | {s.max_rss_mb:.0f} |"
        for s in stages
    ]
    verdict = "within" if record["within_gate"] else "OVER"
    lines += [
        "",
        f"Total: {total_cpu_h:.3f} CPU-hours and {total_gpu_h:.3f} GPU-hours against the registered gate of "
        f"{gate.cpu_hours:g} CPU-hours and {gate.gpu_hours:g} GPU-hours: **{verdict} the gate**.",
        "",
    ]
    atomic_write_text(out_md, "\n".join(lines))
    atomic_write_text(out_json, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record


def format_estimate(estimate: dict[str, Any]) -> str:
    """The estimate as a few lines for the terminal."""
    lines = [f"CPU seconds per episode (from the parallel oracle): {estimate['cpu_s_per_episode']:.3f}"]
    for stage, n in estimate["episodes"].items():
        lines.append(f"  {stage:16s} {n:6d} episodes  ~{estimate['estimated_cpu_s'][stage]:9.1f} CPU-s")
    lines.append(f"  training (measured)            {estimate['measured_training_cpu_s']:9.1f} CPU-s")
    verdict = "within" if estimate["within_gate"] else "OVER"
    lines.append(
        f"estimated total {estimate['estimated_total_cpu_hours']:.3f} CPU-hours, "
        f"{verdict} the registered gate of {estimate['gate_cpu_hours']:g}"
    )
    return "\n".join(lines)
