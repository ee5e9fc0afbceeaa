"""The prereg's ``phase2:`` section: the GRPO pilot the decision names, registered like the probe.

Why a section of the design: the probe ends in a prediction ("phase 2 is Flow-GRPO on the flow teacher").
The pilot that tests it is registered and locked before it runs, so its numbers cannot be tuned after
seeing the result: training and held-out seeds (disjoint from the probe's, the demos' and each other),
iterations, K, learning rate, clip ranges, KL, the reward's guard penalties, the advantage epsilon, the
dynamic-sampling tolerance and the replay oracle's tolerance, and which registered policy loss and
advantage estimator the pilot trains with (``policy_loss``, ``advantage``: names in
:mod:`grpo_probe.phase2.losses` and :mod:`grpo_probe.phase2.reward`). The section is optional: a design
without it runs no phase 2, and phase2.md says so.

The two names are optional and default to the pilot's original choices (:data:`DEFAULT_POLICY_LOSS`,
:data:`DEFAULT_ADVANTAGE`, also the schema's defaults), so a design locked before they existed keeps its
bytes, its lock hash and what it trains. Whether a name is registered is checked by the phase-2 package,
which owns the registries (:func:`choice_problems` takes their names from it): this package sits below
``phase2`` and loads without torch, which the losses need, while Snakemake parses the rules.

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
from grpo_probe.name_registry import Registry, UnknownName, did_you_mean
from grpo_probe.prereg.seeds import expand_seeds
from grpo_probe.sampling import SamplingMode

__all__ = [
    "ADVANTAGE_FIELD",
    "CHUNK_LOGPROBS",
    "DEFAULT_ADVANTAGE",
    "DEFAULT_MIN_GUARD_VARIANCE_SHARE",
    "DEFAULT_POLICY_LOSS",
    "MIN_GUARD_VARIANCE_FIELD",
    "PENALTIES_FIELD",
    "PHASE2_HEADS",
    "PILOT_SCOPES",
    "POLICY_LOSS_FIELD",
    "HeadRecipe",
    "Phase2",
    "Phase2Error",
    "choice_problems",
    "parse_phase2",
    "penalty_problems",
    "phase2_problems",
]

PENALTIES_FIELD = "phase2.reward.penalties"
"""Where a design registers the reward's guard penalties (errors name ``<this>.<guard>``)."""

MIN_GUARD_VARIANCE_FIELD = "phase2.reward.min_guard_variance_share"
"""Where a design registers the share of probe groups a penalised guard must vary in (errors and the
refusal name it)."""

DEFAULT_MIN_GUARD_VARIANCE_SHARE = 0.1
"""The share of a design that registers none (the schema's default): phase 2 refuses an arm when fewer
than one probe group in ten has some but not all episodes trip a penalised guard and most of the rest
trip it in every episode (:mod:`grpo_probe.phase2.guard_variance`). Why a tenth: below it the penalty's
signal reaches GRPO's advantage in too few groups to act on, and the guard is one the probe's sampler
trips nearly always (a guard tripped at rate p in each of K = 8 independent draws varies in
1 - p^8 - (1 - p)^8 of the groups: 57 % at p = 0.9, 8 % at p = 0.99). A design locked before the field
existed keeps its bytes and its lock."""

POLICY_LOSS_FIELD = "phase2.policy_loss"
"""Where a design names the registered policy loss the pilot trains with."""

ADVANTAGE_FIELD = "phase2.advantage"
"""Where a design names the registered advantage estimator the pilot's rollouts score with."""

DEFAULT_POLICY_LOSS = "clip_higher"
"""The policy loss of a design that names none: DAPO's clipped surrogate, the pilot's loss before the
field existed (``policy_loss``'s schema default; :func:`grpo_probe.phase2.losses.clip_higher_loss`)."""

DEFAULT_ADVANTAGE = "grpo_outcome"
"""The advantage estimator of a design that names none: GRPO's outcome advantage, the pilot's before the
field existed (``advantage``'s schema default; :func:`grpo_probe.phase2.reward.grpo_outcome_advantages`)."""

PHASE2_HEADS: tuple[str, ...] = ("ar", "flow")
"""Heads a phase-2 pilot trains: token-GRPO on the AR head, Flow-GRPO (SDE) on the flow head."""

PILOT_SCOPES: tuple[str, ...] = ("gated", "every_arm", "named_arms")
"""Which arms the pilot trains: ``gated``, the arms the decision names (none on park, none on a go the
design is too small to stand on); ``every_arm``, every arm an enabled cell uses whose head has a recipe,
whatever the decision (a validation design: the study compares the probe's reads of every arm with what
the same pilot gains on it); ``named_arms``, the arms the rule names even where the design is too small to
decide (a wiring design, whose pilot checks the machinery, not the decision)."""

