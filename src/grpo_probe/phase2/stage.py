"""One pilot stage: GRPO on one arm from theta_0, the loop the pilot, its replicates and the calibration run.

Why one function: the stage's own training (``phase2_train``, replicate 0), each further replicate
(``phase2_replicate``, replicate r >= 1 on its own block of training seeds) and each candidate of the
pilot calibration (:func:`grpo_probe.study.calibration_run.run_candidate`) train the same way: keyed
rollouts of theta_i, the log-prob replay oracle before every update, the registered loss and estimator
(:func:`grpo_probe.phase2.trainer.train_loop`). What differs is where the files go
(:class:`grpo_probe.phase2.paths.StagePaths` beside the plan, or a :class:`WorkFiles` folder removed
afterwards), whether iteration 0's rollouts were already run and checked by their own job, which block
of training seeds the rollouts use (``replicate``), and what the caller does with each batch and update
(the hooks: manifests and logs, or the calibration's update KL). Rollouts and updates run on the CPU
(see :func:`grpo_probe.phase2.pilot_jobs.phase2_rollouts`), so a stage writes the same bytes wherever it
runs and however many workers it is given.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from grpo_probe.envs.episode_table import write_episode_table
from grpo_probe.envs.registry import env_spec
from grpo_probe.phase2.recompute import HeadModel, load_head_model
from grpo_probe.phase2.recompute_oracle import RecomputeReport
from grpo_probe.phase2.rollouts import (
    RolloutBatch,
    prereg_rollout_schema,
    read_batch,
    read_iteration_table,
    run_iteration,
    write_iteration_table,
)
from grpo_probe.phase2.stage_inputs import registered_phase2
from grpo_probe.phase2.trainer import (
    IterationMetrics,
    IterationOutput,
    deterministic_torch,
    metrics_table,
    train_loop,
)
from grpo_probe.prereg import Prereg
from grpo_probe.rollout import RolloutPool, worker_count

__all__ = [
    "BatchHook",
    "IterationHook",
    "StageFiles",
    "WorkFiles",
    "train_stage",
    "work_folder",
    "write_stage_metrics",
]

BatchHook = Callable[[HeadModel, RolloutBatch], None]
"""Called with the policy (still theta_i) and each iteration's batch as it is read, before its update."""

IterationHook = Callable[[HeadModel, int, IterationMetrics, RecomputeReport], None]
"""Called after iteration i's update, theta_{i+1} written: the policy (now theta_{i+1}), i, the
iteration's metrics row and the replay oracle's report on its batch."""


class StageFiles(Protocol):
    """Where a stage writes: theta_i (i >= 1) and the rollouts of theta_i."""

    def checkpoint(self, iteration: int) -> str | os.PathLike[str]: ...

    def rollouts(self, iteration: int) -> str | os.PathLike[str]: ...


@dataclass(frozen=True)
class WorkFiles:
    """A stage's policies and rollouts in a work folder (a replicate's, a calibration candidate's): only
    its final policy and numbers are kept, so the folder is removed once they are (:func:`work_folder`)."""

    root: Path

    def checkpoint(self, iteration: int) -> Path:
        return self.root / f"theta-{iteration}.pt"

    def rollouts(self, iteration: int) -> Path:
        return self.root / f"rollouts-{iteration}.parquet"


@contextmanager
def work_folder(path: str | os.PathLike[str]) -> Iterator[WorkFiles]:
    """An empty work folder at ``path`` (whatever an earlier run left there removed), removed again when
    the block completes; a block that raises leaves it for inspection."""
    root = Path(path)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    yield WorkFiles(root)
    shutil.rmtree(root, ignore_errors=True)


def train_stage(
    prereg: Prereg,
    arm: str,
    initial: Path,
    files: StageFiles,
    *,
    replicate: int = 0,
    first_table: Path | None = None,
    workers: int = 0,
    on_batch: BatchHook | None = None,
    on_iteration: IterationHook | None = None,
) -> list[IterationMetrics]:
    """GRPO on ``arm`` of ``prereg`` from theta_0 = ``initial``, ``phase2.iterations`` updates; returns
    each iteration's metrics row.

    ``replicate``: which block of training seeds the rollouts use
    (:meth:`grpo_probe.prereg.phase2.Phase2.iteration_seeds`; 0, the stage's own pilot). ``first_table``:
    iteration 0's rollouts when a job of their own already ran and checked them (the pilot's
    ``phase2_rollouts``); without it they are run here into ``files.rollouts(0)``. theta_{i+1} goes to
    ``files.checkpoint(i + 1)``, iteration i's rollouts (i >= 1) to ``files.rollouts(i)``. ``workers``:
    rollout processes at most; one pool serves every batch this call runs when a batch is more than one
    task (:func:`grpo_probe.rollout.worker_count`), and without one the batches run in this process (the
    same bytes either way, :func:`grpo_probe.rollout.run_group`).
    """
    phase2 = registered_phase2(prereg)
    guards = env_spec(prereg.env).guards
    schema = prereg_rollout_schema(prereg)
    outputs = [
        IterationOutput(Path(files.checkpoint(i + 1)), Path(files.rollouts(i)) if i >= 1 else None)
        for i in range(phase2.iterations)
    ]
    batches_here = phase2.iterations - 1 + (first_table is None)
    started = worker_count(phase2.episodes_per_iteration, workers)
    pool = RolloutPool(started) if started > 0 and batches_here > 0 else None

    def rollouts(iteration: int, theta: Path) -> None:
        table = run_iteration(prereg, arm, theta, iteration, pool=pool, replicate=replicate)
        write_iteration_table(table, files.rollouts(iteration))

    try:
        if first_table is None:
            rollouts(0, initial)
            first_table = Path(files.rollouts(0))
        with deterministic_torch():
            policy = load_head_model(str(initial), trainable=True)
            recipe = phase2.recipe(policy.head)
            reference = load_head_model(str(initial), trainable=False) if recipe.kl_beta > 0 else None

            def read(path: Path) -> tuple[RolloutBatch, pa.Table]:
                batch = read_batch(path, prereg.run_key)
                if on_batch is not None:
                    on_batch(policy, batch)
                return batch, read_iteration_table(path, schema)

            def iteration_done(iteration: int, row: IterationMetrics, report: RecomputeReport) -> None:
                if on_iteration is not None:
                    on_iteration(policy, iteration, row, report)

            first_batch, first = read(first_table)
            return train_loop(
                policy,
                reference,
                recipe,
                phase2,
                initial,
                first_batch,
                first,
                outputs,
                rollouts,
                read,
                iteration_done,
                guards,
                prereg.analysis.to_dict(),
            )
    finally:
        if pool is not None:
            pool.close()


def write_stage_metrics(
    prereg: Prereg, rows: Sequence[IterationMetrics], path: str | os.PathLike[str]
) -> None:
    """The stage's metrics table, one row per iteration with the environment's guards' trip rates."""
    table = metrics_table(rows, [g.name for g in env_spec(prereg.env).guards])
    write_episode_table(path, table, schema=table.schema)
