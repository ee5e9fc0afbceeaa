"""The prereg's ``phase2:`` section: the GRPO pilot the decision names, registered like the probe.

Why a section of the design: the probe ends in a prediction ("phase 2 is Flow-GRPO on the flow teacher").
The pilot that tests it is registered and locked before it runs, so its numbers cannot be tuned after
seeing the result: training and held-out seeds (disjoint from the probe's, the demos' and each other),
iterations, K, learning rate, clip ranges, KL, the reward's guard penalties, the advantage epsilon, the
dynamic-sampling tolerance and the replay oracle's tolerance. The section is optional: a design without
it runs no phase 2, and phase2.md says so.

The reward's penalties are keyed by the guards the design's environment declares
(:class:`grpo_probe.envs.protocol.Guard`: the boat's ``reset_strike``, ``knocked_off``, ...; the pusher's
``joint_limit``, ``off_table``, ...), so the pilot penalises exactly what the analysis counts, in any
environment; :func:`penalty_problems` refuses a penalty on a guard the environment does not declare.

The JSON schema (``prereg/schemas/prereg.schema.yaml``, property ``phase2``) checks each field; the
rules that relate fields (seed sets disjoint, enough training seeds for every iteration, a sampling mode
with log-probs for each head) live here. Errors name the prereg and the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grpo_probe.envs.protocol import EnvSpec
from grpo_probe.prereg.seeds import expand_seeds
from grpo_probe.sampling import SamplingMode

__all__ = [
    "PENALTIES_FIELD",
    "PHASE2_HEADS",
    "PILOT_SCOPES",
    "HeadRecipe",
    "Phase2",
    "Phase2Error",
    "parse_phase2",
    "penalty_problems",
    "phase2_problems",
]

PENALTIES_FIELD = "phase2.reward.penalties"
"""Where a design registers the reward's guard penalties (errors name ``<this>.<guard>``)."""

PHASE2_HEADS: tuple[str, ...] = ("ar", "flow")
"""Heads a phase-2 pilot trains: token-GRPO on the AR head, Flow-GRPO (SDE) on the flow head."""

PILOT_SCOPES: tuple[str, ...] = ("gated", "every_arm")
"""Which arms the pilot trains: ``gated``, the arms the decision names (none on park); ``every_arm``, every
arm an enabled cell uses whose head has a recipe, whatever the decision (a validation design: the study
compares the probe's reads of every arm with what the same pilot gains on it)."""

_TRAINABLE_KIND = {"ar": "temperature", "flow": "flow_sde"}
"""The sampler each head trains under: the one that records the log-probs GRPO's ratio divides by."""


class Phase2Error(ValueError):
    """The ``phase2:`` section breaks a cross-field rule; the message names the prereg and the field."""


@dataclass(frozen=True)
class HeadRecipe:
    """How one head is trained in the pilot: its sampler, optimizer step and loss numbers.

    ``clip_ratio_low`` / ``clip_ratio_high`` are DAPO's decoupled epsilons: the ratio is clipped to
    [1 - low, 1 + high] (the memo's clip-higher [0.8, 1.28] for AR; a small symmetric epsilon for flow,
    whose per-step ratio is a density ratio over a 50 x 6 chunk). ``kl_beta`` weighs the KL to the frozen
    initial policy (AR: token-level k3 estimator, off by default; flow: the closed-form Gaussian KL, a
    weighted velocity MSE). ``replay_atol`` is the largest |recomputed - recorded| log-prob the replay
    oracle accepts, per token (AR) or per SDE step of a chunk (flow), in nats.
    """

    head: str
    mode: SamplingMode
    lr: float
    clip_ratio_low: float
    clip_ratio_high: float
    kl_beta: float
    grad_clip: float
    replay_atol: float


