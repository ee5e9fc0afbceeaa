"""The group runner: K keyed rollouts per seed, on a sequential path and a parallel path that share one loop.

Why one loop: the parallel oracle can only prove what both paths have in common. :func:`run_lockstep`
is the whole episode logic (reset, one ``policy.act`` per replan over the envs still running, execute,
record); the sequential path calls it with one env at a time in this process, the parallel path calls
it inside worker processes with several envs in lockstep. The draw index enters only the row keys
``RowKey(run_key, seed, replan, draw)``, and a policy's rows never influence each other (fixed padded
batch shape inside the policy), so an episode's bytes do not depend on which path, worker or batch ran it.

Workers are forked from a ``forkserver`` (or started with ``spawn``), never from the job itself: forking a
process whose torch has started its thread pools can deadlock. The server imports this module (torch, the
simulator, the environments) once and does nothing else, so each worker starts from those imports instead
of paying them again (about 2 CPU-s a worker under ``spawn``: benchmarks/pool_start_cost.py). Each worker
builds its policy from a :class:`PolicySource` and runs torch on one thread; parallelism comes from
processes and batching.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from grpo_probe.envs.observation import (
    OBSERVATION_ENVIRONMENT_STATE,
    OBSERVATION_STATE,
    TASK,
    CameraConfig,
    ObservationBatch,
    ObservationConfig,
    StateSplit,
    camera_of,
    frame_sha256,
    observation_problems,
    observation_sha256,
    policy_input_keys,
)
from grpo_probe.envs.protocol import Environment, EnvSpec
from grpo_probe.envs.registry import EnvConfig, boat_env, env_spec, make_env
from grpo_probe.policies.protocol import Policy, RowDiagnostics, RowKey, SamplingMode
from grpo_probe.rollout.perturb import Replay, action_noise, state_generator
from grpo_probe.rollout.policy_source import PolicySource
from grpo_probe.rollout.progress import RolloutProgress
from grpo_probe.rollout.results import EpisodeResult, EpisodeSpec, EpisodeTiming
from grpo_probe.rollout.table import result_row, rollout_schema, rollout_table

__all__ = [
    "DEFAULT_ENVS_PER_WORKER",
    "ChunkHook",
    "GroupJob",
    "RolloutPool",
    "RolloutWorkerError",
    "group_table",
    "job_worker_count",
    "mean_timing",
    "run_group",
    "run_in_process",
    "run_lockstep",
    "run_parallel",
    "run_sequential",
    "single_torch_thread",
    "total_gpu_seconds",
    "worker_count",
]

DEFAULT_ENVS_PER_WORKER = 8
"""Envs a worker steps in lockstep per task: the probe's K, so one task is one seed's group."""

ChunkHook = Callable[[Environment, EpisodeSpec, int, np.ndarray], np.ndarray]
"""``hook(env, spec, replan, chunk) -> chunk`` called before each chunk is executed.

