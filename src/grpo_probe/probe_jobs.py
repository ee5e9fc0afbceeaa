"""The work behind each workflow rule, one function per rule.

Why here and not in the Snakemake scripts: a rule's script only reads ``snakemake.*`` and calls one of
these, so every step can be imported, tested and rerun by an auditor without Snakemake. Each step
(1) loads the prereg, which refuses a design that does not match its lock before any work is done,
(2) does its work through the package, writing every artifact atomically, and (3) writes a manifest
beside its outputs that lists the sha256 of each output and the manifests of its inputs, so the chain
from decision.md back to the prereg can be verified (``grpo-probe verify``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from grpo_probe.atomic_io import atomic_write_json, atomic_write_text
from grpo_probe.compute import compute_report
from grpo_probe.envs.demo_set import Demos
from grpo_probe.envs.demos import collect_env_demos
from grpo_probe.envs.episode_table import write_episode_table
from grpo_probe.envs.observation import camera_of, split_problems
from grpo_probe.envs.registry import env_spec
from grpo_probe.policies.protocol import declared_capabilities, policy_name
from grpo_probe.prereg import ArmBinding, Prereg, PreregError, environment_problems, load_prereg
from grpo_probe.provenance import file_sha256, policy_sources, write_design_manifest
from grpo_probe.rollout import merge_shards
from grpo_probe.rollout.table import ANCHOR_CELL
from grpo_probe.user_code import checkpoint_files, factory_files, tree_sha256

__all__ = [
    "ReplayShardFiles",
    "anchors",
    "bind_checkpoint",
    "bind_server",
    "compute",
    "decision",
    "demos",
    "gradients",
    "join",
    "parallel_oracle",
    "prereg_check",
    "probe_shard",
    "replay",
    "root_decision",
    "train_reference_arm",
]

PathLike = str | os.PathLike[str]


@dataclasses.dataclass(frozen=True)
class ReplayShardFiles:
    """One probe shard's replays (:func:`replay`): the shard's replayed seeds, in registered order, its
    probe table (the draws replayed and measured against) and the replay table to write."""

    seeds: tuple[int, ...]
    probe_table: PathLike
    table: PathLike


def _group_job(
    prereg: Prereg, arm: str, cell: str, source: Any, mode: Any, seeds: Sequence[int], group_size: int
):  # -> GroupJob
    """A rollout job of ``arm`` under the prereg's run key and simulator numbers."""
    # Local: this import loads torch (about 1.4 s), which the jobs that read tables never need.
    from grpo_probe.rollout import GroupJob

    row_block = prereg.arms[arm].row_block
    if row_block is not None and source.factory is None and source.address is None:  # own checkpoint
        source = dataclasses.replace(source, row_block=row_block)
    return GroupJob(
        arm=arm,
        cell=cell,
        source=source,
        mode=mode,
        seeds=tuple(seeds),
        group_size=group_size,
        run_key=prereg.run_key,
        env=prereg.env,
        observation=prereg.observation,
        inputs=prereg.arms[arm].inputs,
        envs_per_worker=prereg.arms[arm].row_block,
    )


def _cell_job(prereg: Prereg, cell: str, source: Any, seeds: Sequence[int], group_size: int):  # -> GroupJob
    """A rollout job of registered cell ``cell``: its arm under its mode, on ``seeds`` x ``group_size``."""
    registered = prereg.cell(cell)
    return _group_job(prereg, registered.arm, cell, source, registered.mode, seeds, group_size)


