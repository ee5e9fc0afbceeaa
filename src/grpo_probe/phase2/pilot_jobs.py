"""The work behind each phase-2 rule, one function per rule (as :mod:`grpo_probe.probe_jobs` for the probe).

Each step loads the prereg (which refuses a design that does not match its lock), reads the plan the
``phase2_plan`` checkpoint wrote and refuses an arm the plan does not train, does its work, writes its
artifacts atomically and a manifest beside them that lists their sha256 and the upstream manifests, so
the chain from phase2.md back to the prereg can be verified (``grpo-probe verify``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grpo_probe.atomic_io import atomic_write_json
from grpo_probe.phase2.gate import apply_guard_checks, plan_from_decision, write_plan
from grpo_probe.phase2.stage_inputs import (
    design_and_plan,
    initial_checkpoint,
    load_stage,
    registered_phase2,
    stage_inputs,
)
from grpo_probe.prereg import Prereg, load_prereg
from grpo_probe.provenance import write_design_manifest

__all__ = [
    "phase2_compute",
    "phase2_eval",
    "phase2_plan",
    "phase2_report",
    "phase2_rollouts",
    "phase2_root",
    "phase2_train",
]

PathLike = str | os.PathLike[str]


def _check_penalties(prereg: Prereg) -> None:
    """Every registered penalty names a guard the environment declares, or nothing is trained.

    A built-in environment's guards were checked when the design was read; a user's factory is built
    here, before any phase-2 job, so its design is refused as early and in the same words.
    """
    from grpo_probe.envs.registry import env_spec
    from grpo_probe.prereg import PreregError
    from grpo_probe.prereg.phase2 import penalty_problems

    phase2 = registered_phase2(prereg)
    problems = penalty_problems(phase2.penalties, env_spec(prereg.env))
    if problems:
        raise PreregError("\n".join(f"{prereg.path}: {p}" for p in problems))


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the gate --------------------------------------------------------------------------------------------
def phase2_plan(
    prereg_path: PathLike,
    decision_json: PathLike,
    upstream: Sequence[PathLike],
    plan: PathLike,
    manifest: PathLike,
    cell_tables: Mapping[str, PathLike] | None = None,
) -> None:
    """The checkpoint rule's work: which arms phase 2 trains, in order, or nothing and why.

    ``cell_tables``: the probe's joined table of each enabled cell (cell id -> path, the tables the
    decision read). With them, each arm the decision has trained is checked first for guard penalties
    that cannot act (:mod:`grpo_probe.phase2.guard_variance`): a refused arm is recorded in the plan and
    not trained (:func:`grpo_probe.phase2.gate.apply_guard_checks`). The workflow always passes them;
    without them (a test of a stage alone, with no probe run) no check is made and the plan records none.
    """
    prereg = load_prereg(prereg_path)
    if prereg.phase2 is not None:
        _check_penalties(prereg)
    decision = json.loads(Path(decision_json).read_text())
    result = plan_from_decision(prereg, decision, str(decision_json))
    if cell_tables is not None and result.stages:
        from grpo_probe.envs.registry import env_spec
        from grpo_probe.phase2.guard_variance import check_guard_variance

        guards = env_spec(prereg.env).guards
        checks = [check_guard_variance(prereg, s.arm, decision, cell_tables, guards) for s in result.stages]
        result = apply_guard_checks(prereg, result, checks)
    write_plan(result, plan)
    _log(f"phase 2: {result.reason}")
    write_design_manifest(prereg, manifest, "phase2_plan", [plan], upstream, {"outcome": result.outcome})


# -- one stage -------------------------------------------------------------------------------------------
def phase2_rollouts(
    prereg_path: PathLike,
    plan_json: PathLike,
    arm: str,
    source: PathLike,
    checkpoint: PathLike,
    upstream: Sequence[PathLike],
    table: PathLike,
    report: PathLike,
    manifest: PathLike,
    workers: int,
) -> None:
    """Iteration 0: K rollouts of theta_0 per training seed, recorded for the update; then the log-prob
    replay oracle on them: every recorded log-prob recomputed under theta_0, where a mismatch fails the
    job (no report, so nothing is trained from these rollouts).

    On the CPU whatever the configured device: the oracle and the trainer recompute these log-probs on the
    CPU, and a GPU's float arithmetic would differ from it by more than rounding in the last bit. Why the
    oracle runs here and not in a job of its own: it is seconds of work on the policy this job has just
    run, and a job of its own would spend as long again starting up (importing torch alone is about
    2 CPU-s). One manifest lists the table and the report.
    """
    from grpo_probe.phase2.recompute import load_head_model
    from grpo_probe.phase2.recompute_oracle import check_recompute, recompute_batch
    from grpo_probe.phase2.rollouts import read_batch, run_iteration, write_iteration_table
    from grpo_probe.phase2.trainer import deterministic_torch

    stage = stage_inputs(prereg_path, plan_json, arm, source, checkpoint)
    prereg = stage.prereg
    write_iteration_table(run_iteration(prereg, arm, stage.initial, 0, workers=workers), table)
    with deterministic_torch():
        policy = load_head_model(str(stage.initial), trainable=False)
        recipe = stage.phase2.recipe(policy.head)
        result = recompute_batch(policy, read_batch(table, prereg.run_key), recipe.replay_atol)
    _log(
        f"replay oracle ({arm}): {result.entries} log-probs of {result.replans} replans, max |diff| "
        f"{result.max_abs_diff:.3g} nats, tolerance {result.tolerance:g}"
    )
    check_recompute(result, str(table))
    atomic_write_json(report, {"arm": arm, **result.to_dict()})
    write_design_manifest(
        prereg, manifest, "phase2_rollouts", [table, report], upstream, {"arm": arm, "iteration": 0}
    )


def phase2_train(
    prereg_path: PathLike,
    plan_json: PathLike,
    arm: str,
    source: PathLike,
    checkpoint: PathLike,
    first_table: PathLike,
    upstream: Sequence[PathLike],
    metrics: PathLike,
    manifest: PathLike,
    workers: int,
) -> None:
    """The GRPO iterations of one stage; theta_1..theta_N, their rollouts and manifests, the metrics table.

    Artifact paths follow :class:`grpo_probe.phase2.paths.StagePaths` beside the plan (the rules declare
    the same paths). Iteration k's manifest lists theta_k (and the rollouts that update read) and chains
    to iteration k-1's; the stage's manifest closes the chain. Rollouts and updates run on the CPU (see
    :func:`phase2_rollouts`).
    """
    from grpo_probe.phase2.paths import StagePaths
    from grpo_probe.phase2.stage import train_stage, write_stage_metrics

    stage = stage_inputs(prereg_path, plan_json, arm, source, checkpoint)
    prereg, phase2 = stage.prereg, stage.phase2
    paths = StagePaths(str(Path(plan_json).parent), arm, phase2.iterations)

    def on_iteration(_policy: Any, iteration: int, row: Any, report: Any) -> None:
        written = [paths.rollouts(iteration)] if iteration >= 1 else []
        previous = [paths.iteration_manifest(iteration)] if iteration >= 1 else list(upstream)
        write_design_manifest(
            prereg,
            paths.iteration_manifest(iteration + 1),
            "phase2_train",
            [*written, paths.checkpoint(iteration + 1)],
            previous,
            {"arm": arm, "iteration": iteration, "checkpoint_sha256": row.checkpoint_sha256},
        )
        _log(
            f"phase 2 {arm} iteration {iteration}: mean reward {row.mean_reward:.3f}, kept groups "
            f"{row.kept_fraction:.2f}, clip fraction {row.update.clip_fraction}, "
            f"approx KL {row.update.approx_kl}, replay max |diff| {report.max_abs_diff:.3g}"
        )

    rows = train_stage(
        prereg,
        arm,
        stage.initial,
        paths,
        first_table=Path(first_table),
        workers=workers,
        on_iteration=on_iteration,
    )
    write_stage_metrics(prereg, rows, metrics)
    # The iteration manifests list theta_1 .. theta_N and chain them back to iteration 0 and its oracle
    # (each file is listed by one manifest, which an audit reruns); this one closes the chain with the
    # metrics.
    write_design_manifest(
        prereg,
        manifest,
        "phase2_train",
        [metrics],
        [paths.iteration_manifest(phase2.iterations)],
        {
            "arm": arm,
            "iterations": phase2.iterations,
            "final_checkpoint_sha256": rows[-1].checkpoint_sha256,
            "policy_loss": phase2.policy_loss,
            "advantage": phase2.advantage,
        },
    )


def phase2_eval(
    prereg_path: PathLike,
    plan_json: PathLike,
    arm: str,
    source: PathLike,
    checkpoint: PathLike,
    final_checkpoint: PathLike,
    first_table: PathLike,
    upstream: Sequence[PathLike],
    initial_table: PathLike,
    final_table: PathLike,
    movement_json: PathLike,
    manifest: PathLike,
    workers: int,
    device: str = "cpu",
) -> None:
    """theta_0 and theta_N on the held-out seeds with the arm's anchor sampler (paired by seed), and how far
    theta_N moved from theta_0 (:mod:`grpo_probe.phase2.movement`: KL on ``first_table``, iteration 0's
    rollouts, and the anchor's actions on theta_0's held-out observations; on the CPU).

    A design with replicates or a sampled score also gets the tables of
    :func:`grpo_probe.phase2.held_out.evaluate_extra` beside the two, at their
    :class:`~grpo_probe.phase2.paths.StagePaths` paths, and the replicates' manifests join ``upstream``."""
    from grpo_probe.phase2.evaluate import evaluate_checkpoint
    from grpo_probe.phase2.held_out import evaluate_extra
    from grpo_probe.phase2.movement import policy_movement
    from grpo_probe.phase2.paths import stage_paths
    from grpo_probe.phase2.rollouts import read_batch
    from grpo_probe.rollout import RolloutPool, worker_count

    prereg, _ = load_stage(prereg_path, plan_json, arm)
    phase2 = registered_phase2(prereg)
    initial = initial_checkpoint(source, checkpoint, arm)
    paths = stage_paths(phase2, Path(plan_json).parent, arm)
    upstream = [*upstream, *paths.replicate_manifests().values()]
    started = worker_count(len(phase2.eval_seeds), workers)
    with RolloutPool(started) if started > 0 else contextlib.nullcontext() as pool:
        kwargs = {"device": device, "pool": pool}
        held_out = evaluate_checkpoint(prereg, arm, initial, "initial", initial_table, **kwargs)
        evaluate_checkpoint(prereg, arm, final_checkpoint, "final", final_table, **kwargs)
        extra = evaluate_extra(prereg, arm, paths, initial, pool, device)
    batch = read_batch(first_table, prereg.run_key)
    anchor = prereg.arms[arm].anchor
    atol = phase2.recipe(prereg.arms[arm].head).replay_atol
    movement = policy_movement(initial, final_checkpoint, batch, held_out, anchor, atol)
    atomic_write_json(movement_json, {"arm": arm, **movement.to_dict()})
    anchor_moved = "the anchor moved" if movement.moved else "the anchor did not move: not tested"
    _log(
        f"phase 2 {arm}: KL to the initial policy {movement.kl_to_initial:.3g} {movement.kl_unit} "
        f"(floor {movement.kl_floor:.3g}), anchor mean |delta a| {movement.action_change:.3g} "
        f"(floor {movement.action_floor:.3g}): {anchor_moved}"
    )
    write_design_manifest(
        prereg,
        manifest,
        "phase2_eval",
        [initial_table, final_table, movement_json, *extra],
        upstream,
        {"arm": arm},
    )


