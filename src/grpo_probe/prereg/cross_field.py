"""The rules that relate a design's fields, which the JSON schema (one field at a time) cannot state.

Why a module of their own: the schema checks each field alone; these check the fields against each
other (a cell's arm exists, its sampling mode fits that arm's head, cell ids are unique, oracle subsets
name registered arms and seeds, demo seeds stay off the probe's seeds) and against the environment the
design names (a guard the rule reads is one the environment defines, a camera an arm reads is one it
renders). :func:`grpo_probe.prereg.design.load_prereg` runs them on every schema-valid design, after its
shared files are merged in, and reports every problem at once, each as ``"<field path>: <problem>"``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.boat.spec import BOAT_ID
from grpo_probe.envs.observation import (
    OBSERVATION_STATE,
    ObservationConfig,
    observation_problems,
    split_problems,
)
from grpo_probe.envs.protocol import EnvSpec
from grpo_probe.envs.registry import EnvConfig, env_config, env_spec, is_builtin
from grpo_probe.name_registry import did_you_mean
from grpo_probe.prereg.phase2 import penalty_problems
from grpo_probe.prereg.replay import ReplaySection, replay_problems
from grpo_probe.prereg.rule import DecisionRule
from grpo_probe.prereg.schema import field_path
from grpo_probe.prereg.seeds import expand_seeds
from grpo_probe.sampling import PARAMETERS, SamplingMode, sampler, sampling_kinds

__all__ = ["design_environment", "design_problems", "environment_problems"]


def _mode_problems(mode: Mapping[str, Any], at: str) -> list[str]:
    """A parameter the mode's kind does not take (:mod:`grpo_probe.sampling` declares what each takes)."""
    kind = mode["kind"]
    takes = sampler(kind).takes
    problems = []
    for name in PARAMETERS:
        if name in mode and name not in takes:
            allowed = [k for k in sampling_kinds() if name in sampler(k).takes]
            problems.append(
                f"{at}.{name}: only allowed for kind {' or '.join(map(repr, allowed))} (kind is {kind!r})"
            )
    return problems


def _anchor_kinds() -> tuple[str, ...]:
    """Deterministic samplers an anchor may use: AR greedy; flow draw 0 of the keyed noise (Heun or Euler)."""
    return tuple(k for k in sampling_kinds() if sampler(k).deterministic)


def _duplicate_problems(seeds: Sequence[int], at: str) -> list[str]:
    first: dict[int, int] = {}
    problems = []
    for i, seed in enumerate(seeds):
        if seed in first:
            problems.append(f"{at}[{i}]: seed {seed} is registered twice (first at {at}[{first[seed]}])")
        first.setdefault(seed, i)
    return problems


def _subset_problems(seeds: Sequence[int], registered: Sequence[int], at: str) -> list[str]:
    known = set(registered)
    return [
        f"{at}[{i}]: seed {s} is not one of the registered seeds"
        for i, s in enumerate(seeds)
        if s not in known
    ]


