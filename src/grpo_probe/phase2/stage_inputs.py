"""What a phase-2 job of one stage starts from: the design, the plan that trains its arm, and theta_0.

Why a module of its own: every job of a stage (``phase2_rollouts``, ``phase2_train``, each
``phase2_replicate``, ``phase2_eval``) refuses the same things in the same words before it runs an
episode: a plan written for another design, an arm the plan does not train, a design whose loss or
estimator is not registered, and an arm whose checkpoint phase 2 cannot train. Imports nothing heavy
(no torch): the checks run before the training modules load.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_probe.phase2.gate import Phase2Plan, read_plan
from grpo_probe.prereg import Prereg, load_prereg
from grpo_probe.prereg.phase2 import Phase2

__all__ = [
    "OWN_CHECKPOINT_FACTORIES",
    "StageInputs",
    "design_and_plan",
    "initial_checkpoint",
    "load_stage",
    "registered_phase2",
    "stage_inputs",
]

PathLike = str | os.PathLike[str]

OWN_CHECKPOINT_FACTORIES = (None, "grpo_probe.policies.checkpoint:load_policy")
"""Bindings phase 2 can train: this package's checkpoint format (a user adapter's weights it cannot see)."""


def design_and_plan(prereg_path: PathLike, plan_json: PathLike) -> tuple[Prereg, Phase2Plan]:
    """The prereg and the plan; the plan must be this design's (written for its sha256)."""
    prereg = load_prereg(prereg_path)
    plan = read_plan(plan_json)
    if plan.prereg_sha256 != prereg.sha256:
        raise ValueError(
            f"{plan_json}: written for prereg sha256 {plan.prereg_sha256}, "
            f"but {prereg.path} is {prereg.sha256}"
        )
    return prereg, plan


def load_stage(prereg_path: PathLike, plan_json: PathLike, arm: str) -> tuple[Prereg, Phase2Plan]:
    """The prereg and the plan; the plan must be this design's and must train ``arm``."""
    prereg, plan = design_and_plan(prereg_path, plan_json)
    plan.stage(arm)
    return prereg, plan


def registered_phase2(prereg: Prereg) -> Phase2:
    """The design's phase2 section (a plan with stages exists only for a design that registers one)."""
    if prereg.phase2 is None:
        raise ValueError(f"{prereg.path}: the design registers no phase2 section")
    return prereg.phase2


def initial_checkpoint(source: PathLike, checkpoint: PathLike, arm: str) -> str:
    """theta_0: the checkpoint the arm is bound to, which phase 2 must be able to train.

    ``checkpoint`` is the file the rule declares (so Snakemake stages it); ``source`` is the arm's binding,
    which must name that same file. An arm bound through a user's adapter is refused by what its policy
    declares (the capabilities its source.json records, :func:`_capability_refusal`) before any phase-2
    episode runs.
    """
    recipe = json.loads(Path(source).read_text())
    if recipe.get("address"):
        from grpo_probe.policies.check import served_refusal

        raise ValueError(f"{source}: {served_refusal(arm, recipe['address'])}; phase 2 does not start")
    if recipe.get("factory") not in OWN_CHECKPOINT_FACTORIES:
        raise ValueError(_capability_refusal(source, recipe, arm))
    if not recipe.get("checkpoint"):
        raise ValueError(f"{source}: arm {arm!r} records no checkpoint for phase 2 to start from")
    if Path(recipe["checkpoint"]).resolve() != Path(checkpoint).resolve():
        raise ValueError(
            f"{source}: arm {arm!r} is bound to {recipe['checkpoint']}, but the rule declares {checkpoint}"
        )
    return str(checkpoint)


def _capability_refusal(source: PathLike, recipe: dict[str, Any], arm: str) -> str:
    """Why phase 2 cannot train an arm bound through a user's adapter, in the words the binding step
    printed (:func:`grpo_probe.policies.check.phase2_refusal`): the trainable parameters and log-probs
    its policy lacks, or, for one that declares both, the checkpoint format phase 2's trainer reads."""
    from grpo_probe.policies.check import phase2_refusal
    from grpo_probe.policies.protocol import LOGPROBS_OF_HEAD, PolicyCapabilities

    declared = recipe.get("capabilities")
    capabilities = (
        None if declared is None else PolicyCapabilities.from_dict(declared, f"{source}: capabilities")
    )
    head = recipe.get("head") or (capabilities.head if capabilities is not None else None)
    factory = recipe.get("factory")
    if head not in LOGPROBS_OF_HEAD:
        return (
            f"{source}: arm {arm!r} is bound through adapter {factory!r}, and its binding records neither "
            "the policy's head nor its capabilities; phase 2 trains only checkpoints in grpo-probe's own "
            "format (bind the arm again, or with source: reference or load_policy)"
        )
    policy = recipe.get("policy") or "a policy whose class the binding does not record"
    refusal = phase2_refusal(arm, head, factory, policy, capabilities)
    return f"{source}: {refusal}; phase 2 does not start"


@dataclass(frozen=True)
class StageInputs:
    """What a job that trains a stage's arm starts from, checked."""

    prereg: Prereg
    phase2: Phase2
    initial: Path
    """theta_0, the arm's own checkpoint (:func:`initial_checkpoint`)."""


def stage_inputs(
    prereg_path: PathLike, plan_json: PathLike, arm: str, source: PathLike, checkpoint: PathLike
) -> StageInputs:
    """The design, its phase2 section and theta_0 of a job that trains ``arm``: the plan must be the
    design's and train the arm, the design's loss and estimator registered
    (:func:`grpo_probe.phase2.pilot_choices.check_pilot_choices`), the checkpoint one phase 2 can train."""
    from grpo_probe.phase2.pilot_choices import check_pilot_choices

    prereg, _ = load_stage(prereg_path, plan_json, arm)
    phase2 = registered_phase2(prereg)
    check_pilot_choices(prereg)
    return StageInputs(prereg, phase2, Path(initial_checkpoint(source, checkpoint, arm)))