def _policy_source(source_json: PathLike, checkpoint: PathLike | None, device: str):
    """The arm's policy: the adapter its source.json records, loading the checkpoint the rule declares.

    Why the declared path and not the one source.json recorded: the checkpoint is an input of the rule,
    so Snakemake knows the job reads it, and an executor that stages inputs puts it exactly there.
    Without one (a caller outside the workflow), the path source.json recorded is used. An arm bound to a
    policy server has no checkpoint here: its recipe is the address (the server places its own model).
    """
    # Local: this import loads torch (about 1.4 s), which the jobs that read tables never need.
    from grpo_probe.rollout import PolicySource

    recipe = json.loads(Path(source_json).read_text())
    if recipe.get("address"):
        return PolicySource(address=recipe["address"], timeout_s=recipe.get("timeout_s"))
    path = recipe.get("checkpoint") if not checkpoint else str(checkpoint)
    return PolicySource(checkpoint=path, factory=recipe.get("factory"), device=device)


# -- prereg and training ---------------------------------------------------------------------------------
def prereg_check(prereg_path: PathLike, manifest: PathLike) -> None:
    """The root of the chain: the prereg matches its lock; the manifest records both files.

    It also builds the design's environment once: a user's factory that cannot be imported, or that
    refuses its params, fails here, and the guards the decision rule reads are checked against the spec
    the environment declares, as are the guards the phase-2 reward penalises (a built-in's were checked
    when the design was read), and the policy loss and advantage estimator phase 2 names are checked
    against phase 2's registries (:mod:`grpo_probe.phase2.pilot_choices`: the prereg package, below
    phase 2 and without torch, cannot see them), so a misspelt name stops the run before the probe. A
    design's split of the state into LeRobot's keys is checked against the entries the environment names.
    """
    prereg = load_prereg(prereg_path)
    penalties = prereg.phase2.penalties if prereg.phase2 is not None else None
    spec = env_spec(prereg.env)
    problems = environment_problems(prereg.decision_rule, penalties, spec, prereg.replay)
    problems += split_problems(prereg.observation, spec.state_entries, prereg.env.id)
    if problems:
        raise PreregError("\n".join(f"{prereg.path}: {p}" for p in problems))
    if prereg.phase2 is not None:  # the losses import torch: only a design with a pilot pays for it
        from grpo_probe.phase2.pilot_choices import check_pilot_choices

        check_pilot_choices(prereg)
    write_design_manifest(prereg, manifest, "prereg_check", [prereg.path, Path(f"{prereg.path}.lock")], [])


def demos(prereg_path: PathLike, upstream: Sequence[PathLike], out: PathLike, manifest: PathLike) -> None:
    """Scripted-expert demonstrations on the registered demo seeds and noise."""
    prereg = load_prereg(prereg_path)
    cameras = _demo_cameras(prereg)
    collected = collect_env_demos(
        prereg.env,
        prereg.training.demo_seeds,
        prereg.training.demo_noise,
        prereg.run_key,
        cameras=cameras,
    )
    collected.save(out)
    frames = f", with {', '.join(c.key for c in cameras)} frames" if cameras else ""
    print(
        f"demos: {len(collected.obs)} (observation, chunk) pairs from {len(prereg.training.demo_seeds)} "
        f"expert episodes{frames}",
        flush=True,
    )
    write_design_manifest(prereg, manifest, "demos", [out], upstream, {"pairs": len(collected.obs)})


def _demo_cameras(prereg: Prereg) -> list[Any]:  # -> list[CameraConfig]
    """The registered cameras some arm reads: the demos record their frames at each replan."""
    names = sorted({c for arm in prereg.arms.values() for k in arm.inputs if (c := camera_of(k))})
    return [prereg.observation.camera(name) for name in names]