A test seam only: the oracle tests plant a 1-ulp perturbation in one env of one path through it. It
must be picklable (a module-level function or a ``functools.partial`` of one) to reach workers.
"""


class RolloutWorkerError(RuntimeError):
    """A worker process died (killed or crashed) before returning its episodes; nothing was written."""


@dataclass(frozen=True)
class GroupJob:
    """One group run: an arm's policy under one sampling mode on ``seeds`` x ``group_size`` episodes."""

    arm: str
    cell: str
    source: PolicySource
    mode: SamplingMode
    seeds: tuple[int, ...]
    group_size: int
    """K: draws 0..K-1 of every seed (draw 0 of a flow cell is the anchor's keyed noise)."""
    run_key: int
    env: EnvConfig = field(default_factory=boat_env)
    """The environment every episode runs in (the design's ``env:``; the boat scene by default)."""
    observation: ObservationConfig = field(default_factory=ObservationConfig)
    """The design's registered task and cameras (``observation:``); none by default."""
    envs_per_worker: int | None = None
    """Envs a worker steps in lockstep per task for this job (one batched policy call per replan); None:
    the pool's ``envs_per_worker``. An AR arm with a registered row block of 20 runs 20 per task, so its
    blocks are full. Never changes a byte: rows are computed alone in their fixed, padded blocks."""
    inputs: tuple[str, ...] | None = None
    """The arm's registered inputs (``arms.<id>.inputs``): a policy declaring any other key fails; None
    lets a policy read whatever the design registers (tests, benchmarks)."""
    replay: Replay | None = None
    """When set, every episode is this replay of its draw: the draw's own noise keys, plus the keyed
    perturbation (:mod:`grpo_probe.rollout.perturb`); None: the draws themselves."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "seeds", tuple(self.seeds))
        for name in ("arm", "cell"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"rollout job: {name} must be a non-empty string, got {value!r}")
        if not self.seeds:
            raise ValueError(f"rollout job {self.cell}/{self.arm}: seeds is empty")
        for i, seed in enumerate(self.seeds):
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise ValueError(
                    f"rollout job {self.cell}/{self.arm}: seeds[{i}] must be an integer >= 0, got {seed!r}"
                )
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"rollout job {self.cell}/{self.arm}: seeds contain duplicates")
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int) or self.group_size < 1:
            raise ValueError(
                f"rollout job {self.cell}/{self.arm}: group_size must be an integer >= 1, "
                f"got {self.group_size!r}"
            )
        if isinstance(self.run_key, bool) or not isinstance(self.run_key, int) or self.run_key < 0:
            raise ValueError(
                f"rollout job {self.cell}/{self.arm}: run_key must be an integer >= 0, got {self.run_key!r}"
            )

    @property
    def label(self) -> str:
        """``cell/arm seeds a-b`` for progress lines and error messages."""
        replay = f" ({self.replay.label()})" if self.replay is not None else ""
        return f"{self.cell}/{self.arm} seeds {min(self.seeds)}-{max(self.seeds)}{replay}"

    def episodes(self) -> list[EpisodeSpec]:
        """Every (seed, draw) of the job, sorted: the order rows are written in."""
        return sorted(EpisodeSpec(int(s), d) for s in self.seeds for d in range(self.group_size))

    def replace(self, **changes: Any) -> GroupJob:
        """A copy with some fields changed (e.g. the mode or the draws of an oracle's reference run)."""
        return dataclasses.replace(self, **changes)

    @property
    def spec(self) -> EnvSpec:
        """The environment's spec (chunk geometry, record columns, guards)."""
        return env_spec(self.env)


@contextlib.contextmanager
def single_torch_thread() -> Iterator[None]:
    """Run torch on one intra-op thread inside the block (as rollout workers always do)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _check_policy_fits(policy: Policy, spec: EnvSpec, where: str, split: StateSplit | None = None) -> bool:
    """The policy reads the environment's observation width: else an error naming both.

    Under LeRobot's keys (``split``) a policy reads either the packed state (``obs_dim`` is the
    environment's: the project's own heads, cloned on demos of the packed state) or the agent's part
    (``obs_dim`` is ``observation.state``'s under the split). Returns whether it reads the packed state.
    """
    obs_dim = getattr(policy, "obs_dim", None)
    if split is not None and obs_dim == split.state_dim:
        return False
    if obs_dim is not None and obs_dim != spec.obs_dim:
        lerobot = (
            f", or {split.state_dim} in observation.state under the design's LeRobot keys"
            if split is not None
            else ""
        )
        raise ValueError(
            f"{where}: the policy (head {policy.head!r}) reads observations of {obs_dim} numbers, but "
            f"environment {spec.id!r} observes {spec.obs_dim} ({', '.join(spec.observation_keys)}){lerobot}; "
            "bind the arm to a checkpoint trained on this environment"
        )
    return True


@dataclass(frozen=True)
class _Plan:
    """What a policy reads at each replan: its declared keys, the cameras to render, and under LeRobot's
    keys the split of the state (None for a policy reading the packed state)."""

    declared: tuple[str, ...]
    cameras: tuple[CameraConfig, ...]
    split: StateSplit | None
    lerobot: bool
    """The design registers LeRobot's keys: every array the policy reads is digested per replan."""


def _observation_plan(
    policy: Policy,
    spec: EnvSpec,
    observation: ObservationConfig,
    where: str,
    inputs: tuple[str, ...] | None = None,
) -> _Plan | None:
    """What the policy reads: None for the packed state array alone, else a :class:`_Plan`; a key the
    design, the arm's registration or the environment cannot provide is an error naming it."""
    try:
        split = observation.split(spec.state_entries, spec.id)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    packed = _check_policy_fits(policy, spec, where, split)
    declared = policy_input_keys(policy)
    unregistered = [k for k in declared if inputs is not None and k not in inputs]
    if unregistered:
        raise ValueError(
            f"{where}: the policy (head {policy.head!r}) declares input(s) {', '.join(unregistered)}, which "
            f"the arm does not register (its inputs: {', '.join(inputs or ())}); register them in the "
            "arm's inputs, or bind a policy that reads what the arm registers"
        )
    if declared == (OBSERVATION_STATE,) and split is None:
        return None
    who = f"the policy (head {policy.head!r})"
    problems = observation_problems(declared, observation, spec.cameras, who)
    if packed and split is not None and OBSERVATION_ENVIRONMENT_STATE in declared:
        problems.append(
            f"{who} declares {OBSERVATION_ENVIRONMENT_STATE!r}, but its obs_dim ({spec.obs_dim}) is the "
            "packed state's, which holds the environment state already; under LeRobot's keys a policy "
            f"reading the split has obs_dim {split.state_dim} (observation.state, the agent's own)"
        )
    if problems:
        raise ValueError(f"{where}: " + "; ".join(problems))
    cameras = tuple(observation.camera(c) for k in declared if (c := camera_of(k)) is not None)
    return _Plan(declared, cameras, None if packed else split, split is not None)


def _render(env: Environment, camera: CameraConfig, spec: EnvSpec, where: str) -> np.ndarray:
    frame = env.render(camera.name, camera.height, camera.width)  # type: ignore[attr-defined]
    if (
        not isinstance(frame, np.ndarray)
        or frame.dtype != np.uint8
        or frame.shape
        != (
            camera.height,
            camera.width,
            3,
        )
    ):
        found = f"{getattr(frame, 'dtype', type(frame).__name__)} {getattr(frame, 'shape', '')}"
        raise ValueError(
            f"{where}: environment {spec.id!r} rendered camera {camera.name!r} as {found}; the design "
            f"registers uint8 ({camera.height}, {camera.width}, 3)"
        )
    return frame


def _check_output(
    policy: Policy, actions: Any, diagnostics: Any, batch: int, spec: EnvSpec, where: str
) -> np.ndarray:
    shape = (batch, spec.chunk_length, spec.action_dims)
    if not isinstance(actions, np.ndarray) or actions.shape != shape or actions.dtype != np.float32:
        found = f"{getattr(actions, 'dtype', type(actions).__name__)} {getattr(actions, 'shape', '')}"
        dims = (
            f": the head's {actions.shape[2]} action dims do not match the environment's {spec.action_dims}"
            if getattr(actions, "ndim", 0) == 3 and actions.shape[2] != spec.action_dims
            else ""
        )
        raise ValueError(
            f"{where}: policy (head {policy.head!r}) returned actions {found}; environment {spec.id!r} "
            f"needs float32 {shape}{dims}"
        )
    if len(diagnostics) != batch:
        raise ValueError(
            f"policy (head {policy.head!r}) returned {len(diagnostics)} diagnostics for {batch} rows"
        )
    return actions


def run_lockstep(
    policy: Policy,
    envs: Sequence[Environment],
    specs: Sequence[EpisodeSpec],
    *,
    run_key: int,
    mode: SamplingMode,
    hook: ChunkHook | None = None,
    device: str = "cpu",
    where: str = "rollout",
    observation: ObservationConfig | None = None,
    inputs: tuple[str, ...] | None = None,
    replay: Replay | None = None,
) -> list[EpisodeResult]:
    """Run ``specs`` to the end, env ``i`` running ``specs[i]``, with one ``policy.act`` per replan.

    With ``replay``, each episode is that replay of its draw: the policy gets the draw's own keys, and
    the perturbation is applied here, keyed by (run key, seed, draw, replay): a ``state`` perturbation
    through the environment's ``perturb_state`` right after ``reset``, an ``action`` perturbation as noise
    added to the executed actions of every chunk (what was executed is what the result records).

    A policy that declares only ``observation.state`` (or no ``input_keys``) gets the float32
    [B, obs_dim] state array. One that declares more gets an :class:`ObservationBatch` of exactly its
    keys: the state, each declared camera's frame rendered now at the size ``observation`` registers,
    and the registered task; each row's frames are hashed per replan (``frame_sha256``), so the
    oracles compare what the policy saw. Under LeRobot's keys (``observation.convention: lerobot``) a
    policy reading the split gets ``observation.state`` (the agent's entries) and, if it declares it,
    ``observation.environment_state``; one whose ``obs_dim`` is the packed width (the project's heads)
    gets the packed state, both parts in the registered order; either way the per-replan digest covers
    every array it read (:func:`~grpo_probe.envs.observation.observation_sha256`).

    Every replan the envs still running form one batch (rows in ``specs`` order); an env the strike cap
    ended drops out of later batches. Returns one result per spec, in ``specs`` order. On a CUDA
    ``device`` each policy call is timed between two ``torch.cuda.synchronize()`` barriers (kernels are
    asynchronous: without them the timer stops before the GPU work does), giving ``timing.gpu_s``.

    The envs are reached through the environment protocol only (``grpo_probe.envs.protocol``): each
    replan executes the spec's ``executed_actions`` of the chunk, and each record must carry every
    column of the spec's episode schema. ``where`` (the design and its ``env`` field) prefixes errors.
    """
    if len(envs) < len(specs):
        raise ValueError(f"run_lockstep: {len(specs)} episodes need as many envs, got {len(envs)}")
    if not specs:
        return []
    start = time.perf_counter()
    spec = envs[0].spec
    plan = _observation_plan(policy, spec, observation or ObservationConfig(), where, inputs)
    task = (observation or ObservationConfig()).task
    n = len(specs)
    on_gpu = device.startswith("cuda")
    timings = [EpisodeTiming(gpu_s=0.0 if on_gpu else None) for _ in range(n)]
    obs = [envs[i].reset(specs[i].seed) for i in range(n)]
    if replay is not None and replay.perturbation.kind == "state":
        obs = [
            _perturb_state(
                envs[i], state_generator(run_key, specs[i].seed, specs[i].draw, replay), replay, where
            )
            for i in range(n)
        ]
    executed: list[list[np.ndarray]] = [[] for _ in range(n)]
    diagnostics: list[list[RowDiagnostics]] = [[] for _ in range(n)]
    frames_seen: list[list[str]] = [[] for _ in range(n)]
    while True:
        active = [i for i in range(n) if not envs[i].done]
        if not active:
            break
        keys = [RowKey(run_key, specs[i].seed, envs[i].replan_index, specs[i].draw) for i in active]
        if on_gpu:
            _synchronize(device)
        if plan is None:
            batch: np.ndarray | ObservationBatch = np.stack([obs[i] for i in active])
        else:
            rendered = _observation_batch(
                plan, [envs[i] for i in active], [obs[i] for i in active], task, policy, where
            )
            for row, i in enumerate(active):
                if plan.lerobot:  # every array the policy reads, both state parts with the frames
                    arrays = {k: v[row] for k, v in rendered.items() if k != TASK}
                    frames_seen[i].append(observation_sha256(arrays))
                elif frames := {c.key: rendered[c.key][row] for c in plan.cameras}:
                    frames_seen[i].append(frame_sha256(frames))
            render_s = rendered.render_s / len(active)
            for i in active:
                timings[i].render_s += render_s
            # a policy declaring the state alone gets the array, as without a plan
            batch = rendered[OBSERVATION_STATE] if plan.declared == (OBSERVATION_STATE,) else rendered
        t0 = time.perf_counter()
        out = policy.act(batch, keys, mode)  # type: ignore[arg-type]
        if on_gpu:
            _synchronize(device)
        policy_s = (time.perf_counter() - t0) / len(active)
        actions = _check_output(policy, out.actions, out.diagnostics, len(active), spec, where)
        for row, i in enumerate(active):
            env = envs[i]
            chunk = actions[row].copy()
            if hook is not None:
                chunk = hook(env, specs[i], env.replan_index, chunk)
            if replay is not None and replay.perturbation.kind == "action" and replay.perturbation.scale:
                shape = (spec.executed_actions, spec.action_dims)
                noise = action_noise(run_key, specs[i].seed, specs[i].draw, replay, env.replan_index, shape)
                executed_part = chunk[: spec.executed_actions].astype(np.float64) + noise
                chunk = np.array(chunk, dtype=np.float32, copy=True)  # the env gets what the row records
                chunk[: spec.executed_actions] = executed_part.astype(np.float32)
            executed[i].append(np.array(chunk[: spec.executed_actions], dtype=np.float32, copy=True))
            diagnostics[i].append(out.diagnostics[row])
            timings[i].policy_s += policy_s
            if on_gpu:
                timings[i].gpu_s += policy_s  # type: ignore[operator]
            t1 = time.perf_counter()
            obs[i] = env.execute(chunk, spec.executed_actions)
            timings[i].physics_s += time.perf_counter() - t1
    per_episode_s = (time.perf_counter() - start) / n
    results = []
    for i in range(n):
        timings[i].total_s = per_episode_s
        record = envs[i].record()
        spec.check_row(record.to_row(), f"{where}: seed {specs[i].seed}")
        results.append(
            EpisodeResult(
                spec=specs[i],
                head=str(policy.head),
                record=record,
                executed_actions=np.stack(executed[i]),
                diagnostics=diagnostics[i],
                timing=timings[i],
                frame_sha256=frames_seen[i] if plan is not None and (plan.cameras or plan.lerobot) else None,
            )
        )
    return results


def _perturb_state(env: Environment, rng: np.random.Generator, replay: Replay, where: str) -> np.ndarray:
    """The environment's spawn shifted by the replay's registered scale; its new first observation."""
    perturb = getattr(env, "perturb_state", None)
    if env.spec.state_perturbation is None or not callable(perturb):
        raise ValueError(
            f"{where}: {replay.label()} asks environment {env.spec.id!r} to shift its state, which it does "
            "not offer (spec.state_perturbation and a perturb_state(rng, scale) method)"
        )
    return perturb(rng, replay.perturbation.scale)


class _RenderedBatch(ObservationBatch):
    """An observation batch that remembers how long its frames took to render (timing only)."""

    render_s: float = 0.0


def _observation_batch(
    plan: _Plan,
    envs: Sequence[Environment],
    states: Sequence[np.ndarray],
    task: str,
    policy: Policy,
    where: str,
) -> _RenderedBatch:
    """The declared keys of one replan's rows: the state (packed, or LeRobot's two parts under the
    split), each declared camera's frames rendered now, and the task."""
    values: dict[str, Any] = {}
    t0 = time.perf_counter()
    packed = np.stack(states).astype(np.float32, copy=False)
    values.update(plan.split.parts(packed) if plan.split is not None else {OBSERVATION_STATE: packed})
    values[TASK] = (task,) * len(envs)
    for camera in plan.cameras:
        values[camera.key] = np.stack([_render(env, camera, env.spec, where) for env in envs])
    batch = _RenderedBatch({k: values[k] for k in plan.declared}, str(policy.head))
    batch.render_s = time.perf_counter() - t0
    return batch


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


# -- worker side ---------------------------------------------------------------------------------------
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


def _synchronize(device: str) -> None:
    """Wait until every queued CUDA kernel of ``device`` has finished (the GPU timer's barrier)."""
    torch.cuda.synchronize(device)
