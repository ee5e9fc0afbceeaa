"""The work behind the pilot's replicates and the sampled policy's held-out score.

Why a rule per replicate (``phase2_replicate``): replicate r >= 1 trains its own copy of the arm from
theta_0 on its own block of training seeds (:meth:`grpo_probe.prereg.phase2.Phase2.iteration_seeds`),
independently of replicate 0 (the stage's own ``phase2_rollouts`` / ``phase2_train`` chain), so the
replicates run side by side. Each update is checked by the log-prob replay oracle before it steps, as in
replicate 0's training (:func:`grpo_probe.phase2.trainer.train_loop`); what the replicate keeps is its
final policy, its per-iteration metrics and a manifest chained to what the stage's own pilot starts from
(the plan and the arm's manifests), not to that pilot's files, so the two run side by side (on a cluster,
each replicate is a job of its own beside the stage's ``phase2_arm`` group). It trains by the stage's own
function (:func:`grpo_probe.phase2.stage.train_stage` with its replicate index), so replicate r differs
from the pilot by its seeds alone. Its intermediate policies and rollouts are work files, removed at the
end: the held-out score reads the final policy alone.

The held-out evaluation (``phase2_eval``) scores, beside the anchor's initial and replicate 0's final
policy, each further replicate's final policy by the anchor, and, when the design registers
``phase2.sampled_draws``, every one of them by the arm's phase-2 sampler.
A design that registers neither runs none of this. The extra held-out tables are
:func:`grpo_probe.phase2.held_out.evaluate_extra`'s, written by ``phase2_eval``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_probe.phase2.stage_inputs import stage_inputs
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
    from grpo_probe.phase2.stage import train_stage, work_folder, write_stage_metrics

    stage = stage_inputs(prereg_path, plan_json, arm, source, checkpoint)
    prereg, phase2 = stage.prereg, stage.phase2
    if not 1 <= replicate < phase2.replicates:
        raise ValueError(
            f"{prereg.path}: phase2.replicates is {phase2.replicates}, so there is no replicate {replicate} "
            f"(replicates 1..{phase2.replicates - 1} train beside the stage's own)"
        )

    def on_iteration(_policy: Any, iteration: int, row: Any, report: Any) -> None:
        print(
            f"phase 2 {arm} replicate {replicate} iteration {iteration}: mean reward {row.mean_reward:.3f}, "
            f"approx KL {row.update.approx_kl}, replay max |diff| {report.max_abs_diff:.3g}",
            file=sys.stderr,
            flush=True,
        )

    with work_folder(Path(final).parent / "work") as work:
        rows = train_stage(
            prereg, arm, stage.initial, work, replicate=replicate, workers=workers, on_iteration=on_iteration
        )
        Path(work.checkpoint(phase2.iterations)).replace(final)
    write_stage_metrics(prereg, rows, metrics)
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
