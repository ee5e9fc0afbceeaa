"""Compute per stage from Snakemake's ``benchmark:`` files, the registered gate, and a cost estimate.

Why a report of its own rather than a table inside decision.md: timings differ on every run, while
decision.md and decision.json must be byte-identical when an auditor reruns the workflow. So the
measured compute lives in ``compute.md`` / ``compute.json`` beside the decision, and decision.md links
to it. The estimate extrapolates the parallel oracle's CPU time per episode to the whole run, so a user
can price the probe on their machine after the first stages and before the bulk of the rollouts.

GPU seconds are not in the benchmark files. A rollout rule on a CUDA device times its policy calls
between ``torch.cuda.synchronize()`` barriers and records the sum in its manifest (``extra.gpu_s``); on
the CPU it records ``null``. A stage without a measurement is "not measured", never 0.0: the GPU part
of the gate is checked only when every stage that runs the policies measured it, and is otherwise
reported as unverified.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_probe.atomic_io import atomic_write_json, atomic_write_text

if TYPE_CHECKING:  # annotations only: the prereg package loads pyarrow, which `grpo-probe --help` never needs
    from grpo_probe.compute.servers import ServerCompute
    from grpo_probe.prereg import Prereg

__all__ = [
    "POLICY_STAGES",
    "GateVerdict",
    "StageCompute",
    "compute_report",
    "estimate_run",
    "gate_verdict",
    "oracle_episodes",
    "read_benchmarks",
    "read_gpu_seconds",
    "replay_cost_ratio",
    "run_episodes",
]

POLICY_STAGES: tuple[str, ...] = (
    "parallel_oracle",
    "anchors",
    "probe",
    "replay",
)
"""Stages that run the policies, so the stages a GPU run spends GPU time in."""

_STAGE_ORDER = (
    "prereg_check",
    "demos",
    "train",
    "parallel_oracle",
    "anchors",
    "probe",
    "join",
    "replay",
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
    gpu_s: float | None = None
    """Synchronized GPU seconds of the stage's policy calls; None when not measured (the CPU, or a rule
    that records none)."""


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
    """Episodes of the parallel oracle, counting one side (each runs twice: sequential and parallel);
    with replays registered, one replay of each arm's first case on one seed under each perturbation."""
    oracle = prereg.oracles.parallel
    pairs = sum(1 for arm in oracle.arms for mode in oracle.modes if mode.head == prereg.arms[arm].head)
    replays = 0 if prereg.replay is None else len(oracle.arms) * len(prereg.replay.perturbations)
    return (pairs * len(oracle.seeds) + replays) * oracle.draws


def run_episodes(prereg: Prereg) -> dict[str, int]:
    """Episodes each rollout stage runs for this design."""
    cells = prereg.enabled_cells
    arms = {cell.arm for cell in cells} | set(prereg.oracles.parallel.arms)
    # each anchors job also runs the draw-0 oracle of its arm's cells: the probe path and its reference
    draw0 = 2 * len(cells) * len(prereg.oracles.draw0_seeds)
    return {
        "parallel_oracle": 2 * oracle_episodes(prereg),
        "anchors": len(arms) * len(prereg.seeds) + draw0,
        "probe": len(cells) * len(prereg.seeds) * prereg.group_size,
        **_replay_episodes(prereg),
    }


def _replay_episodes(prereg: Prereg) -> dict[str, int]:
    """Episodes of the replay stage: the oracle's zero-size replays, and every replayed draw R times."""
    replay = prereg.replay
    if replay is None:
        return {}
    cells = len(prereg.enabled_cells)
    k = prereg.group_size
    oracle = cells * len(replay.oracle_seeds) * k * len(replay.perturbations)
    return {"replay": oracle + cells * len(replay.seeds) * k * replay.replays}


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
        "phase2": estimate_phase2(prereg, per_episode, bench_dir),
    }