def train_reference_arm(
    prereg_path: PathLike,
    arm: str,
    demos_npz: PathLike,
    upstream: Sequence[PathLike],
    checkpoint: PathLike,
    source: PathLike,
    manifest: PathLike,
) -> None:
    """Behaviour-clone a reference arm on the demos with its registered budget (deterministic)."""
    # Local: torch and the trainer (with the tokenizer) cost about 1 s, which only this job needs.
    import torch

    from grpo_probe.policies.train import train_arm

    torch.set_num_threads(1)
    prereg = load_prereg(prereg_path)
    if arm not in prereg.arms:
        raise ValueError(f"{prereg.path}: no arm {arm!r} is registered")
    env = env_spec(prereg.env)
    sha = train_arm(
        prereg.arms[arm].head,
        Demos.load(demos_npz, obs_dim=env.obs_dim),
        checkpoint,
        prereg.training.arms.get(arm),
        chunk_shape=(env.chunk_length, env.action_dims),
        where=f"{prereg.path}: training.arms.{arm}",
        inputs=prereg.arms[arm].inputs,
    )
    _check_pin(prereg, arm, checkpoint, sha)
    atomic_write_json(source, {"arm": arm, "checkpoint": str(checkpoint), "factory": None})
    write_design_manifest(
        prereg, manifest, "train", [checkpoint, source], upstream, {"arm": arm, "checkpoint_sha256": sha}
    )


def bind_checkpoint(
    prereg_path: PathLike,
    arm: str,
    checkpoint: PathLike,
    adapter: str | None,
    upstream: Sequence[PathLike],
    source: PathLike,
    manifest: PathLike,
    device: str = "cpu",
) -> None:
    """Bind a user's checkpoint (a file, or a ``save_pretrained`` folder) and adapter to a registered arm.

    The prereg may pin the checkpoint's sha256 (a folder's: :func:`grpo_probe.user_code.tree_sha256`).
    The bound policy must keep the act() contract for every mode the design runs it in
    (:func:`grpo_probe.policies.check.check_arm`, seconds): a policy that breaks it is refused here, with
    each broken rule's cause and fix, before any episode runs. So is a policy whose declared capabilities
    (:class:`grpo_probe.policies.PolicyCapabilities`) lack a sampling kind the arm's anchor, cells or
    oracles need (``capability-missing``, naming the arm, the policy's ``module:Class``, the kind and what
    needs it). source.json records the policy's class and declaration, which phase 2 reads to refuse an
    arm it cannot train. Every file of the checkpoint and of the adapter's package is recorded among the
    manifest's sources, so ``verify`` names one edited later.
    """
    prereg = load_prereg(prereg_path)
    if arm not in prereg.arms:
        raise ValueError(f"{prereg.path}: no arm {arm!r} is registered")
    if not Path(checkpoint).exists():
        raise FileNotFoundError(f"{checkpoint}: checkpoint bound to arm {arm!r} not found")
    if Path(checkpoint).is_dir() and not checkpoint_files(checkpoint):
        raise FileNotFoundError(f"{checkpoint}: checkpoint folder bound to arm {arm!r} holds no file")
    sha = tree_sha256(checkpoint)
    _check_pin(prereg, arm, checkpoint, sha)
    report, policy = _check_bound_policy(prereg, arm, checkpoint, adapter, device)
    bound = {"policy": policy_name(policy), "head": policy.head, "capabilities": _declared(policy)}
    atomic_write_json(source, {"arm": arm, "checkpoint": str(checkpoint), "factory": adapter, **bound})
    # The checkpoint lives outside the results tree, so it is recorded by hash rather than as an output.
    extra = {
        "arm": arm,
        "checkpoint": str(checkpoint),
        "checkpoint_sha256": sha,
        "policy_check": {"passed": report.passed, "checks": len(report.checks)},
        **bound,
    }
    sources = [*checkpoint_files(checkpoint), *factory_files(adapter)]
    write_design_manifest(prereg, manifest, "bind_checkpoint", [source], upstream, extra, sources)