@dataclass(frozen=True)
class Phase2:
    """The registered phase-2 pilot (``phase2:`` of the prereg)."""

    description: str
    train_seeds: tuple[int, ...]
    """Spawn seeds of the training groups, iteration i using positions i*seeds_per_iteration onward."""
    eval_seeds: tuple[int, ...]
    """Held-out seeds: the initial and the final policy are evaluated on them with the arm's anchor."""
    iterations: int
    seeds_per_iteration: int
    rollouts_per_seed: int
    """K: rollouts per training seed (one GRPO group; ``group_size`` of the probe's cells)."""
    penalties: dict[str, float]
    """Guard name -> cm of progress an episode loses when it trips that guard (``phase2.reward.penalties``):

        reward = progress_final_cm - sum over guards g of penalties[g] * [episode trips g]

    A guard trips at most once per episode (:meth:`grpo_probe.envs.protocol.Guard.trips`); a guard the
    design does not name costs nothing. The memo (section 3) warns that a dense progress reward without
    guards learns to swat the object toward the goal; the guards enter the reward as registered penalties.
    """
    advantage_epsilon: float
    """eps in (r - mean) / (std + eps), as verl's compute_grpo_outcome_advantage (1e-6 there)."""
    min_group_std: float
    """Dynamic sampling: a group whose reward std (ddof 1) is at or below this is dropped from the update."""
    epochs: int
    """Passes over an iteration's kept rollouts."""
    minibatches: int
    """Optimizer steps per pass (the kept rollouts split into this many minibatches by a keyed shuffle)."""
    heads: dict[str, HeadRecipe]
    cpu_hours: float
    """The registered compute gate of the pilot (all phase-2 rules of one design together)."""
    gate_description: str = ""
    pilot: str = "gated"
    """:data:`PILOT_SCOPES`: the decision's arms only, or every arm at the same registered compute."""

    def recipe(self, head: str) -> HeadRecipe:
        """The recipe of ``head``; a ``KeyError`` names the registered heads."""
        if head not in self.heads:
            raise KeyError(f"phase2.heads has no {head!r} (registered: {', '.join(self.heads) or 'none'})")
        return self.heads[head]

    def iteration_seeds(self, iteration: int) -> tuple[int, ...]:
        """The training seeds of iteration ``iteration`` (0-based)."""
        if not 0 <= iteration < self.iterations:
            raise ValueError(f"iteration {iteration} is outside 0..{self.iterations - 1}")
        start = iteration * self.seeds_per_iteration
        return self.train_seeds[start : start + self.seeds_per_iteration]

    @property
    def episodes_per_iteration(self) -> int:
        """Rollouts per iteration: seeds_per_iteration x K."""
        return self.seeds_per_iteration * self.rollouts_per_seed


def _overlap(a: Sequence[int], b: Sequence[int]) -> str:
    both = sorted(set(a) & set(b))
    return ", ".join(map(str, both[:5])) + (", ..." if len(both) > 5 else "")


def penalty_problems(penalties: Mapping[str, float], spec: EnvSpec) -> list[str]:
    """A penalty on a guard ``spec`` does not declare, as ``"phase2.reward.penalties.<name>: ..."``.

    Why refuse it: the reward would silently never charge it (no column trips it), so the registered
    reward would not be the one trained on. The message lists the guards the environment declares.
    """
    declared = spec.guard_names
    return [
        f"{PENALTIES_FIELD}.{name}: environment {spec.id!r} declares no guard {name!r} "
        f"(its guards: {', '.join(declared) or 'none'})"
        for name in penalties
        if name not in declared
    ]


