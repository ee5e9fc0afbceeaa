"""Where each phase-2 artifact of a stage lives, in one place for the rules and the report.

Why one helper: the rules declare these paths as outputs, and the report finds a stage's artifacts from
the plan alone; both read them here, so the two cannot drift. ``StagePaths(root, "{arm}", n)`` gives the
Snakemake patterns (``{arm}`` stays a wildcard). Imports nothing heavy: Snakemake reads it while parsing.

Replicates (``phase2.replicates``) and the sampled policy's held-out score (``phase2.sampled_draws``) add
files of their own and move none: replicate 0 is the stage's chain as it was, replicate r >= 1 keeps its
final policy, metrics and manifest under ``replicate-<r>/``, and the extra held-out tables sit beside the
anchor's two. A design that registers neither has exactly the paths it had before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = ["HELD_OUT_POLICIES", "StagePaths", "stage_paths"]

HELD_OUT_POLICIES: tuple[str, ...] = ("anchor", "sampled")
"""What a stage's held-out evaluation can score: the anchor a lab deploys (greedy / ODE, always), and the
sampler GRPO trains (when the design registers ``phase2.sampled_draws``)."""


@dataclass(frozen=True)
class StagePaths:
    """Artifacts of the stage training ``arm`` under ``root`` (``<results>/<prereg>/phase2``)."""

    root: str
    arm: str
    iterations: int
    replicates: int = 1
    """``phase2.replicates``: replicate 0 is the stage's own chain, 1.. train beside it."""
    sampled: bool = False
    """Whether the held-out evaluation also scores the sampled policy (``phase2.sampled_draws``)."""

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

    # -- replicates and the sampled policy -----------------------------------------------------------------
    def replicate_directory(self, replicate: int | str) -> str:
        """Replicate ``replicate`` (>= 1, or the ``{replicate}`` wildcard) of the stage."""
        return f"{self.directory}/replicate-{replicate}"

    def replicate_final(self, replicate: int | str) -> str:
        """theta_N of replicate ``replicate`` >= 1 (its intermediate policies are not kept)."""
        return f"{self.replicate_directory(replicate)}/policy.pt"

    def replicate_metrics(self, replicate: int | str) -> str:
        return f"{self.replicate_directory(replicate)}/metrics.parquet"

    def replicate_manifest(self, replicate: int | str) -> str:
        return f"{self.replicate_directory(replicate)}/train.manifest.json"

    def final_of(self, replicate: int) -> str:
        """The final policy of replicate ``replicate``: replicate 0's is the stage's own theta_N."""
        return self.final_checkpoint if replicate == 0 else self.replicate_final(replicate)

    @property
    def policies(self) -> tuple[str, ...]:
        """The held-out policies this stage scores, in :data:`HELD_OUT_POLICIES` order."""
        return HELD_OUT_POLICIES if self.sampled else HELD_OUT_POLICIES[:1]

    def eval_table(self, policy: str, label: str) -> str:
        """The held-out table of ``policy`` (anchor or sampled) and ``label`` (``initial``, or ``final-<r>``
        for replicate r's final policy); the anchor's initial and replicate 0's final are the stage's two
        tables as they were."""
        if policy not in HELD_OUT_POLICIES:
            raise ValueError(f"no held-out policy {policy!r} (known: {', '.join(HELD_OUT_POLICIES)})")
        if policy == "anchor" and label == "initial":
            return self.eval_initial
        if policy == "anchor" and label == "final-0":
            return self.eval_final
        stem = label if policy == "anchor" else f"{policy}-{label}"
        return f"{self.directory}/eval/{stem}.parquet"

    @property
    def eval_labels(self) -> tuple[str, ...]:
        """``initial``, then ``final-<r>`` of each replicate."""
        return ("initial", *(f"final-{r}" for r in range(self.replicates)))

    def extra_eval_tables(self) -> dict[str, str]:
        """The held-out tables beyond the anchor's initial and replicate 0's final, keyed
        ``<policy>_<label>`` (a rule's named outputs); empty for a design without replicates or sampling."""
        tables = {
            f"{policy}_{label.replace('-', '_')}": self.eval_table(policy, label)
            for policy in self.policies
            for label in self.eval_labels
        }
        return {k: v for k, v in tables.items() if v not in (self.eval_initial, self.eval_final)}

    def replicate_finals(self) -> dict[str, str]:
        """``final_<r>`` -> replicate r's final policy, r >= 1 (the eval rule's extra inputs)."""
        return {f"final_{r}": self.replicate_final(r) for r in range(1, self.replicates)}

    def replicate_manifests(self) -> dict[str, str]:
        """``replicate_<r>`` -> replicate r's train manifest, r >= 1."""
        return {f"replicate_{r}": self.replicate_manifest(r) for r in range(1, self.replicates)}


def stage_paths(phase2: Any, root: str | os.PathLike[str], arm: str) -> StagePaths:
    """The stage's artifacts under ``root`` (the plan's folder), with the replicates and the sampled score
    that ``phase2`` (a :class:`grpo_probe.prereg.phase2.Phase2`) registers."""
    return StagePaths(str(root), arm, phase2.iterations, phase2.replicates, phase2.sampled_draws is not None)
