"""Where each phase-2 artifact of a stage lives, in one place for the rules and the report.

Why one helper: the rules declare these paths as outputs, and the report finds a stage's artifacts from
the plan alone; both read them here, so the two cannot drift. ``StagePaths(root, "{arm}", n)`` gives the
Snakemake patterns (``{arm}`` stays a wildcard). Imports nothing heavy: Snakemake reads it while parsing.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StagePaths"]


@dataclass(frozen=True)
class StagePaths:
    """Artifacts of the stage training ``arm`` under ``root`` (``<results>/<prereg>/phase2``)."""

    root: str
    arm: str
    iterations: int

    @property
    def directory(self) -> str:
        return f"{self.root}/{self.arm}"

    def rollouts(self, iteration: int) -> str:
        """The rollouts of theta_iteration (iteration 0: the ``phase2_rollouts`` rule's)."""
        return f"{self.directory}/iter-{iteration}/rollouts.parquet"

    @property
    def first_rollouts_manifest(self) -> str:
        """The manifest of iteration 0's rollouts and their replay oracle's report."""
        return f"{self.directory}/iter-0/rollouts.manifest.json"

    def checkpoint(self, iteration: int) -> str:
        """theta_iteration for iteration >= 1 (theta_0 is the arm's own checkpoint)."""
        return f"{self.directory}/iter-{iteration}/policy.pt"

    def iteration_manifest(self, iteration: int) -> str:
        """The manifest of the update that wrote theta_iteration (chained to the one before)."""
        return f"{self.directory}/iter-{iteration}/iteration.manifest.json"

    @property
    def oracle_report(self) -> str:
        return f"{self.directory}/replay_oracle.json"

    @property
    def metrics(self) -> str:
        return f"{self.directory}/metrics.parquet"

    @property
    def train_manifest(self) -> str:
        return f"{self.directory}/train.manifest.json"

    @property
    def final_checkpoint(self) -> str:
        return self.checkpoint(self.iterations)

    @property
    def eval_initial(self) -> str:
        return f"{self.directory}/eval/initial.parquet"

    @property
    def eval_final(self) -> str:
        return f"{self.directory}/eval/final.parquet"

    @property
    def eval_movement(self) -> str:
        """How far theta_N moved from theta_0 (:mod:`grpo_probe.phase2.movement`)."""
        return f"{self.directory}/eval/movement.json"

    @property
    def eval_manifest(self) -> str:
        return f"{self.directory}/eval/eval.manifest.json"

    def trained_checkpoints(self) -> list[str]:
        """theta_1 .. theta_N, the train rule's checkpoints."""
        return [self.checkpoint(i) for i in range(1, self.iterations + 1)]

    def trained_rollouts(self) -> list[str]:
        """Rollouts of theta_1 .. theta_{N-1}, written by the train rule."""
        return [self.rollouts(i) for i in range(1, self.iterations)]

    def iteration_manifests(self) -> list[str]:
        return [self.iteration_manifest(i) for i in range(1, self.iterations + 1)]
