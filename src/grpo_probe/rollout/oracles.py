"""The two oracles every probe number depends on, each writing a JSON report and failing loudly.

- **Parallel oracle**: for a registered subset of (arm, mode, seeds, draws), run the sequential path
  and the parallel path and compare every per-tick trace, executed action and token id bit for bit.
- **Unperturbed replay oracle**: a draw replayed through the replay path with every registered
  perturbation at size zero reproduces its probe row bit for bit (every column, frames included), so the
  replays differ from their draws only by the registered perturbation, never by keys or bookkeeping.
- **Draw-0 oracle**: the probe instrument with its stochasticity switched off reproduces the reference
  rows bit for bit. An AR temperature cell runs its own sampler at T with the Gumbel noise switched off
  (``SamplingMode.noise``), which must pick the greedy anchor's token ids and so its actions: this
  exercises the sampling path itself, not a greedy stand-in. Its log-probs and entropies are those of
  the temperature-T distribution, so those columns (and the mode labels) are left out; token ids, token
  counts, per-tick traces and outcomes are compared with the anchor table, and the executed actions with
  a greedy rerun on the probe path (the table holds no actions). Flow cells run draw 0 (the anchor's
  keyed noise) against the anchor table; the SDE sampler at a = 0 runs against the deterministic Euler
  sampler on the same grid.

A report holds pass/fail, how much was compared, the sha256 of both sides' rollout tables and the first
divergence (arm, mode, seed, draw, tick, field, both values). It holds no times or paths of this machine,
so the same inputs give the same report bytes. On a mismatch the report is written, and kept a second
time where a failed job's cleanup does not reach (:func:`failure_report_path`), then
:class:`OracleMismatchError` is raised with the divergence and that path in its message.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from grpo_probe.atomic_io import atomic_write_json
from grpo_probe.envs.boat.spec import BOAT_ID
from grpo_probe.rollout.divergence import ComparedEpisode, ComparisonCounts, Divergence, compare_episodes
from grpo_probe.rollout.engine import group_table, run_group, run_sequential
from grpo_probe.rollout.job import DEFAULT_ENVS_PER_WORKER, GroupJob
from grpo_probe.rollout.lockstep import ChunkHook
from grpo_probe.rollout.perturb import Replay
from grpo_probe.rollout.pool import RolloutPool
from grpo_probe.rollout.progress import RolloutProgress
from grpo_probe.rollout.results import EpisodeResult
from grpo_probe.rollout.table import ANCHOR_CELL, read_rollout_table, rollout_schema, table_bytes
from grpo_probe.sampling import SamplingMode, mode_text, sampler

__all__ = [
    "EULER_KIND",
    "OracleMismatchError",
    "anchor_mode",
    "draw0_probe_mode",
    "failure_report_path",
    "run_draw0_oracle",
    "run_parallel_oracle",
    "run_replay_oracle",
]

EULER_KIND = "flow_euler"
"""Sampling kind of the deterministic Euler flow sampler, the reference of an SDE cell's draw-0 oracle."""


class OracleMismatchError(RuntimeError):
    """Two runs that must be bit-identical differ; the message names the first divergence."""

    def __init__(self, message: str, divergence: Divergence) -> None:
        super().__init__(message)
        self.divergence = divergence


def anchor_mode(head: str, steps: int = 10) -> SamplingMode:
    """The deterministic mode of an arm's anchor rows: greedy for AR, the Heun ODE (draw 0) for flow."""
    if head == "ar":
        return SamplingMode("greedy")
    if head == "flow":
        return SamplingMode("flow_ode", steps=steps)
    raise ValueError(f"no anchor mode is registered for head {head!r} (known: 'ar', 'flow')")


def draw0_probe_mode(mode: SamplingMode) -> SamplingMode:
    """The probe's mode with its stochasticity switched off, as its kind declares it
    (:class:`grpo_probe.sampling.Draw0`): T -> T without Gumbel noise, SDE a -> 0, greedy and ODE
    unchanged (an ODE cell's draw 0 is the anchor's keyed noise)."""
    probe = sampler(mode.kind).draw0.probe
    return mode if probe is None else probe(mode)