def bind_server(
    prereg_path: PathLike,
    arm: str,
    address: str,
    upstream: Sequence[PathLike],
    source: PathLike,
    manifest: PathLike,
    timeout_s: float | None = None,
) -> None:
    """Bind a registered arm to the policy served at ``address`` (:mod:`grpo_probe.serve`).

    The served policy is checked as a bound checkpoint is (:func:`bind_checkpoint`): the act() contract
    for every mode the design runs the arm in, and its declared capabilities, over the wire, before any
    episode runs. A design that pins the arm's ``checkpoint_sha256`` needs the server to declare the same
    one in its hello's metadata (``grpo-probe serve`` declares the sha256 of the checkpoint it serves):
    the probe cannot read a served checkpoint's bytes, so the server's word is what is recorded and
    checked. source.json records the address, the served policy's class and declaration and the
    server's metadata; phase 2 refuses a served arm (its trainer updates checkpoints it holds).
    """
    from grpo_probe.rollout import PolicySource

    prereg = load_prereg(prereg_path)
    if arm not in prereg.arms:
        raise ValueError(f"{prereg.path}: no arm {arm!r} is registered")
    recipe = PolicySource(address=address, timeout_s=timeout_s)
    policy: Any = recipe.build()
    try:
        declared_sha = policy.metadata.get("checkpoint_sha256")
        pinned = prereg.arms[arm].checkpoint_sha256
        if pinned is not None and declared_sha is None:
            raise ValueError(
                f"policy server {address}: arms.{arm}.checkpoint_sha256 is pinned in {prereg.path}, but the "
                "server declares no checkpoint_sha256 in its metadata (grpo-probe serve declares it; "
                "serve_policy(..., metadata={'checkpoint_sha256': ...}))"
            )
        if pinned is not None:
            _check_pin(prereg, arm, f"policy server {address}", str(declared_sha))
        report = _check_policy_of(prereg, arm, policy, f"the policy served at {address}")
    finally:
        policy.close()
    bound = {
        "policy": policy.served_name,
        "head": policy.head,
        "capabilities": _declared(policy),
        "server": policy.metadata,
    }
    served = {"address": address, "timeout_s": timeout_s, "checkpoint": None, "factory": None}
    atomic_write_json(source, {"arm": arm, **served, **bound})
    extra = {
        "arm": arm,
        "address": address,
        "checkpoint_sha256": declared_sha,
        "policy_check": {"passed": report.passed, "checks": len(report.checks)},
        **bound,
    }
    write_design_manifest(prereg, manifest, "bind_server", [source], upstream, extra)


def _check_policy_of(prereg: Prereg, arm: str, policy: Any, bound: str) -> Any:  # -> PolicyReport
    """Check a built policy against the act() contract for the arm; print the report, raise on a failure."""
    from grpo_probe.policies.check import check_arm

    binding = ArmBinding(arm, "server", address=getattr(policy, "address", None))
    run = SimpleNamespace(arms={arm: binding}, device="cpu", results="results")
    report = check_arm(prereg, run, arm, policy=policy, device="cpu")
    print(report.format(), flush=True)
    report.raise_if_failed()
    return report


def _declared(policy: Any) -> dict[str, Any] | None:
    """The capabilities a bound policy declares, as source.json records them (None: it declares none)."""
    declared = declared_capabilities(policy)  # the check has refused a malformed declaration
    return None if declared is None else declared.to_dict()


def _check_bound_policy(
    prereg: Prereg, arm: str, checkpoint: PathLike, adapter: str | None, device: str
) -> tuple[Any, Any]:  # -> (PolicyReport, Policy)
    """Build the bound policy as every rollout process will, and check it against the act() contract and
    its declared capabilities against what the design needs of the arm; returns the report and the policy."""
    # Local: the check costs about 13 ms and the policy source loads torch (about 1.4 s): binding only.
    from grpo_probe.policies.check import check_arm
    from grpo_probe.rollout import PolicySource

    binding = ArmBinding(arm, "checkpoint", str(checkpoint), adapter)
    run = SimpleNamespace(arms={arm: binding}, device=device, results="results")
    policy = PolicySource(checkpoint=str(checkpoint), factory=adapter, device=device).build()
    report = check_arm(prereg, run, arm, policy=policy, device=device)
    print(report.format(), flush=True)
    report.raise_if_failed()
    return report, policy