# -- the design ------------------------------------------------------------------------------------------
def phase2_report(
    prereg_path: PathLike,
    plan_json: PathLike,
    decision_json: PathLike,
    upstream: Sequence[PathLike],
    out_md: PathLike,
    out_json: PathLike,
    figures_dir: PathLike,
    manifest: PathLike,
) -> None:
    """phase2.md, phase2.json and the learning-curve figures, from the plan and each stage's artifacts.

    Each stage's artifacts are found beside the plan (:class:`grpo_probe.phase2.paths.StagePaths`).
    """
    from grpo_probe.phase2.report import build_phase2_report

    prereg, plan = design_and_plan(prereg_path, plan_json)
    figures = build_phase2_report(
        prereg, plan, decision_json, Path(plan_json).parent, upstream, out_md, out_json, figures_dir
    )
    write_design_manifest(prereg, manifest, "phase2_report", [out_md, out_json, *figures], upstream)


def phase2_root(prereg_path: PathLike, record: PathLike, out_md: PathLike, out_json: PathLike) -> None:
    """The configured design's phase2.md again at the repository root, its links rendered from there."""
    from grpo_probe.phase2.page import render_root_page

    load_prereg(prereg_path)  # the design must still match its lock
    render_root_page(record, out_md, out_json)


def phase2_compute(prereg_path: PathLike, benchmarks: PathLike, out_md: PathLike, out_json: PathLike) -> None:
    """The pilot's measured compute against its registered gate (varies by run, so not in the chain)."""
    from grpo_probe.phase2.report import phase2_compute_report

    prereg = load_prereg(prereg_path)
    phase2_compute_report(prereg, benchmarks, out_md, out_json)