def _twin_mode(mode: SamplingMode) -> SamplingMode:
    """The deterministic mode a stochastic cell's noise-off probe reproduces (SDE -> the Euler sampler)."""
    twin_of = sampler(mode.kind).draw0.twin_of
    if twin_of is None:
        raise ValueError(
            f"the draw-0 oracle: kind {mode.kind!r} declares no deterministic twin to compare with"
        )
    return twin_of(mode)


def _job_dict(job: GroupJob) -> dict[str, Any]:
    return {
        "arm": job.arm,
        "cell": job.cell,
        "mode": {
            "kind": job.mode.kind,
            "temperature": job.mode.temperature,
            "sde_a": job.mode.sde_a,
            "steps": job.mode.steps,
            "noise": job.mode.noise,
        },
        "seeds": list(job.seeds),
        "draws": job.group_size,
        "run_key": job.run_key,
        **_env_dict(job),
        **(
            {"observation": job.observation.to_dict()}
            if job.observation.cameras or job.observation.lerobot
            else {}
        ),
        **({"row_block": job.source.row_block} if job.source.row_block is not None else {}),
        **({"envs_per_worker": job.envs_per_worker} if job.envs_per_worker is not None else {}),
        **({"replay": job.replay.to_dict()} if job.replay is not None else {}),
    }


def _frame_digests(job: GroupJob, episodes: dict[tuple[int, int], ComparedEpisode]) -> list[dict[str, Any]]:
    """Per episode, the sha256 of the frames the policy saw at each replan (empty without cameras)."""
    out = []
    for (seed, draw), episode in sorted(episodes.items()):
        digests = episode.row.get("replan_frame_sha256")
        if digests is not None:
            out.append(
                {"arm": job.arm, "cell": job.cell, "seed": seed, "draw": draw, "sha256": list(digests)}
            )
    return out


def _env_dict(job: GroupJob) -> dict[str, Any]:
    """The environment a report's case ran in: the boat's numbers under ``sim`` (the key its reports
    have always used), any other environment as ``env: {id, params}``."""
    if job.env.id == BOAT_ID:
        return {"sim": job.env.params_dict()}
    return {"env": {"id": job.env.id, "params": job.env.params_dict()}}


def _compare_groups(
    job: GroupJob,
    first: dict[tuple[int, int], ComparedEpisode],
    second: dict[tuple[int, int], ComparedEpisode],
    names: tuple[str, str],
    skip: Sequence[str],
) -> tuple[Divergence | None, ComparisonCounts]:
    """Compare episode by episode in (seed, draw) order; the first divergence is the earliest episode's."""
    counts = ComparisonCounts()
    found: Divergence | None = None
    mode = mode_text(job.mode)
    for seed, draw in sorted(set(first) | set(second)):
        if (seed, draw) not in first or (seed, draw) not in second:
            side = names[0] if (seed, draw) not in first else names[1]
            counts.mismatched_episodes += 1
            if found is None:
                found = Divergence(
                    job.arm, mode, seed, draw, None, "episode", "present", f"missing from {side}", names
                )
            continue
        diff, episode_counts = compare_episodes(
            first[(seed, draw)],
            second[(seed, draw)],
            executed_per_replan=job.spec.executed_actions,
            skip=skip,
            trace_columns=job.spec.trace_columns,
        )
        counts.add(episode_counts)
        if diff is not None and found is None:
            tick, field, value_a, value_b = diff
            found = Divergence(job.arm, mode, seed, draw, tick, field, value_a, value_b, names)
    return found, counts


def _episodes(
    job: GroupJob, results: Sequence[EpisodeResult]
) -> tuple[dict[tuple[int, int], ComparedEpisode], bytes]:
    table = group_table(job, results)
    rows = table.to_pylist()
    by_key = {}
    for result, row in zip(results, rows, strict=True):
        by_key[(result.spec.seed, result.spec.draw)] = ComparedEpisode(row, result.executed_actions)
    return by_key, table_bytes(table)