def _check_pin(prereg: Prereg, arm: str, checkpoint: PathLike, found: str) -> None:
    """``found`` (the checkpoint's :func:`~grpo_probe.user_code.tree_sha256`) must be the pinned one."""
    pinned = prereg.arms[arm].checkpoint_sha256
    if pinned is None:
        return
    if found != pinned:
        raise ValueError(
            f"{checkpoint}: sha256 {found} differs from arms.{arm}.checkpoint_sha256 {pinned} "
            f"pinned in {prereg.path}"
        )


# -- rollouts --------------------------------------------------------------------------------------------
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
            source = _policy_source(sources[arm], checkpoint, device)
            cell = f"oracle:{arm}:{mode.kind}"
            jobs.append(_group_job(prereg, arm, cell, source, mode, oracle.seeds, oracle.draws))
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
    policy = _policy_source(source, checkpoint, device)
    job = _group_job(prereg, arm, ANCHOR_CELL, policy, mode, prereg.seeds, 1)
    write_shard(job, table, workers=workers)
    cells = [cell.id for cell in prereg.enabled_cells if cell.arm == arm]
    Path(draw0_dir).mkdir(parents=True, exist_ok=True)
    reports = [Path(draw0_dir) / f"{cell}.json" for cell in cells]
    for cell, report in zip(cells, reports, strict=True):
        draw0 = _cell_job(prereg, cell, policy, prereg.oracles.draw0_seeds, 1)
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
    policy = _policy_source(source, checkpoint, device)
    job = _cell_job(prereg, cell, policy, seeds, prereg.group_size)
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
    policy = _policy_source(source, checkpoint, device)
    oracle = _cell_job(prereg, cell, policy, section.oracle_seeds, prereg.group_size)
    jobs = [_cell_job(prereg, cell, policy, shard.seeds, prereg.group_size) for shard in shards]
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


# -- analysis --------------------------------------------------------------------------------------------
def join(
    prereg_path: PathLike,
    cell: str,
    shards: Sequence[PathLike],
    anchor_table: PathLike,
    upstream: Sequence[PathLike],
    cell_table: PathLike,
    joined: PathLike,
    manifest: PathLike,
) -> None:
    """Merge a cell's shards, then put each seed's group statistics next to its anchor row.

    The joined table is where the per-seed statistics decision.md reports are computed; the decision
    step reads them from it (:func:`grpo_probe.analysis.joined.read_joined_table`).
    """
    # Local: the analysis tables load pyarrow.compute (about 35 ms), which only this job needs.
    from grpo_probe.analysis.joined import JOIN_SCHEMA, join_cell, joined_table
    from grpo_probe.analysis.tables import read_rollout_table as read_analysed

    prereg = load_prereg(prereg_path)
    merge_shards(list(shards), cell_table)
    arm = prereg.cell(cell).arm
    env = env_spec(prereg.env)
    probe = read_analysed(cell_table, cell, arm, env=env)
    anchor = read_analysed(anchor_table, "anchor", arm, env=env)
    table = joined_table(join_cell(cell, probe, anchor, prereg.analysis))
    write_episode_table(joined, table, schema=JOIN_SCHEMA)
    write_design_manifest(prereg, manifest, "join", [cell_table, joined], upstream, {"cell": cell})