def estimate_phase2(
    prereg: Prereg, per_episode: float, bench_dir: str | os.PathLike[str]
) -> dict[str, Any] | None:
    """Price the registered phase-2 pilot before it runs, for each head the decision could name.

    Rollouts are priced from the same CPU seconds per episode as the probe: ``iterations x
    seeds_per_iteration x rollouts_per_seed`` training episodes per replicate, and the initial and each
    replicate's final policy on every held-out seed (by the anchor, and by ``sampled_draws`` draws of the
    sampler when the design registers them). The GRPO updates are priced only once a phase-2 run of this
    design has left its ``phase2_train`` benchmark (then by that measurement); until then the estimate
    says they are not included, so it is a lower bound. A head's updates are priced by the largest
    measured run of one of its arms (``phase2_train/<arm>.tsv``). None when the design registers no phase 2.
    """
    phase2 = prereg.phase2
    if phase2 is None:
        return None
    train_episodes = (
        phase2.replicates * phase2.iterations * phase2.seeds_per_iteration * phase2.rollouts_per_seed
    )
    # the initial policy and each replicate's final one, by the anchor and (when registered) the sampler
    eval_episodes = (1 + phase2.replicates) * len(phase2.eval_seeds) * (1 + (phase2.sampled_draws or 0))
    train_dir = Path(bench_dir) / "phase2_train"
    by_arm = {s.stage: s.cpu_s for s in read_benchmarks(train_dir)} if train_dir.is_dir() else {}
    heads = {}
    for head in sorted(phase2.heads):
        rollout_s = (train_episodes + eval_episodes) * per_episode
        arms = {a for a, registered in prereg.arms.items() if registered.head == head}
        measured = [cpu for arm, cpu in by_arm.items() if arm in arms]
        # each replicate's updates cost what the stage's own did (phase2_replicate trains the same loop)
        update_s = max(measured) * phase2.replicates if measured else None
        total_h = (rollout_s + (update_s or 0.0)) / 3600.0
        heads[head] = {
            "train_episodes": train_episodes,
            "eval_episodes": eval_episodes,
            "rollout_cpu_s": rollout_s,
            "update_cpu_s": update_s,
            "estimated_cpu_hours": total_h,
            "within_gate": total_h <= phase2.cpu_hours,
        }
    return {"gate_cpu_hours": phase2.cpu_hours, "heads": heads}


def read_gpu_seconds(results_dir: str | os.PathLike[str]) -> dict[str, float | None]:
    """Per stage, the GPU seconds its manifests under ``results_dir`` record (``extra.gpu_s``).

    A stage's value is the sum over its jobs when every job measured it, else None (not measured): one
    job on the CPU or a manifest without the field makes the whole stage unmeasured.
    """
    found: dict[str, list[float | None]] = {}
    for path in sorted(Path(results_dir).rglob("*.manifest.json")):
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            rule, extra = manifest["rule"], manifest.get("extra", {})
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a readable manifest ({exc})") from None
        value = extra.get("gpu_s")
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0
        ):
            raise ValueError(f"{path}: extra.gpu_s must be a number >= 0 or null, got {value!r}")
        found.setdefault(rule, []).append(None if value is None else float(value))
    return {
        stage: None if any(v is None for v in values) else sum(v for v in values if v is not None)
        for stage, values in found.items()
    }


@dataclass(frozen=True)
class GateVerdict:
    """The run against the registered gate: CPU always measured, GPU only where every policy stage was."""

    cpu_hours: float
    gpu_hours: float | None
    """Total GPU-hours, None when some policy stage did not measure its GPU time."""
    cpu_within: bool
    gpu_within: bool | None
    """None: unverified (not measured)."""
    unmeasured: tuple[str, ...]
    """Policy stages whose GPU time was not measured."""

    @property
    def within(self) -> bool | None:
        """False when a measured part is over; None when the CPU part is within and GPU unverified."""
        if not self.cpu_within or self.gpu_within is False:
            return False
        return None if self.gpu_within is None else True

    def text(self, cpu_gate: float, gpu_gate: float) -> str:
        """The verdict line of compute.md."""
        cpu_state = "within" if self.cpu_within else "OVER"
        cpu = f"{self.cpu_hours:.3f} CPU-hours against the registered {cpu_gate:g}: {cpu_state}"
        if self.gpu_hours is None:
            gpu = (
                f"GPU-hours not measured (no synchronized GPU timing for {', '.join(self.unmeasured)}), "
                f"so the GPU part of the gate ({gpu_gate:g} GPU-hours) is unverified"
            )
        else:
            gpu = (
                f"{self.gpu_hours:.3f} GPU-hours against the registered {gpu_gate:g}: "
                f"{'within' if self.gpu_within else 'OVER'}"
            )
        overall = {True: "within the gate", False: "OVER the gate", None: "GPU part unverified"}[self.within]
        return f"Total: {cpu}; {gpu}: **{overall}**."


def gate_verdict(
    stages: list[StageCompute], cpu_gate: float, gpu_gate: float, server_cpu_s: float = 0.0
) -> GateVerdict:
    """Totals of ``stages`` (plus ``server_cpu_s``, the CPU seconds of the servers the run talked to)
    against the gate; a policy stage without GPU seconds leaves GPU unverified."""
    cpu_hours = (sum(s.cpu_s for s in stages) + server_cpu_s) / 3600.0
    unmeasured = tuple(s.stage for s in stages if s.stage in POLICY_STAGES and s.gpu_s is None)
    if unmeasured or not any(s.stage in POLICY_STAGES for s in stages):
        gpu_hours = None
        unmeasured = unmeasured or ("any policy stage",)
    else:
        gpu_hours = sum(s.gpu_s or 0.0 for s in stages) / 3600.0
    return GateVerdict(
        cpu_hours=cpu_hours,
        gpu_hours=gpu_hours,
        cpu_within=cpu_hours <= cpu_gate,
        gpu_within=None if gpu_hours is None else gpu_hours <= gpu_gate,
        unmeasured=unmeasured,
    )