def failure_report_path(report_path: str | os.PathLike[str]) -> Path:
    """Where a failed oracle's report is kept: ``<name>.failed.json`` beside the report.

    Why a second file: the report is the job's output, and Snakemake deletes the outputs of a failed job,
    so a report written only there is gone when the error naming it is read. The copy is no declared
    output; it is removed again when the oracle passes.
    """
    path = Path(report_path)
    return path.with_name(f"{path.stem}.failed.json")


def _finish(
    report: dict[str, Any], report_path: str | os.PathLike[str], divergence: Divergence | None
) -> dict[str, Any]:
    atomic_write_json(report_path, report)
    kept = failure_report_path(report_path)
    if divergence is not None:
        atomic_write_json(kept, report)
        raise OracleMismatchError(
            f"{report['oracle']} oracle failed (report kept at {kept}): {divergence.message()}", divergence
        )
    kept.unlink(missing_ok=True)
    return report


def run_parallel_oracle(
    jobs: Sequence[GroupJob],
    report_path: str | os.PathLike[str],
    *,
    workers: int = 2,
    envs_per_worker: int = DEFAULT_ENVS_PER_WORKER,
    pool: RolloutPool | None = None,
    parallel_hook: ChunkHook | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Run every job on both paths, compare bit for bit, write the report; raise on any difference.

    ``parallel_hook`` is the test seam through which tests plant a perturbation in the parallel path.
    """
    if not jobs:
        raise ValueError(f"{report_path}: the parallel oracle needs at least one (arm, mode) case")
    names = ("sequential", "parallel")
    digests = {name: {"tables": hashlib.sha256(), "actions": hashlib.sha256()} for name in names}
    counts = ComparisonCounts()
    first_divergence: Divergence | None = None
    frames: list[dict[str, Any]] = []
    with ExitStack() as stack:
        active_pool = pool if pool is not None else stack.enter_context(RolloutPool(workers))
        for job in jobs:
            total = len(job.episodes())
            sequential_progress = RolloutProgress(
                total, f"oracle sequential {job.label}", enabled=show_progress
            )
            sequential = run_sequential(job, progress=sequential_progress)
            sequential_progress.close()
            parallel_progress = RolloutProgress(total, f"oracle parallel {job.label}", enabled=show_progress)
            parallel = active_pool.run(
                job, envs_per_worker=envs_per_worker, hook=parallel_hook, progress=parallel_progress
            )
            parallel_progress.close()
            sides = {}
            for name, results in zip(names, (sequential, parallel), strict=True):
                episodes, data = _episodes(job, results)
                sides[name] = episodes
                digests[name]["tables"].update(data)
                for r in results:
                    digests[name]["actions"].update(r.executed_actions.tobytes())
            frames.extend(_frame_digests(job, sides[names[0]]))
            divergence, job_counts = _compare_groups(job, sides[names[0]], sides[names[1]], names, skip=())
            counts.add(job_counts)
            if first_divergence is None:
                first_divergence = divergence
    report = {
        "oracle": "parallel",
        "pass": first_divergence is None,
        "workers": workers if pool is None else pool.workers,
        "envs_per_worker": envs_per_worker,
        "cases": [_job_dict(job) for job in jobs],
        "counts": vars(counts),
        **{
            name: {"tables_sha256": d["tables"].hexdigest(), "actions_sha256": d["actions"].hexdigest()}
            for name, d in digests.items()
        },
        "first_divergence": None if first_divergence is None else first_divergence.to_dict(),
    }
    if frames:
        report["frames"] = {"compared": counts.frames, "sequential_sha256_per_replan": frames}
    return _finish(report, report_path, first_divergence)


def _anchor_episodes(
    job: GroupJob, anchor_table: str | os.PathLike[str]
) -> tuple[dict[tuple[int, int], ComparedEpisode], bytes]:
    table = read_rollout_table(anchor_table, schema=rollout_schema(job.spec.episode_schema))
    mask = pc.and_(
        pc.and_(pc.equal(table["cell"], ANCHOR_CELL), pc.equal(table["arm"], job.arm)),
        pc.and_(
            pc.equal(table["draw"], 0), pc.is_in(table["seed"], value_set=pa.array(job.seeds, pa.int64()))
        ),
    )
    selected = table.filter(mask).sort_by([("seed", "ascending"), ("draw", "ascending")])
    rows = selected.to_pylist()
    found = {row["seed"] for row in rows}
    missing = [s for s in job.seeds if s not in found]
    if missing:
        raise ValueError(
            f"{anchor_table}: no anchor row (cell 'anchor', draw 0) of arm {job.arm!r} for seeds {missing}"
        )
    return {(row["seed"], 0): ComparedEpisode(row) for row in rows}, table_bytes(selected)


def _on_probe_path(
    run: GroupJob,
    what: str,
    hook: ChunkHook | None,
    workers: int,
    pool: RolloutPool | None,
    envs_per_worker: int,
    show_progress: bool,
) -> list[EpisodeResult]:
    """``run`` on the probe path (``workers``/``pool`` as in :func:`run_group`), with a progress bar."""
    progress = RolloutProgress(len(run.episodes()), f"{what} {run.label}", enabled=show_progress)
    results = run_group(
        run, workers=workers, pool=pool, envs_per_worker=envs_per_worker, hook=hook, progress=progress
    )
    progress.close()
    return results


def _table_columns(job: GroupJob) -> tuple[str, ...]:
    """Every column of the job's rollout table: skipping them all leaves only the executed actions."""
    return tuple(rollout_schema(job.spec.episode_schema).names)


def run_draw0_oracle(
    job: GroupJob,
    report_path: str | os.PathLike[str],
    *,
    anchor_table: str | os.PathLike[str] | None = None,
    workers: int = 0,
    pool: RolloutPool | None = None,
    envs_per_worker: int = DEFAULT_ENVS_PER_WORKER,
    probe_hook: ChunkHook | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Run the cell ``job`` with stochasticity off (draw 0) on the probe path; compare with its reference.

    Reference: the arm's rows in ``anchor_table`` for AR and flow-ODE cells; for an SDE cell, the Euler
    sampler on the sequential path with the same keyed initial noise (every column but the mode labels
    must match, actions included; at a = 0 the SDE sampler defines no log-prob, like Euler).

    Against the anchor table every column but ``cell`` must match, except for an AR temperature cell,
    whose noise-off probe keeps its temperature-T log-probs, entropies and mode labels (the columns its
    kind's :class:`grpo_probe.sampling.Draw0` skips are left out): its token ids, token counts, traces
    and outcomes must match, and its executed actions must match those of a greedy rerun on the probe path
    (``action_reference`` in the report). ``workers``/``pool`` choose the probe path as in
    :func:`run_group`. The report's ``compared`` says which fields were compared with which reference.
    """
    probe_job = job.replace(mode=draw0_probe_mode(job.mode), group_size=1)

    def on_probe_path(run: GroupJob, what: str, hook: ChunkHook | None) -> list[EpisodeResult]:
        return _on_probe_path(run, what, hook, workers, pool, envs_per_worker, show_progress)

    probe, probe_bytes = _episodes(probe_job, on_probe_path(probe_job, "draw-0 probe", probe_hook))
    action_reference: dict[str, Any] | None = None
    action_divergence: Divergence | None = None
    draw0 = sampler(job.mode.kind).draw0  # how the kind declares its draw-0 check
    reference_name = draw0.reference_name
    skip: tuple[str, ...] = draw0.skip
    compared = draw0.compared
    if draw0.against == "run":
        reference_job = job.replace(mode=_twin_mode(job.mode), group_size=1)
        reference, reference_bytes = _episodes(reference_job, run_sequential(reference_job))
    else:
        if anchor_table is None:
            raise ValueError(
                f"draw-0 oracle of cell {job.cell!r}: an anchor table is required for mode {job.mode.kind!r}"
            )
        reference, reference_bytes = _anchor_episodes(probe_job, anchor_table)
        if draw0.actions_from_rerun:
            rerun_job = probe_job.replace(mode=_twin_mode(job.mode))
            rerun, rerun_bytes = _episodes(
                rerun_job, on_probe_path(rerun_job, f"draw-0 {rerun_job.mode.kind} rerun", None)
            )
            action_divergence, action_counts = _compare_groups(
                probe_job, probe, rerun, ("probe", rerun_job.mode.kind), skip=_table_columns(probe_job)
            )
            action_reference = {
                "kind": rerun_job.mode.kind,
                "compared": "executed actions",
                "tables_sha256": hashlib.sha256(rerun_bytes).hexdigest(),
                "counts": vars(action_counts),
            }
    names = ("probe", reference_name)
    divergence, counts = _compare_groups(probe_job, probe, reference, names, skip=skip)
    if divergence is None:
        divergence = action_divergence
    report = {
        "oracle": "draw0",
        "pass": divergence is None,
        "cell": job.cell,
        "arm": job.arm,
        "cell_mode": _job_dict(job)["mode"],
        "probe": {**_job_dict(probe_job), "tables_sha256": hashlib.sha256(probe_bytes).hexdigest()},
        "reference": {"kind": reference_name, "tables_sha256": hashlib.sha256(reference_bytes).hexdigest()},
        "compared": compared,
        "skipped_columns": list(skip),
        "counts": vars(counts),
        "first_divergence": None if divergence is None else divergence.to_dict(),
    }
    if action_reference is not None:
        report["action_reference"] = action_reference
    probe_frames = _frame_digests(probe_job, probe)
    if probe_frames:
        report["frames"] = {"compared": counts.frames, "probe_sha256_per_replan": probe_frames}
    return _finish(report, report_path, divergence)


def run_replay_oracle(
    job: GroupJob,
    replays: Sequence[Replay],
    probe_table: str | os.PathLike[str],
    report_path: str | os.PathLike[str],
    *,
    workers: int = 0,
    pool: RolloutPool | None = None,
    envs_per_worker: int = DEFAULT_ENVS_PER_WORKER,
    probe_hook: ChunkHook | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Replay every draw of ``job`` under each of ``replays`` at size zero; each must equal its probe row.

    ``job`` is the cell's group job on the oracle's seeds (all K draws); ``replays`` the registered ones
    (their sizes are set to zero here); ``probe_table`` the cell's probe rows. Every column is compared,
    and the executed actions between the replays of different perturbations. ``probe_hook`` is the seam
    through which tests plant a mismatch.
    """
    if not replays:
        raise ValueError(f"{report_path}: the replay oracle needs at least one registered perturbation")
    table = read_rollout_table(probe_table, schema=rollout_schema(job.spec.episode_schema))
    mask = pc.is_in(table["seed"], value_set=pa.array(job.seeds, pa.int64()))
    selected = table.filter(mask).sort_by([("seed", "ascending"), ("draw", "ascending")])
    reference = {(row["seed"], row["draw"]): ComparedEpisode(row) for row in selected.to_pylist()}
    counts = ComparisonCounts()
    found: Divergence | None = None
    cases = []
    first_actions: dict[tuple[int, int], ComparedEpisode] | None = None
    for replay in replays:
        zero = Replay(replay.index, replay.slot, replay.perturbation.zeroed())
        run = job.replace(replay=zero)
        results = _on_probe_path(
            run, "replay oracle", probe_hook, workers, pool, envs_per_worker, show_progress
        )
        episodes, data = _episodes(run, results)
        divergence, case_counts = _compare_groups(run, episodes, reference, ("replay", "probe"), skip=())
        if first_actions is None:
            first_actions = episodes
        else:
            action_divergence, action_counts = _compare_groups(
                run, episodes, first_actions, ("replay", "first replay"), skip=_table_columns(run)
            )
            case_counts.add(action_counts)
            divergence = divergence or action_divergence
        counts.add(case_counts)
        found = found or divergence
        cases.append(
            {
                "replay": zero.to_dict(),
                "registered": replay.perturbation.to_dict(),
                "tables_sha256": hashlib.sha256(data).hexdigest(),
                "pass": divergence is None,
            }
        )
    report = {
        "oracle": "replay",
        "pass": found is None,
        "cell": job.cell,
        "arm": job.arm,
        "job": _job_dict(job),
        "reference": {"kind": "probe", "tables_sha256": hashlib.sha256(table_bytes(selected)).hexdigest()},
        "compared": "every column of every draw against its probe row; executed actions across replays",
        "cases": cases,
        "counts": vars(counts),
        "first_divergence": None if found is None else found.to_dict(),
    }
    return _finish(report, report_path, found)