def design_problems(
    raw: Mapping[str, Any], rule: DecisionRule | None = None, replay: ReplaySection | None = None
) -> list[str]:
    """Cross-field rule violations of a schema-valid design, each as ``"<field path>: <problem>"``.

    ``rule`` and ``replay``: the design's sections as already parsed (one parse per load); without a
    rule, what the rule reads is not checked against the environment.
    """
    problems: list[str] = []
    arms: Mapping[str, Any] = raw["arms"]
    arm_list = ", ".join(arms)
    seeds = expand_seeds(raw["seeds"])
    problems += _duplicate_problems(seeds, "seeds")
    problems += _duplicate_problems(expand_seeds(raw["training"]["demos"]["seeds"]), "training.demos.seeds")

    for arm_id, arm in arms.items():
        at = f"arms.{arm_id}.anchor"
        problems += _mode_problems(arm["anchor"], at)
        kind = arm["anchor"]["kind"]
        if sampler(kind).head != arm["head"]:
            problems.append(
                f"{at}.kind: {kind!r} samples the {sampler(kind).head} head, "
                f"but the arm's head is {arm['head']!r}"
            )
        elif not sampler(kind).deterministic:
            problems.append(
                f"{at}.kind: an anchor is deterministic; {kind!r} is not "
                f"(use one of {', '.join(_anchor_kinds())})"
            )

    problems += _environment_section_problems(raw, rule, replay)
    problems += _observation_problems(raw)

    seen: dict[str, int] = {}
    for i, cell in enumerate(raw["cells"]):
        at = field_path(("cells", i), raw)  # cells[<id>], or cells[<index>] where two share an id
        if cell["id"] in seen:
            problems.append(f"{at}.id: {cell['id']!r} is already the id of cells[{seen[cell['id']]}]")
        seen.setdefault(cell["id"], i)
        if cell["arm"] not in arms:
            problems.append(f"{at}.arm: {cell['arm']!r} is not one of the arms ({arm_list})")
        else:
            head = arms[cell["arm"]]["head"]
            kind = cell["mode"]["kind"]
            if sampler(kind).head != head:
                problems.append(
                    f"{at}.mode.kind: {kind!r} samples the {sampler(kind).head} head, "
                    f"but arm {cell['arm']!r} has head {head!r}"
                )
        problems += _mode_problems(cell["mode"], f"{at}.mode")
        kind = cell["mode"]["kind"]
        if cell["arm"] in arms and sampler(kind).deterministic:
            anchor = SamplingMode.from_dict(arms[cell["arm"]]["anchor"])
            if anchor != SamplingMode.from_dict(cell["mode"]):
                problems.append(
                    f"{at}.mode: the draw-0 oracle compares draw 0 of a {kind} cell with its arm's anchor "
                    f"rows, so the mode must equal arms.{cell['arm']}.anchor ({anchor.kind}, "
                    f"steps={anchor.steps})"
                )
        if not cell["optional"] and not cell["enabled"]:
            problems.append(f"{at}.enabled: a required cell (optional: false) must be enabled")
    if not any(cell["enabled"] for cell in raw["cells"]):
        problems.append("cells: no cell is enabled")

    training_arms: Mapping[str, Any] = raw["training"]["arms"]
    for arm in training_arms:
        if arm not in arms:
            problems.append(f"training.arms.{arm}: {arm!r} is not one of the arms ({arm_list})")
    for arm in arms:
        if arm not in training_arms:
            problems.append(f"training.arms: no trainer settings for arm {arm!r}")
    overlap = sorted(set(expand_seeds(raw["training"]["demos"]["seeds"])) & set(seeds))
    if overlap:
        problems.append(
            f"training.demos.seeds: overlaps the probe's seeds ({', '.join(map(str, overlap[:5]))}"
            f"{', ...' if len(overlap) > 5 else ''}); demos must not be drawn from evaluation spawns"
        )

    parallel = raw["oracles"]["parallel"]
    for i, arm in enumerate(parallel["arms"]):
        if arm not in arms:
            problems.append(f"oracles.parallel.arms[{i}]: {arm!r} is not one of the arms ({arm_list})")
    oracle_heads = {arms[a]["head"] for a in parallel["arms"] if a in arms}
    for i, mode in enumerate(parallel["modes"]):
        at = f"oracles.parallel.modes[{i}]"
        problems += _mode_problems(mode, at)
        if sampler(mode["kind"]).head not in oracle_heads:
            problems.append(
                f"{at}.kind: {mode['kind']!r} fits none of the oracle's arms ({', '.join(parallel['arms'])})"
            )
    problems += _subset_problems(parallel["seeds"], seeds, "oracles.parallel.seeds")
    problems += _subset_problems(raw["oracles"]["draw0"]["seeds"], seeds, "oracles.draw0.seeds")
    problems += _duplicate_problems(parallel["seeds"], "oracles.parallel.seeds")
    problems += _duplicate_problems(raw["oracles"]["draw0"]["seeds"], "oracles.draw0.seeds")
    problems += replay_problems(raw, seeds)
    return problems


_ENGAGEMENT_READS = ("sampled_engagement_rate", "anchor_engagement_rate")


def camera_problems(observation: ObservationConfig, env_cameras: Sequence[str]) -> list[str]:
    """Each registered camera (``observation.cameras.<name>``) the environment does not render."""
    return [
        f"observation.cameras.{camera.name}: the environment renders no camera {camera.name!r} "
        f"(its cameras: {', '.join(env_cameras) or 'none'})"
        for camera in observation.cameras
        if camera.name not in env_cameras
    ]


def _observation_problems(raw: Mapping[str, Any]) -> list[str]:
    """Each registered camera and each arm's inputs: keys the design registers and, for a built-in
    environment (whose cameras are known without building it), ones it renders."""
    try:
        observation = ObservationConfig.from_dict(raw.get("observation"), "observation")
    except ValueError as exc:
        return [str(exc)]
    env_cameras: tuple[str, ...] | None = None
    problems = []
    try:
        config = design_environment(raw)
        if is_builtin(config.id):
            spec = env_spec(config)
            env_cameras = spec.cameras
            problems += split_problems(observation, spec.state_entries, config.id)
    except (KeyError, ValueError):
        pass  # the environment section's own check names the problem
    if env_cameras is not None:
        problems += camera_problems(observation, env_cameras)
    for arm_id, arm in raw["arms"].items():
        inputs = arm.get("inputs", [OBSERVATION_STATE])
        cameras = env_cameras if env_cameras is not None else [c.name for c in observation.cameras]
        problems += observation_problems(inputs, observation, cameras, f"arms.{arm_id}.inputs")
        if arm["head"] != "ar" and arm.get("row_block") is not None:
            problems.append(
                f"arms.{arm_id}.row_block: only the AR head decodes in a registered row block; the flow "
                "heads compute in blocks of 8"
            )
        if arm["head"] == "ar" and any(k.startswith("observation.images.") for k in inputs):
            problems.append(
                f"arms.{arm_id}.inputs: the AR head reads the state only; a camera-fed arm has head 'flow'"
            )
    if raw.get("phase2") is not None and observation.lerobot:
        problems.append(
            "phase2: the phase-2 pilot replays the packed state; a design with observation.convention: "
            "lerobot is probed, not yet piloted"
        )
    if raw.get("phase2") is not None:  # the pilot trains the state-only heads and the one-camera flow head
        for arm_id, arm in raw["arms"].items():
            frames = [k for k in arm.get("inputs", []) if k.startswith("observation.images.")]
            if len(frames) > 1:
                problems.append(
                    f"phase2: arm {arm_id} reads {len(frames)} cameras ({', '.join(frames)}); the phase-2 "
                    "pilot trains the camera-fed flow head, which reads one"
                )
    return problems


