"""Worker processes for the parallel rollout path, each running the one episode loop in lockstep.

Workers are forked from a ``forkserver`` (or started with ``spawn``), never from the job itself: forking a
process whose torch has started its thread pools can deadlock. The server imports this module (torch, the
simulator, the environments) once and does nothing else, so each worker starts from those imports instead
of paying them again (about 2 CPU-s a worker under ``spawn``: benchmarks/pool_start_cost.py). Each worker
builds its policy from a :class:`PolicySource` and runs torch on one thread; parallelism comes from
processes and batching.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

import torch

from grpo_probe.envs.observation import ObservationConfig
from grpo_probe.envs.protocol import Environment
from grpo_probe.envs.registry import EnvConfig, make_env
from grpo_probe.policies.policy_source import PolicySource
from grpo_probe.policies.protocol import Policy, SamplingMode
from grpo_probe.rollout.job import DEFAULT_ENVS_PER_WORKER, GroupJob, RolloutWorkerError
from grpo_probe.rollout.lockstep import ChunkHook, run_lockstep
from grpo_probe.rollout.perturb import Replay
from grpo_probe.rollout.progress import RolloutProgress
from grpo_probe.rollout.results import EpisodeResult, EpisodeSpec

__all__ = ["RolloutPool", "run_parallel"]

_WORKER_POLICIES: dict[str, Policy] = {}
_WORKER_ENVS: dict[str, list[Environment]] = {}


def _init_worker() -> None:
    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):  # only settable before inter-op work has started
        torch.set_num_interop_threads(1)


def _worker_run(
    source: PolicySource,
    env: EnvConfig,
    run_key: int,
    mode: SamplingMode,
    specs: list[EpisodeSpec],
    hook: ChunkHook | None,
    observation: ObservationConfig | None = None,
    inputs: tuple[str, ...] | None = None,
    replay: Replay | None = None,
) -> list[EpisodeResult]:
    """One task in a worker: build (once) the policy and envs, then run ``specs`` in lockstep."""
    policy_key = repr(source)
    if policy_key not in _WORKER_POLICIES:
        _WORKER_POLICIES[policy_key] = source.build()
    envs = _WORKER_ENVS.setdefault(repr(env), [])
    while len(envs) < len(specs):
        envs.append(make_env(env))
    return run_lockstep(
        _WORKER_POLICIES[policy_key],
        envs,
        specs,
        run_key=run_key,
        mode=mode,
        hook=hook,
        device=source.device,
        where=env.where,
        observation=observation,
        inputs=inputs,
        replay=replay,
    )


class RolloutPool:
    """Worker processes for the parallel path; reusable across jobs (each worker caches its policies).

    Use as a context manager. ``start_method`` is ``"forkserver"`` (default: the server preloads this
    module, see the module docstring) or ``"spawn"``; ``"fork"`` is refused because forking a process that
    holds torch state is unsafe. Either way a worker sees the job's ``sys.path`` and runs the same code.
    """

    def __init__(self, workers: int, *, start_method: str = "forkserver") -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        if start_method not in ("spawn", "forkserver"):
            raise ValueError(f"start_method must be 'spawn' or 'forkserver', got {start_method!r}")
        self.workers = workers
        context = multiprocessing.get_context(start_method)
        if start_method == "forkserver":
            context.set_forkserver_preload([__name__])  # read when this process's server first starts
        self._executor = ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_init_worker
        )

    def __enter__(self) -> RolloutPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (pending tasks are cancelled)."""
        self._executor.shutdown(wait=True, cancel_futures=True)

    def run(
        self,
        job: GroupJob,
        *,
        envs_per_worker: int = DEFAULT_ENVS_PER_WORKER,
        hook: ChunkHook | None = None,
        progress: RolloutProgress | None = None,
    ) -> list[EpisodeResult]:
        """Run every episode of ``job`` in tasks of ``envs_per_worker`` lockstep envs (the job's own
        ``envs_per_worker`` when it sets one); results sorted."""
        if job.envs_per_worker is not None:
            envs_per_worker = job.envs_per_worker
        if isinstance(envs_per_worker, bool) or not isinstance(envs_per_worker, int) or envs_per_worker < 1:
            raise ValueError(f"envs_per_worker must be an integer >= 1, got {envs_per_worker!r}")
        specs = job.episodes()
        batches = [specs[i : i + envs_per_worker] for i in range(0, len(specs), envs_per_worker)]
        try:
            futures: list[Future[list[EpisodeResult]]] = [
                self._executor.submit(
                    _worker_run,
                    job.source,
                    job.env,
                    job.run_key,
                    job.mode,
                    batch,
                    hook,
                    job.observation,
                    job.inputs,
                    job.replay,
                )
                for batch in batches
            ]
        except BrokenProcessPool as exc:
            raise RolloutWorkerError(f"{job.label}: the worker pool is broken ({exc})") from exc
        results: list[EpisodeResult] = []
        pending = set(futures)
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in finished:
                    batch_results = future.result()
                    results.extend(batch_results)
                    if progress is not None:
                        progress.update(len(batch_results))
        except BrokenProcessPool as exc:
            raise RolloutWorkerError(
                f"{job.label}: a rollout worker died (killed or crashed) before returning its episodes; "
                "nothing was written, rerun the shard"
            ) from exc
        finally:
            for future in pending:
                future.cancel()
        results.sort(key=lambda r: r.spec)
        return results


def run_parallel(
    job: GroupJob,
    *,
    workers: int,
    envs_per_worker: int = DEFAULT_ENVS_PER_WORKER,
    hook: ChunkHook | None = None,
    progress: RolloutProgress | None = None,
    start_method: str = "forkserver",
) -> list[EpisodeResult]:
    """The parallel path on a fresh pool of ``workers`` processes (see :class:`RolloutPool`)."""
    with RolloutPool(workers, start_method=start_method) as pool:
        return pool.run(job, envs_per_worker=envs_per_worker, hook=hook, progress=progress)
