"""The rollout jobs of the probe: the parallel oracle, the anchors with the draw-0 oracles, the probe
shards, the replays and the gradient reads' reruns."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grpo_probe.prereg import Prereg, load_prereg
from grpo_probe.probe_jobs.sources import PathLike, arm_policy_source, cell_job, group_job
from grpo_probe.provenance import policy_sources, write_design_manifest
from grpo_probe.rollout.table import ANCHOR_CELL

__all__ = ["ReplayShardFiles", "anchors", "gradients", "parallel_oracle", "probe_shard", "replay"]


@dataclasses.dataclass(frozen=True)
class ReplayShardFiles:
    """One probe shard's replays (:func:`replay`): the shard's replayed seeds, in registered order, its
    probe table (the draws replayed and measured against) and the replay table to write."""

    seeds: tuple[int, ...]
    probe_table: PathLike
    table: PathLike


def parallel_oracle(
    prereg_path: PathLike,
    sources: Mapping[str, PathLike],
    upstream: Sequence[PathLike],
    report: PathLike,
    manifest: PathLike,
    device: str = "cpu",
    checkpoints: Mapping[str, PathLike] | None = None,
) -> None:
    """Every registered (arm, mode) pair of the oracle subset, sequential against parallel, bit for bit.

    The worker count is registered with the subset (``oracles.parallel.workers``): the oracle proves the
    parallel path at that width, so it is not a run setting here.
    """
    # Local: this import loads torch (about 1.4 s), which the jobs that read tables never need.
    from grpo_probe.rollout import run_parallel_oracle

    prereg = load_prereg(prereg_path)
    oracle = prereg.oracles.parallel
    jobs = []
    for arm in oracle.arms:
        head = prereg.arms[arm].head
        for mode in oracle.modes:
            if mode.head != head:
                continue
            checkpoint = None if checkpoints is None else checkpoints.get(arm)
            source = arm_policy_source(sources[arm], checkpoint, device)
            cell = f"oracle:{arm}:{mode.kind}"
            jobs.append(group_job(prereg, arm, cell, source, mode, oracle.seeds, oracle.draws))
    jobs += _replay_oracle_cases(prereg, jobs)
    result = run_parallel_oracle(jobs, report, workers=oracle.workers)
    extra = {"episodes": result.get("episodes")}
    sources = policy_sources([job.source for job in jobs])
    write_design_manifest(prereg, manifest, "parallel_oracle", [report], upstream, extra, sources)


def _replay_oracle_cases(prereg: Prereg, jobs: Sequence[Any]) -> list[Any]:
    """The parallel oracle's replay cases: the first case of each arm on the oracle's first seed, replayed
    once under each registered perturbation, so replay rows are proven path-independent like the draws
    (one seed: the replay path differs from the draws' only in the perturbation)."""
    # Local: the replay module costs about 11 ms (tqdm), which only the jobs that replay need.
    from grpo_probe.rollout.replay import registered_replays

    if prereg.replay is None:
        return []
    first = {}
    for job in jobs:
        first.setdefault(job.arm, job)
    replays = registered_replays(prereg.replay, first_only=True)
    return [job.replace(replay=r, seeds=job.seeds[:1]) for job in first.values() for r in replays]


def anchors(
    prereg_path: PathLike,
    arm: str,
    source: PathLike,
    upstream: Sequence[PathLike],
    table: PathLike,
    draw0_dir: PathLike,
    manifest: PathLike,
    workers: int,
    device: str = "cpu",
    checkpoint: PathLike | None = None,
) -> None:
    """The arm's deterministic rerun on the registered seeds (AR greedy; flow Heun draw 0), then the
    draw-0 oracle of each of the arm's cells against it: ``draw0_dir/<cell>.json``.

    The draw-0 oracle runs a cell's probe path with stochasticity off on ``oracles.draw0.seeds`` and must
    reproduce the cell's reference rows bit for bit (these anchors, or for an SDE cell its twin sampler;
    :func:`grpo_probe.rollout.run_draw0_oracle`). Why here: it reads the anchors and runs the same policy,
    so it costs seconds of episodes and no start-up of its own (importing torch alone is about 2 CPU-s a
    process), and every probe shard of the arm's cells waits on this job, so no probe rollout starts
    before its cell's draw-0 oracle passes.
    """
    # Local: this import loads torch (about 1.4 s), which the jobs that read tables never need.
    from grpo_probe.rollout import run_draw0_oracle, write_shard

    prereg = load_prereg(prereg_path)
    mode = prereg.arms[arm].anchor
    policy = arm_policy_source(source, checkpoint, device)
    job = group_job(prereg, arm, ANCHOR_CELL, policy, mode, prereg.seeds, 1)
    write_shard(job, table, workers=workers)
    cells = [cell.id for cell in prereg.enabled_cells if cell.arm == arm]
    Path(draw0_dir).mkdir(parents=True, exist_ok=True)
    reports = [Path(draw0_dir) / f"{cell}.json" for cell in cells]
    for cell, report in zip(cells, reports, strict=True):
        draw0 = cell_job(prereg, cell, policy, prereg.oracles.draw0_seeds, 1)
        run_draw0_oracle(draw0, report, anchor_table=table, workers=workers)
    # GPU seconds: the draw-0 oracles do not time their policy calls, so the stage's are not measured.
    extra = {"arm": arm, "draw0_cells": cells, "device": device, "gpu_s": None}
    write_design_manifest(
        prereg, manifest, "anchors", [table, *reports], upstream, extra, policy_sources([policy])
    )


def probe_shard(
    prereg_path: PathLike,
    cell: str,
    seeds: Sequence[int],
    source: PathLike,
    upstream: Sequence[PathLike],
    table: PathLike,
    manifest: PathLike,
    workers: int,
    device: str = "cpu",
    checkpoint: PathLike | None = None,
) -> None:
    """``seeds x K`` stochastic rollouts of one cell; every draw keyed by (seed, replan, draw)."""
    # Local: the shard writer costs about 10 ms (tqdm), and the engine it runs loads torch.
    from grpo_probe.rollout import write_shard

    prereg = load_prereg(prereg_path)
    unknown = sorted(set(seeds) - set(prereg.seeds))
    if unknown:
        raise ValueError(f"{prereg.path}: shard seeds {unknown} are not registered seeds")
    policy = arm_policy_source(source, checkpoint, device)
    job = cell_job(prereg, cell, policy, seeds, prereg.group_size)
    shard = write_shard(job, table, workers=workers)
    gpu = {"device": device, "gpu_s": shard.gpu_s}  # GPU seconds (None on the CPU: not measured)
    extra = {"cell": cell, "seeds": list(seeds), **gpu}
    write_design_manifest(prereg, manifest, "probe", [table], upstream, extra, policy_sources([policy]))


def replay(
    prereg_path: PathLike,
    cell: str,
    source: PathLike,
    cell_table: PathLike,
    upstream: Sequence[PathLike],
    oracle_report: PathLike,
    shards: Sequence[ReplayShardFiles],
    manifest: PathLike,
    workers: int,
    device: str = "cpu",
    checkpoint: PathLike | None = None,
) -> None:
    """A cell's replays (the design's replay section), in one job: the replay oracle, then the replays of
    each probe shard that holds a replayed seed.

    - **Replay oracle**: the cell's draws on ``replay.oracle.seeds``, replayed with every registered
      perturbation at size zero, reproduce their probe rows (``cell_table``) bit for bit: the replay path
      differs from the probe path only by the perturbation. It runs first and raises on a mismatch, so
      no replay is measured before it passes.
    - **Replays**: every draw of each shard's replayed seeds under every registered perturbation, one
      table per probe shard (:class:`ReplayShardFiles`), measured against that shard's probe rows.

    Why one job: each part is seconds of episodes behind the same policy and simulator start-up
    (importing torch alone is about 2 CPU-s a process), and they share one pool of rollout workers.
    """
    # Local: the engine loads torch (about 1.4 s) and the replay module costs about 11 ms (tqdm).
    from grpo_probe.rollout import RolloutPool, job_worker_count, run_replay_oracle
    from grpo_probe.rollout.replay import registered_replays, write_replay_shard

    prereg = load_prereg(prereg_path)
    section = prereg.replay
    if section is None:
        raise ValueError(f"{prereg.path}: replays run only for a design with a replay section")
    for shard in shards:
        unknown = sorted(set(shard.seeds) - set(section.seeds))
        if unknown:
            raise ValueError(f"{prereg.path}: replay shard seeds {unknown} are not in replay.seeds")
    policy = arm_policy_source(source, checkpoint, device)
    oracle = cell_job(prereg, cell, policy, section.oracle_seeds, prereg.group_size)
    jobs = [cell_job(prereg, cell, policy, shard.seeds, prereg.group_size) for shard in shards]
    started = max(job_worker_count(job, workers) for job in [oracle, *jobs])  # the largest one's pool
    with RolloutPool(started) if started > 0 else contextlib.nullcontext() as pool:
        zeroed = registered_replays(section, first_only=True)
        run_replay_oracle(oracle, zeroed, cell_table, oracle_report, workers=workers, pool=pool)
        for shard, job in zip(shards, jobs, strict=True):
            write_replay_shard(job, section, shard.probe_table, shard.table, workers=workers, pool=pool)
    extra = {
        "cell": cell,
        "shards": [{"table": str(s.table), "seeds": list(s.seeds)} for s in shards],
        "device": device,
        # the replay oracle does not time its policy calls, so the stage's GPU seconds are not measured
        "gpu_s": None,
    }
    outputs = [oracle_report, *(s.table for s in shards)]
    write_design_manifest(prereg, manifest, "replay", outputs, upstream, extra, policy_sources([policy]))


def gradients(
    prereg_path: PathLike,
    cell: str,
    source: PathLike,
    shards: Sequence[PathLike],
    upstream: Sequence[PathLike],
    out: PathLike,
    manifest: PathLike,
    workers: int,
    checkpoint: PathLike | None = None,
) -> None:
    """A cell's gradient file for the gradient reads (a design with ``analysis.gradient_reads``): its
    episodes run again with the recording policy, checked against the probe ``shards``, and each episode's
    GRPO gradient sketched (:mod:`grpo_probe.phase2.gradients`); or, for a sampler without log-probs or a
    policy that gives no gradients, the reason, so the page can say it."""
    # Local: the gradients load torch and the rollout engine, which only this job needs.
    from grpo_probe.phase2.gradients import cell_gradient_record, write_gradient_file

    prereg = load_prereg(prereg_path)
    if not prereg.analysis.gradient_reads:
        raise ValueError(
            f"{prereg.path}: analysis.gradient_reads is not set; the gradient reads are not registered"
        )
    recipe = json.loads(Path(source).read_text())
    path = str(checkpoint) if checkpoint else recipe.get("checkpoint")
    record = cell_gradient_record(prereg, cell, recipe, path, [str(s) for s in shards], workers)
    write_gradient_file(record, out)
    extra = {"cell": cell, "available": record["available"], "reason": record["reason"]}
    write_design_manifest(prereg, manifest, "gradients", [out], upstream, extra)