def design_environment(raw: Mapping[str, Any], where: str | os.PathLike[str] = "") -> EnvConfig:
    """The design's environment: ``env: {id, params}``, ``env: {source: server, address, params}`` (a
    simulator served from its own environment, :mod:`grpo_probe.envs.served`), or the boat scene its
    ``sim:`` section describes.

    ``where`` (the prereg's path) prefixes the field in errors. Raises ``ValueError`` on invalid params.
    """
    prefix = f"{where}: " if str(where) else ""
    if "env" in raw:
        env = raw["env"]
        if env.get("source") == "server":  # a simulator served from its own environment
            from grpo_probe.envs.served import SERVED_FACTORY, served_env_config

            return env_config(SERVED_FACTORY, served_env_config(env, f"{prefix}env"), f"{prefix}env")
        return env_config(env["id"], env["params"], f"{prefix}env")
    return EnvConfig(BOAT_ID, SimParams.from_dict(raw["sim"]), f"{prefix}sim")


def _environment_section_problems(
    raw: Mapping[str, Any], rule: DecisionRule | None, replay: ReplaySection | None
) -> list[str]:
    if "env" in raw and "sim" in raw:
        return [
            "env, sim: a design names its environment once: env: {id, params}, or the boat scene's sim: "
            "section alone (env: {id: boat_push, params: ...} takes the same numbers)"
        ]
    if "env" not in raw and "sim" not in raw:
        return [
            "env: missing: name the environment (env: {id, params}), or give the boat scene's sim: section"
        ]
    try:
        config = design_environment(raw)
    except ValueError as exc:
        return [str(exc)]
    if not is_builtin(config.id):
        return []
    if rule is None:
        return []  # the rule did not parse: its own problem is reported beside these
    phase2 = raw.get("phase2")
    penalties = None if phase2 is None else phase2["reward"]["penalties"]
    return environment_problems(rule, penalties, env_spec(config), replay)


def environment_problems(
    rule: DecisionRule,
    phase2_penalties: Mapping[str, float] | bool | None,
    spec: EnvSpec,
    replay: ReplaySection | None = None,
) -> list[str]:
    """What the design reads that its environment does not define, each as ``"<field>: <problem>"``.

    The decision rule may read a guard's rates (``sampled_<guard>_rate``, ``anchor_<guard>_rate``) only
    for a guard the environment defines, and the phase-2 reward may penalise only such a guard
    (``phase2_penalties``: the registered ``phase2.reward.penalties``; a bool, whether the design
    registers phase 2, names no penalty to check, and the ``phase2_plan`` step checks them then).
    A built-in environment is checked with the rest of the design; a user's factory by the prereg_check
    step, which builds it (:func:`grpo_probe.probe_jobs.prereg_check`).
    """
    problems: list[str] = []
    guards = set(spec.guard_names)

    def check(read: str, at: str) -> None:
        for side in ("sampled_", "anchor_"):
            if read.startswith(side) and read.endswith("_rate") and read not in _ENGAGEMENT_READS:
                guard = read[len(side) : -len("_rate")]
                if guard not in guards:
                    problems.append(
                        f"{at}: {read!r} reads guard {guard!r}, which environment {spec.id!r} does not "
                        f"define (its guards: {', '.join(spec.guard_names)})"
                        + did_you_mean(guard, spec.guard_names)
                    )

    for criterion in rule.criteria:
        for i, condition in enumerate(criterion.all_of):
            check(condition.read, f"decision_rule.criteria.{criterion.name}.all_of[{i}].read")
            if condition.threshold_read is not None:
                at = f"decision_rule.criteria.{criterion.name}.all_of[{i}].threshold.read"
                check(condition.threshold_read.name, at)
    for i, key in enumerate(rule.rank_by):
        check(key.read, f"decision_rule.arm_choice.rank_by[{i}].read")
    if isinstance(phase2_penalties, Mapping):
        problems += penalty_problems(phase2_penalties, spec)
    for i, perturbation in enumerate(replay.perturbations if replay is not None else ()):
        if perturbation.kind == "state" and spec.state_perturbation is None:
            problems.append(
                f"replay.perturbations[{i}].kind: 'state' asks environment {spec.id!r} to shift its spawn, "
                "which it does not offer (no perturb_state: its spec.state_perturbation is None); register "
                "kind: action, which the engine applies in any environment"
            )
    return problems