CHUNK_LOGPROBS: tuple[str, ...] = ("sum", "mean")
"""How a flow SDE step's log-prob reduces over the chunk's action dimensions (``chunk_logprob``): ``sum``,
the log-density of the whole chunk vector (the default, what every design without the field trains
with), or ``mean``, Flow-GRPO's per-dimension mean (Liu et al., arXiv:2505.05470v2; its code averages
the step's log-prob and its KL over every dimension but the batch), so that the ratio's clip and the
KL weight read per action dimension whatever the chunk's size."""

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
    chunk_logprob: str = "sum"
    """Flow: :data:`CHUNK_LOGPROBS`. ``sum``: ratio, clip and KL per chunk (a 20 x 2 chunk's ratio moves
    40 dimensions' worth); ``mean``: per action dimension, r = exp(mean over the D = chunk_length x
    action_dim dimensions of the step's log-ratio), KL divided by D. The replay oracle's tolerance stays
    per chunk-step either way (it checks the recorded sums)."""

    @property
    def per_dimension(self) -> bool:
        """Whether the flow head's ratio, clip and KL read per action dimension."""
        return self.chunk_logprob == "mean"


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
    min_guard_variance_share: float = DEFAULT_MIN_GUARD_VARIANCE_SHARE
    """``phase2.reward.min_guard_variance_share``: phase 2 refuses to train an arm when a penalised guard
    varies within fewer than this share of the probe's groups and trips in every episode of most of the
    others (:mod:`grpo_probe.phase2.guard_variance`)."""
    pilot: str = "gated"
    """:data:`PILOT_SCOPES`: the decision's arms only, or every arm at the same registered compute."""
    policy_loss: str = DEFAULT_POLICY_LOSS
    """The registered policy loss the update minimises (``phase2.policy_loss``)."""
    advantage: str = DEFAULT_ADVANTAGE
    """The registered advantage estimator that scores each iteration's rollouts (``phase2.advantage``)."""
    replicates: int = 1
    """``phase2.replicates``: independent pilots per arm, each on its own block of training seeds."""
    sampled_draws: int | None = None
    """``phase2.sampled_draws``: keyed draws per held-out seed under the arm's phase-2 sampler, when the
    held-out evaluation also scores the sampled policy; None (the default) scores the anchor alone."""

    def recipe(self, head: str) -> HeadRecipe:
        """The recipe of ``head``; a ``KeyError`` names the registered heads."""
        if head not in self.heads:
            raise KeyError(f"phase2.heads has no {head!r} (registered: {', '.join(self.heads) or 'none'})")
        return self.heads[head]

    def iteration_seeds(self, iteration: int, replicate: int = 0) -> tuple[int, ...]:
        """The training seeds of iteration ``iteration`` (0-based) of replicate ``replicate`` (0-based):
        replicate r's block starts at position r x iterations x seeds_per_iteration, so replicate 0 trains
        on the seeds a design without replicates trains on."""
        if not 0 <= iteration < self.iterations:
            raise ValueError(f"iteration {iteration} is outside 0..{self.iterations - 1}")
        if not 0 <= replicate < self.replicates:
            raise ValueError(f"replicate {replicate} is outside 0..{self.replicates - 1}")
        start = (replicate * self.iterations + iteration) * self.seeds_per_iteration
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
        f"(its guards: {', '.join(declared) or 'none'}){did_you_mean(name, declared)}"
        for name in penalties
        if name not in declared
    ]


def choice_problems(phase2: Phase2, policy_losses: Registry[Any], advantages: Registry[Any]) -> list[str]:
    """A loss or estimator the design names that is not registered, as ``"phase2.<field>: ..."`` with the
    registered names and the closest one (``did you mean``).

    ``policy_losses`` and ``advantages`` are the registries, passed in by the phase-2 package that owns
    them (:func:`grpo_probe.phase2.pilot_choices.pilot_choice_problems`). Why refuse it before anything
    runs: the pilot would otherwise stop at its first update, after the probe's hours.
    """
    problems = []
    for at, name, registry in (
        (POLICY_LOSS_FIELD, phase2.policy_loss, policy_losses),
        (ADVANTAGE_FIELD, phase2.advantage, advantages),
    ):
        try:
            registry.get(name)
        except UnknownName as exc:
            problems.append(f"{at}: {exc}")
    return problems


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
    if len(held_out) < 2:
        problems.append(
            f"phase2.eval_seeds: holds {len(held_out)} seed, but the held-out verdict's paired t interval "
            "needs at least 2 (n - 1 degrees of freedom)"
        )
    if set(train) & set(held_out):
        problems.append(
            f"phase2.eval_seeds: overlaps phase2.train_seeds ({_overlap(held_out, train)}); "
            "held-out seeds must not be trained on"
        )
    replicates = int(section.get("replicates", 1))
    needed = replicates * section["iterations"] * section["seeds_per_iteration"]
    if len(train) != needed and replicates == 1:
        problems.append(
            f"phase2.train_seeds: holds {len(train)} seeds, but iterations x seeds_per_iteration = "
            f"{section['iterations']} x {section['seeds_per_iteration']} = {needed} (each iteration trains "
            "on fresh spawns)"
        )
    elif len(train) != needed:
        problems.append(
            f"phase2.train_seeds: holds {len(train)} seeds, but replicates x iterations x "
            f"seeds_per_iteration = {replicates} x {section['iterations']} x "
            f"{section['seeds_per_iteration']} = {needed} (each replicate trains on spawns of its own)"
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
        if head != "flow" and recipe.get("chunk_logprob", "sum") != "sum":
            problems.append(
                f"{at}.chunk_logprob: only the flow head reduces a chunk's log-prob (the AR head's ratio is "
                "already per token)"
            )
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
            chunk_logprob=str(recipe.get("chunk_logprob", "sum")),
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
        min_guard_variance_share=float(
            reward.get("min_guard_variance_share", DEFAULT_MIN_GUARD_VARIANCE_SHARE)
        ),
        pilot=str(section.get("pilot", "gated")),
        policy_loss=str(section.get("policy_loss", DEFAULT_POLICY_LOSS)),
        advantage=str(section.get("advantage", DEFAULT_ADVANTAGE)),
        replicates=int(section.get("replicates", 1)),
        sampled_draws=int(section["sampled_draws"]) if "sampled_draws" in section else None,
    )
