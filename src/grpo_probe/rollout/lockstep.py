"""The one episode loop both rollout paths run: reset, one ``policy.act`` per replan, execute, record.

Why one loop: the parallel oracle can only prove what both paths have in common. :func:`run_lockstep`
is the whole episode logic (reset, one ``policy.act`` per replan over the envs still running, execute,
record); the sequential path calls it with one env at a time in the job's process, the parallel path
calls it inside worker processes with several envs in lockstep (:mod:`grpo_probe.rollout.engine`,
:mod:`grpo_probe.rollout.pool`). The draw index enters only the row keys
``RowKey(run_key, seed, replan, draw)``, and a policy's rows never influence each other (fixed padded
batch shape inside the policy), so an episode's bytes do not depend on which path, worker or batch ran it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
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
from grpo_probe.policies.protocol import Policy, RowDiagnostics, RowKey, SamplingMode
from grpo_probe.rollout.perturb import Replay, action_noise, state_generator
from grpo_probe.rollout.results import EpisodeResult, EpisodeSpec, EpisodeTiming

__all__ = ["ChunkHook", "run_lockstep"]

ChunkHook = Callable[[Environment, EpisodeSpec, int, np.ndarray], np.ndarray]
"""``hook(env, spec, replan, chunk) -> chunk`` called before each chunk is executed.

A test seam only: the oracle tests plant a 1-ulp perturbation in one env of one path through it. It
must be picklable (a module-level function or a ``functools.partial`` of one) to reach workers.
"""


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


def _synchronize(device: str) -> None:
    """Wait until every queued CUDA kernel of ``device`` has finished (the GPU timer's barrier)."""
    torch.cuda.synchronize(device)