def phase2_problems(raw: Mapping[str, Any]) -> list[str]:
    """Cross-field problems of a schema-valid design's ``phase2`` section, as ``"phase2.<field>: ..."``."""
    section = raw.get("phase2")
    if section is None:
        return []
    problems: list[str] = []
    train, held_out = expand_seeds(section["train_seeds"]), expand_seeds(section["eval_seeds"])
    for name, seeds in (("train_seeds", train), ("eval_seeds", held_out)):
        if len(set(seeds)) != len(seeds):
            problems.append(f"phase2.{name}: a seed is registered twice")
    others = {
        "the probe's seeds (seeds)": expand_seeds(raw["seeds"]),
        "the demo seeds (training.demos.seeds)": expand_seeds(raw["training"]["demos"]["seeds"]),
    }
    for name, seeds in (("train_seeds", train), ("eval_seeds", held_out)):
        for other, taken in others.items():
            if set(seeds) & set(taken):
                problems.append(f"phase2.{name}: overlaps {other} ({_overlap(seeds, taken)})")
    if set(train) & set(held_out):
        problems.append(
            f"phase2.eval_seeds: overlaps phase2.train_seeds ({_overlap(held_out, train)}); "
            "held-out seeds must not be trained on"
        )
    needed = section["iterations"] * section["seeds_per_iteration"]
    if len(train) != needed:
        problems.append(
            f"phase2.train_seeds: holds {len(train)} seeds, but iterations x seeds_per_iteration = "
            f"{section['iterations']} x {section['seeds_per_iteration']} = {needed} (each iteration trains "
            "on fresh spawns)"
        )
    for head, recipe in section["heads"].items():
        at = f"phase2.heads.{head}"
        kind = recipe["mode"]["kind"]
        if kind != _TRAINABLE_KIND[head]:
            problems.append(
                f"{at}.mode.kind: the {head} head trains under {_TRAINABLE_KIND[head]!r} (the sampler whose "
                f"log-probs the importance ratio divides by), got {kind!r}"
            )
        elif kind == "flow_sde" and float(recipe["mode"]["sde_a"]) <= 0:
            problems.append(f"{at}.mode.sde_a: must be > 0 (at a = 0 the SDE step has no log-prob)")
        if recipe["clip_ratio_low"] >= 1:
            problems.append(f"{at}.clip_ratio_low: must be < 1 (the ratio is clipped to [1 - low, 1 + high])")
    return problems


def parse_phase2(raw: Mapping[str, Any], where: str) -> Phase2 | None:
    """The typed ``phase2`` section of a schema-valid design, or None when the design has none.

    Raises :class:`Phase2Error` listing every cross-field problem, each prefixed with ``where`` (the
    prereg's path).
    """
    problems = phase2_problems(raw)
    if problems:
        raise Phase2Error("\n".join(f"{where}: {p}" for p in problems))
    section = raw.get("phase2")
    if section is None:
        return None
    reward = section["reward"]
    heads = {
        head: HeadRecipe(
            head=head,
            mode=SamplingMode.from_dict(recipe["mode"]),
            lr=float(recipe["lr"]),
            clip_ratio_low=float(recipe["clip_ratio_low"]),
            clip_ratio_high=float(recipe["clip_ratio_high"]),
            kl_beta=float(recipe["kl_beta"]),
            grad_clip=float(recipe["grad_clip"]),
            replay_atol=float(recipe["replay_atol"]),
        )
        for head, recipe in section["heads"].items()
    }
    gate = section["compute_gate"]
    return Phase2(
        description=section["description"],
        train_seeds=expand_seeds(section["train_seeds"]),
        eval_seeds=expand_seeds(section["eval_seeds"]),
        iterations=int(section["iterations"]),
        seeds_per_iteration=int(section["seeds_per_iteration"]),
        rollouts_per_seed=int(section["rollouts_per_seed"]),
        penalties={str(name): float(cm) for name, cm in reward["penalties"].items()},
        advantage_epsilon=float(section["advantage_epsilon"]),
        min_group_std=float(section["min_group_std"]),
        epochs=int(section["epochs"]),
        minibatches=int(section["minibatches"]),
        heads=heads,
        cpu_hours=float(gate["cpu_hours"]),
        gate_description=str(gate.get("description", "")),
        pilot=str(section.get("pilot", "gated")),
    )