def decision(
    prereg_path: PathLike,
    cell_tables: Mapping[str, PathLike],
    anchor_tables: Mapping[str, PathLike],
    upstream: Sequence[PathLike],
    out_md: PathLike,
    out_json: PathLike,
    figures_dir: PathLike,
    manifest: PathLike,
    join_tables: Mapping[str, PathLike],
    out_tsv: PathLike | None = None,
    replay_tables: Mapping[str, Sequence[PathLike]] | None = None,
    gradient_files: Mapping[str, PathLike] | None = None,
    figures: Sequence[PathLike] | None = None,
) -> None:
    """decision.md, decision.json, the reads table and the figures, from the joined cells and the anchors.

    The per-seed group statistics are read from ``join_tables`` (the join rule's output), not recomputed;
    the cell tables give the guard trips, the AR entropy and the figures. The provenance footer lists
    every file the decision read (cell, join and anchor tables, the prereg and its lock) with its sha256.
    ``figures``: the figure files the workflow declared (:func:`grpo_probe.analysis.figure_names.
    figure_files`); the job clears any other figure from ``figures_dir`` first and checks that it drew
    exactly these, so the DAG knows every file the job writes.
    """
    # Local: the report loads matplotlib and jinja2 (about 0.4 s), which only the decision jobs need.
    from grpo_probe.analysis.report import decision_record, reads_tsv_text, write_decision

    prereg = load_prereg(prereg_path)
    declared = None if figures is None else {Path(p).resolve() for p in figures}
    if declared is not None and Path(figures_dir).is_dir():
        for stale in Path(figures_dir).rglob("*.png"):  # another design version's figure, not declared
            if stale.resolve() not in declared:
                stale.unlink()
    replays = {cell: list(paths) for cell, paths in (replay_tables or {}).items()}
    read = [
        *cell_tables.values(),
        *join_tables.values(),
        *anchor_tables.values(),
        *(p for paths in replays.values() for p in paths),
        *(gradient_files or {}).values(),
    ]
    provenance = [(str(path), file_sha256(path)) for path in read]
    record = decision_record(
        probe_tables=dict(cell_tables),
        anchor_tables=dict(anchor_tables),
        prereg=prereg,
        page_dir=Path(out_md).parent,
        figures_dir=figures_dir,
        provenance=sorted(set(provenance)),
        join_tables=dict(join_tables),
        replay_tables=replays if prereg.replay is not None else None,
        gradient_files=dict(gradient_files) if prereg.analysis.gradient_reads else None,
    )
    # The design's files are named as the workflow names them (relative to its directory), not relative
    # to the page: they live outside the results folder, so these bytes do not depend on where it is.
    design = [prereg.path, Path(f"{prereg.path}.lock")]
    record = {**record, "design_files": [{"path": str(p), "sha256": file_sha256(p)} for p in design]}
    write_decision(_decision_paths(record, _relative_to(Path(out_md).parent), str), out_md, out_json)
    outputs: list[PathLike] = [out_md, out_json]
    if out_tsv is not None:
        atomic_write_text(out_tsv, reads_tsv_text(record))
        outputs.append(out_tsv)
    drawn = sorted(Path(figures_dir).rglob("*.png"))
    if declared is not None and {p.resolve() for p in drawn} != declared:
        missing = sorted(str(p) for p in declared - {p.resolve() for p in drawn})
        extra = sorted(str(p) for p in drawn if p.resolve() not in declared)
        raise ValueError(
            f"{figures_dir}: the figures drawn are not those the workflow declared (declared, not drawn: "
            f"{missing}; drawn, not declared: {extra}); grpo_probe.analysis.figure_names.figure_files "
            "names every figure a design has"
        )
    write_design_manifest(prereg, manifest, "decision", [*outputs, *drawn], upstream)


def compute(prereg_path: PathLike, benchmarks: PathLike, out_md: PathLike, out_json: PathLike) -> None:
    """Compute per stage against the registered gate (a report that varies by run, so not in the chain)."""
    prereg = load_prereg(prereg_path)
    compute_report(prereg, benchmarks, out_md, out_json)


# -- decision.md's file paths, and its copy at the repository root ---------------------------------------
_CELL_TABLES = ("probe_table", "anchor_table", "join_table")
"""The fields of each decision.json cell that name a table; the provenance footer names the rest."""

_SIBLING_PAGES = ("compute.md",)
"""Pages decision.md links literally rather than through decision.json (compute.md beside it), each written
for the design's folder and moved with the page."""


def _relative_to(folder: Path) -> Callable[[str], str]:
    """A path as the workflow gives it (relative to the working directory) -> relative to ``folder``."""
    return lambda path: Path(os.path.relpath(path, folder)).as_posix()


