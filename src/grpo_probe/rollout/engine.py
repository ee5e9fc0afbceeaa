"""The group runner: K keyed rollouts per seed, on a sequential path and a parallel path that share one loop.

The loop is :func:`~grpo_probe.rollout.lockstep.run_lockstep` (why one loop: that module says); the
sequential path runs it with one env at a time in this process, the parallel path in worker processes
(:mod:`grpo_probe.rollout.pool`) with several envs in lockstep, and :func:`run_in_process` runs the
parallel path's tasks one after another here. :func:`run_group` picks the path a job's size earns.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import pyarrow as pa
import torch

from grpo_probe.envs.protocol import Environment
from grpo_probe.envs.registry import make_env
from grpo_probe.policies.protocol import Policy
from grpo_probe.rollout.job import DEFAULT_ENVS_PER_WORKER, GroupJob
from grpo_probe.rollout.lockstep import ChunkHook, run_lockstep
from grpo_probe.rollout.pool import RolloutPool, run_parallel
from grpo_probe.rollout.progress import RolloutProgress
from grpo_probe.rollout.results import EpisodeResult, EpisodeSpec, EpisodeTiming
from grpo_probe.rollout.table import result_row, rollout_schema, rollout_table

__all__ = [
    "group_table",
    "job_worker_count",
    "mean_timing",
    "run_group",
    "run_in_process",
    "run_sequential",
    "single_torch_thread",
    "total_gpu_seconds",
    "worker_count",
]


@contextlib.contextmanager
def single_torch_thread() -> Iterator[None]:
    """Run torch on one intra-op thread inside the block (as rollout workers always do)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _lockstep_of(
    job: GroupJob,
    policy: Policy,
    envs: Sequence[Environment],
    specs: Sequence[EpisodeSpec],
    hook: ChunkHook | None,
) -> list[EpisodeResult]:
    """:func:`run_lockstep` of ``specs`` on ``envs`` with the job's keys, mode, device and inputs."""
    return run_lockstep(
        policy,
        envs,
        specs,
        run_key=job.run_key,
        mode=job.mode,
        hook=hook,
        device=job.source.device,
        where=job.env.where,
        observation=job.observation,
        inputs=job.inputs,
        replay=job.replay,
    )


def run_sequential(
    job: GroupJob,
    *,
    policy: Policy | None = None,
    hook: ChunkHook | None = None,
    progress: RolloutProgress | None = None,
) -> list[EpisodeResult]:
    """The reference path: one env, batch 1, this process, episodes in (seed, draw) order."""
    with single_torch_thread():
        if policy is None:
            policy = job.source.build()
        env = make_env(job.env)
        results = []
        for spec in job.episodes():
            results.extend(_lockstep_of(job, policy, [env], [spec], hook))
            if progress is not None:
                progress.update(1)
    return results


def run_in_process(
    job: GroupJob,
    *,
    envs_per_worker: int = DEFAULT_ENVS_PER_WORKER,
    hook: ChunkHook | None = None,
    progress: RolloutProgress | None = None,
) -> list[EpisodeResult]:
    """The parallel path's tasks (``envs_per_worker`` lockstep envs each), run one after another in this
    process, as a worker runs them; results sorted.

    Why: a worker process pays for starting Python, importing torch and building the policy (seconds)
    before its first episode, which a job of one task (a small design's shard: a few seeds x K) never
    earns back. The bytes are those of the parallel and the sequential path (the parallel oracle's
    guarantee), so where a job runs is a matter of cost only.
    """
    if job.envs_per_worker is not None:
        envs_per_worker = job.envs_per_worker
    specs = job.episodes()
    results: list[EpisodeResult] = []
    with single_torch_thread():
        policy = job.source.build()
        envs = [make_env(job.env) for _ in range(min(envs_per_worker, len(specs)))]
        for start in range(0, len(specs), envs_per_worker):
            batch = specs[start : start + envs_per_worker]
            results.extend(_lockstep_of(job, policy, envs[: len(batch)], batch, hook))
            if progress is not None:
                progress.update(len(batch))
    results.sort(key=lambda r: r.spec)
    return results


def run_group(
    job: GroupJob,
    *,
    workers: int = 0,
    pool: RolloutPool | None = None,
    envs_per_worker: int = DEFAULT_ENVS_PER_WORKER,
    hook: ChunkHook | None = None,
    progress: RolloutProgress | None = None,
) -> list[EpisodeResult]:
    """Run ``job`` on ``pool`` if given, else sequentially (``workers == 0``) or on up to ``workers``
    processes: no more than the job has tasks, and none when it has one task (:func:`run_in_process`)."""
    if pool is not None:
        return pool.run(job, envs_per_worker=envs_per_worker, hook=hook, progress=progress)
    if workers == 0:
        return run_sequential(job, hook=hook, progress=progress)
    started = job_worker_count(job, workers, envs_per_worker)
    if started == 0:
        return run_in_process(job, envs_per_worker=envs_per_worker, hook=hook, progress=progress)
    return run_parallel(job, workers=started, envs_per_worker=envs_per_worker, hook=hook, progress=progress)


def worker_count(episodes: int, workers: int, envs_per_worker: int = DEFAULT_ENVS_PER_WORKER) -> int:
    """Worker processes worth starting for ``episodes`` run in tasks of ``envs_per_worker``: at most
    ``workers`` and one per task; none for a single task, nor when only one worker may run (one process
    runs the tasks in turn either way), so those run in process (:func:`run_in_process` says why)."""
    tasks = -(-episodes // envs_per_worker)
    started = min(workers, tasks)
    return 0 if started <= 1 else started


def job_worker_count(job: GroupJob, workers: int, envs_per_worker: int = DEFAULT_ENVS_PER_WORKER) -> int:
    """:func:`worker_count` for ``job``'s episodes, in tasks of its own ``envs_per_worker`` when it sets
    one: the pool :func:`run_group` would start for it, and the size of a pool shared by several jobs."""
    per_task = job.envs_per_worker if job.envs_per_worker is not None else envs_per_worker
    return worker_count(len(job.episodes()), workers, per_task)


def group_table(job: GroupJob, results: Sequence[EpisodeResult]) -> pa.Table:
    """The rollout table of a job's results (rows sorted by (seed, draw))."""
    rows = (result_row(r, cell=job.cell, arm=job.arm, mode=job.mode) for r in results)
    return rollout_table(rows, rollout_schema(job.spec.episode_schema))


def mean_timing(results: Sequence[EpisodeResult]) -> EpisodeTiming:
    """Mean per-episode timing over ``results`` (for benchmarks and logs, never for artifacts).

    ``gpu_s`` is the mean only when every episode measured it, else None (not measured).
    """
    if not results:
        return EpisodeTiming(math.nan, math.nan, math.nan)
    n = len(results)
    gpu_s = total_gpu_seconds(results)
    return EpisodeTiming(
        physics_s=sum(r.timing.physics_s for r in results) / n,
        policy_s=sum(r.timing.policy_s for r in results) / n,
        total_s=sum(r.timing.total_s for r in results) / n,
        render_s=sum(r.timing.render_s for r in results) / n,
        gpu_s=None if gpu_s is None else gpu_s / n,
    )


def total_gpu_seconds(results: Sequence[EpisodeResult]) -> float | None:
    """Synchronized GPU seconds of the policy calls behind ``results``; None unless every one measured it."""
    if not results or any(r.timing.gpu_s is None for r in results):
        return None
    return sum(r.timing.gpu_s or 0.0 for r in results)
