"""The work behind the pilot's replicates and the sampled policy's held-out score.

Why a rule per replicate (``phase2_replicate``): replicate r >= 1 trains its own copy of the arm from
theta_0 on its own block of training seeds (:meth:`grpo_probe.prereg.phase2.Phase2.iteration_seeds`),
independently of replicate 0 (the stage's own ``phase2_rollouts`` / ``phase2_train`` chain), so the
replicates run side by side. Each update is checked by the log-prob replay oracle before it steps, as in
replicate 0's training (:func:`grpo_probe.phase2.trainer.train_loop`); what the replicate keeps is its
final policy, its per-iteration metrics and a manifest chained to what the stage's own pilot starts from
(the plan and the arm's manifests), not to that pilot's files, so the two run side by side (on a cluster,
each replicate is a job of its own beside the stage's ``phase2_arm`` group). Its intermediate policies and
rollouts are work files, removed at the end: the held-out score reads the final policy alone.

The held-out evaluation (``phase2_eval``) scores, beside the anchor's initial and replicate 0's final
policy, each further replicate's final policy by the anchor, and, when the design registers
``phase2.sampled_draws``, every one of them by the arm's phase-2 sampler.
A design that registers neither runs none of this. The extra held-out tables are
:func:`grpo_probe.phase2.held_out.evaluate_extra`'s, written by ``phase2_eval``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_probe.provenance import write_design_manifest

__all__ = ["phase2_replicate"]

PathLike = str | os.PathLike[str]


def phase2_replicate(
    prereg_path: PathLike,
    plan_json: PathLike,
    arm: str,
    replicate: int,
    source: PathLike,
    checkpoint: PathLike,
    upstream: Sequence[PathLike],
    final: PathLike,
    metrics: PathLike,
    manifest: PathLike,
    workers: int,
) -> None:
    """Replicate ``replicate`` (>= 1) of the stage training ``arm``: GRPO from theta_0 on its own seeds."""
    from grpo_probe.envs.episode_table import write_episode_table
    from grpo_probe.envs.registry import env_spec
    from grpo_probe.phase2.pilot_choices import check_pilot_choices
    from grpo_probe.phase2.pilot_jobs import _initial_checkpoint, _load
    from grpo_probe.phase2.recompute import load_head_model
    from grpo_probe.phase2.rollouts import (
        prereg_rollout_schema,
        read_batch,
        read_iteration_table,
        run_iteration,
        write_iteration_table,
    )
    from grpo_probe.phase2.trainer import IterationOutput, deterministic_torch, metrics_table, train_loop
    from grpo_probe.rollout import RolloutPool, worker_count

    prereg, _ = _load(prereg_path, plan_json, arm)
    phase2 = prereg.phase2
    assert phase2 is not None  # a plan with stages exists only for a design that registers one
    if not 1 <= replicate < phase2.replicates:
        raise ValueError(
            f"{prereg.path}: phase2.replicates is {phase2.replicates}, so there is no replicate {replicate} "
            f"(replicates 1..{phase2.replicates - 1} train beside the stage's own)"
        )
    check_pilot_choices(prereg)
    guards = env_spec(prereg.env).guards
    schema = prereg_rollout_schema(prereg)
    initial = Path(_initial_checkpoint(source, checkpoint, arm))
    work = Path(final).parent / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    outputs = [
        IterationOutput(work / f"theta-{i + 1}.pt", work / f"rollouts-{i}.parquet" if i >= 1 else None)
        for i in range(phase2.iterations)
    ]
    started = worker_count(phase2.episodes_per_iteration, workers)
    pool = RolloutPool(started) if started > 0 else None

    def read(path: Path) -> tuple[Any, Any]:
        return read_batch(path, prereg.run_key), read_iteration_table(path, schema)

    def rollouts(iteration: int, theta: Path) -> None:
        table = run_iteration(prereg, arm, theta, iteration, pool=pool, replicate=replicate)
        write_iteration_table(table, work / f"rollouts-{iteration}.parquet")

    def on_iteration(iteration: int, row: Any, report: Any) -> None:
        print(
            f"phase 2 {arm} replicate {replicate} iteration {iteration}: mean reward {row.mean_reward:.3f}, "
            f"approx KL {row.approx_kl}, replay max |diff| {report.max_abs_diff:.3g}",
            file=sys.stderr,
            flush=True,
        )

    try:
        first = work / "rollouts-0.parquet"
        write_iteration_table(run_iteration(prereg, arm, initial, 0, pool=pool, replicate=replicate), first)
        with deterministic_torch():
            policy = load_head_model(str(initial), trainable=True)
            recipe = phase2.recipe(policy.head)
            reference = load_head_model(str(initial), trainable=False) if recipe.kl_beta > 0 else None
            first_batch, first_table = read(first)
            rows = train_loop(
                policy,
                reference,
                recipe,
                phase2,
                initial,
                first_batch,
                first_table,
                outputs,
                rollouts,
                read,
                on_iteration,
                guards,
                prereg.analysis.to_dict(),
            )
    finally:
        if pool is not None:
            pool.close()
    Path(outputs[-1].checkpoint).replace(final)
    shutil.rmtree(work, ignore_errors=True)
    table = metrics_table(rows, [g.name for g in guards])
    write_episode_table(metrics, table, schema=table.schema)
    write_design_manifest(
        prereg,
        manifest,
        "phase2_replicate",
        [final, metrics],
        upstream,
        {
            "arm": arm,
            "replicate": replicate,
            "iterations": phase2.iterations,
            "first_train_seed": phase2.iteration_seeds(0, replicate)[0],
            "final_checkpoint_sha256": rows[-1].checkpoint_sha256,
        },
    )