def _moved(source_dir: Path, target_dir: Path) -> Callable[[str], str]:
    """A path relative to ``source_dir`` -> the same file relative to ``target_dir``."""
    return lambda path: Path(os.path.relpath(source_dir / path, target_dir)).as_posix()


def _decision_paths(
    record: Mapping[str, Any], tables: Callable[[str], str], figures: Callable[[str], str]
) -> dict[str, Any]:
    """decision.json with its file paths mapped: ``tables`` for every table (each cell's and the provenance
    footer's), ``figures`` for the figure links.

    Why: decision.md and decision.json name files relative to their own folder, so where ``results:``
    points changes none of their bytes, and a copy rendered for another folder only moves its paths.
    """
    out = json.loads(json.dumps(record))
    for cell in out["cells"]:
        for key in _CELL_TABLES:
            if cell.get(key) is not None:
                cell[key] = tables(cell[key])
        cell["figures"] = {name: figures(path) for name, path in cell["figures"].items()}
    out["figures"] = {name: figures(path) for name, path in out["figures"].items()}
    provenance = [{**entry, "path": tables(entry["path"])} for entry in out["provenance"]]
    out["provenance"] = sorted(provenance, key=lambda entry: (entry["path"], entry["sha256"]))
    return out


def root_decision(prereg_path: PathLike, record: PathLike, out_md: PathLike, out_json: PathLike) -> None:
    """The configured design's decision.md and decision.json again, rendered for another folder.

    Why rendered and not copied: the design's pages link figures, tables and compute.md relative to their
    own folder (``results/<design>/``), so a byte copy at the repository root would link nowhere. The copy
    opens with the design's name, its prereg and its folder, and records the sha256 of the decision.json it
    was rendered from (the one in the manifest chain ``grpo-probe verify`` walks); it is a view, not a link
    of that chain. A record of another design than the configured prereg is refused.
    """
    # Local: the report loads matplotlib and jinja2 (about 0.4 s), which only the decision jobs need.
    from grpo_probe.analysis.page import VALIDATION_PAGE
    from grpo_probe.analysis.report import write_decision

    prereg = load_prereg(prereg_path)
    source = Path(record)
    target_dir = Path(out_md).parent
    decision = json.loads(source.read_text(encoding="utf-8"))
    if decision["prereg"]["sha256"] != prereg.sha256:
        raise ValueError(
            f"{source}: prereg.sha256 {decision['prereg']['sha256']} is not the sha256 {prereg.sha256} of "
            f"{prereg.path}, the configured design"
        )
    moved = _moved(source.parent, target_dir)
    out = _decision_paths(decision, moved, moved)
    design, folder, page = decision["prereg"]["name"], moved("."), moved(source.name)
    out["rendered_from"] = {
        "design": design,
        "prereg": Path(prereg.path).as_posix(),
        "folder": folder,
        "decision_json": page,
        "sha256": file_sha256(source),
    }
    footer = (
        f"\n> Design **{design}** (`{out['rendered_from']['prereg']}`), run in [`{folder}/`]({folder}/): "
        f"this page is rendered here from [`{page}`]({page}) (sha256 `{out['rendered_from']['sha256']}`), "
        "with every link relative to this folder.\n"
    )

    def for_this_folder(text: str) -> str:
        for name in _SIBLING_PAGES:  # the template writes these links literally, for the design's folder
            text = text.replace(f"]({name})", f"]({moved(name)})")
        # the validation study, named from the repository root (the working directory) on the design's page,
        # is a link on this one: its folder is fixed where the design's folder moves with ``results:``
        validation = Path(os.path.relpath(VALIDATION_PAGE, target_dir)).as_posix()
        named = rf"the validation study,(\s+)`{re.escape(VALIDATION_PAGE)}`"
        text = re.sub(named, rf"the\1[validation study]({validation})", text)
        return text.rstrip("\n") + "\n" + footer  # after the hashes it belongs with

    write_decision(out, out_md, out_json, edit=for_this_folder)