def compute_report(
    prereg: Prereg,
    bench_dir: str | os.PathLike[str],
    out_md: str | os.PathLike[str],
    out_json: str | os.PathLike[str],
    decision_md: str = "decision.md",
    results_dir: str | os.PathLike[str] | None = None,
    servers: Sequence[ServerCompute] = (),
) -> dict[str, Any]:
    """Write compute per stage against the registered gate, as markdown and JSON.

    ``results_dir`` (default: the folder holding ``bench_dir``) is searched for the manifests that record
    GPU seconds. ``servers``: the CPU seconds of each server the run talked to (a served policy, a served
    simulator; :func:`grpo_probe.compute.servers.server_compute`), each a line of its own, counted in the
    total: the benchmarks see only the probe's side of each call.
    """
    gpu = read_gpu_seconds(Path(bench_dir).parent if results_dir is None else results_dir)
    stages = [replace(s, gpu_s=gpu.get(s.stage)) for s in read_benchmarks(bench_dir)]
    gate = prereg.compute_gate
    server_cpu_s = sum(s.cpu_s or 0.0 for s in servers)
    verdict = gate_verdict(stages, gate.cpu_hours, gate.gpu_hours, server_cpu_s)
    record = {
        "prereg": prereg.name,
        "prereg_sha256": prereg.sha256,
        "stages": [asdict(s) for s in stages],
        "servers": [asdict(s) for s in servers],
        "servers_cpu_s": server_cpu_s,
        "total_cpu_hours": verdict.cpu_hours,
        "total_gpu_hours": verdict.gpu_hours,
        "gpu_unmeasured_stages": list(verdict.unmeasured),
        "total_wall_s": sum(s.wall_s for s in stages),
        "gate": {"cpu_hours": gate.cpu_hours, "gpu_hours": gate.gpu_hours},
        "cpu_within_gate": verdict.cpu_within,
        "gpu_within_gate": verdict.gpu_within,
        "within_gate": verdict.within,
    }
    lines = [
        f"# Compute: {prereg.name}",
        "",
        "What each stage of the run used (Snakemake `benchmark:` files; GPU seconds from the synchronized "
        "timing of the policy calls the rollout rules record), against the compute gate registered in the "
        f"prereg. The scientific record is [{decision_md}]({decision_md}); this page changes from run to "
        "run, that one does not.",
        "",
        "| stage | jobs | wall (s) | CPU (s) | GPU (s) | peak RSS (MB) |",
        "|---|---|---|---|---|---|",
    ]
    for s in stages:
        gpu_cell = "not measured" if s.gpu_s is None else f"{s.gpu_s:.1f}"
        lines.append(
            f"| {s.stage} | {s.jobs} | {s.wall_s:.1f} | {s.cpu_s:.1f} | {gpu_cell} | {s.max_rss_mb:.0f} |"
        )
    for server in servers:
        cpu_cell = "not measured" if server.cpu_s is None else f"{server.cpu_s:.1f}"
        lines.append(f"| server: {server.role} ({server.address}) | - | - | {cpu_cell} | - | - |")
    lines += ["", verdict.text(gate.cpu_hours, gate.gpu_hours), ""]
    if servers:
        lines += [
            "A server's CPU is its process's own, read from the server when it was bound and again for "
            "this page (every client it answered in between counts), and is in the total above."
            + "".join(f" {s.role}: {s.note}." for s in servers if s.note),
            "",
        ]
    ratio = replay_cost_ratio(stages)
    if ratio is not None:
        record["replay_cpu_over_probe_cpu"] = ratio
        lines += [
            f"The replays (and their unperturbed oracle) took {ratio:.2f}x the CPU seconds of the probe's "
            "own rollouts in this run.",
            "",
        ]
    atomic_write_text(out_md, "\n".join(lines))
    atomic_write_json(out_json, record)
    return record


def replay_cost_ratio(stages: list[StageCompute]) -> float | None:
    """CPU seconds of the replay stage (replays and their oracle) over those of the probe stage (None
    without both)."""
    by_stage = {s.stage: s.cpu_s for s in stages}
    replay = by_stage.get("replay")
    probe = by_stage.get("probe")
    if not replay or not probe:
        return None
    return replay / probe


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
    phase2 = estimate.get("phase2")
    if phase2 is None:
        lines.append("phase 2: not registered in this design")
        return "\n".join(lines)
    lines.append(
        f"phase 2 (the pilot of the head the decision names; gate {phase2['gate_cpu_hours']:g} CPU-hours):"
    )
    for head, h in phase2["heads"].items():
        updates = (
            "GRPO updates not included (no phase2_train benchmark yet): a lower bound"
            if h["update_cpu_s"] is None
            else f"GRPO updates {h['update_cpu_s']:.1f} CPU-s (measured)"
        )
        state = "within" if h["within_gate"] else "OVER"
        lines.append(
            f"  {head:4s} {h['train_episodes']} training + {h['eval_episodes']} held-out episodes "
            f"~{h['rollout_cpu_s']:.1f} CPU-s; {updates}; ~{h['estimated_cpu_hours']:.3f} CPU-hours, {state}"
        )
    return "\n".join(lines)
