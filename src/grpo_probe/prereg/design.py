"""The registered design as typed objects, its cross-field rules, and the two entry points on it.

Why: every rule of the workflow starts from :func:`load_prereg`, which refuses a design that is invalid
or that no longer matches its lock before any work is done. The JSON schema checks each field on its own;
the rules that relate fields (a cell's arm exists, its sampling mode fits that arm's head, cell ids are
unique, oracle subsets name registered arms and seeds, demo seeds stay off the probe's seeds) live here.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

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
from grpo_probe.prereg.amendments import Amendment, RegisteredVersion, parse_amendment, registered_versions
from grpo_probe.prereg.canonical import canonical_sha256, read_yaml
from grpo_probe.prereg.lock import (
    LOCK_FORMAT,
    LockError,
    check_lock,
    foreign_lock_problem,
    inherited_amendments_problem,
    lock_path,
    new_lock,
    read_lock,
    utc_now_iso,
    write_lock,
)
from grpo_probe.prereg.phase2 import Phase2, parse_phase2, penalty_problems
from grpo_probe.prereg.replay import ReplaySection, parse_replay, replay_problems
from grpo_probe.prereg.rule import AnalysisNumbers, DecisionRule, parse_analysis_sections
from grpo_probe.prereg.schema import field_path, load_prereg_schema, validate_against
from grpo_probe.prereg.seeds import expand_seeds
from grpo_probe.sampling import PARAMETERS, SamplingMode, mode_params, sampler, sampling_kinds
from grpo_probe.sampling.lab_modules import SamplerModuleError, load_sampler_module

__all__ = [
    "Amendment",
    "Arm",
    "Cell",
    "ComputeGate",
    "LockOutcome",
    "Oracles",
    "ParallelOracle",
    "Prereg",
    "PreregError",
    "RegisteredVersion",
    "Training",
    "design_environment",
    "design_problems",
    "environment_problems",
    "expand_seeds",
    "load_prereg",
    "lock_prereg",
    "prereg_from_mapping",
    "read_valid_prereg",
    "register_design_samplers",
    "split_seeds",
]


class PreregError(ValueError):
    """A design breaks a cross-field rule; the message names the file and the field."""


@dataclass(frozen=True)
class Arm:
    """A registered policy arm; config binds it to a checkpoint."""

    id: str
    head: str
    checkpoint_sha256: str | None
    description: str
    anchor: SamplingMode
    """The deterministic sampler of the arm's anchor rows (AR greedy; flow Heun draw 0), registered."""
    inputs: tuple[str, ...] = (OBSERVATION_STATE,)
    """Observation keys the arm's policy reads (``arms.<id>.inputs``; the state alone by default)."""
    row_block: int | None = None
    """AR arms: rows decoded together in one fixed, padded block (``arms.<id>.row_block``); None = the
    head's default of 8."""

    @property
    def reads_images(self) -> bool:
        """True when the arm's policy reads a camera frame."""
        return any(k.startswith("observation.images.") for k in self.inputs)


@dataclass(frozen=True)
class Cell:
    """A probe cell: every seed, ``group_size`` draws, one arm (of ``head``), one stochastic mode."""

    id: str
    arm: str
    head: str
    mode: SamplingMode
    optional: bool
    enabled: bool
    description: str

    def mode_text(self) -> str:
        """``temperature (temperature=1.6)``: the sampling mode as decision.md prints it (the parameters
        its kind takes, :func:`grpo_probe.sampling.mode_params`, by name)."""
        shown = ", ".join(f"{k}={v}" for k, v in sorted(mode_params(self.mode).items()))
        return f"{self.mode.kind} ({shown})" if shown else self.mode.kind


@dataclass(frozen=True)
class Training:
    """How the reference checkpoints are trained."""

    demo_seeds: tuple[int, ...]
    demo_noise: float
    arms: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class ParallelOracle:
    """Subset on which the parallel rollout path must equal the sequential one byte for byte."""

    arms: tuple[str, ...]
    modes: tuple[SamplingMode, ...]
    seeds: tuple[int, ...]
    draws: int
    workers: int


@dataclass(frozen=True)
class Oracles:
    """The registered bit-identity oracles."""

    parallel: ParallelOracle
    draw0_seeds: tuple[int, ...]


@dataclass(frozen=True)
class ComputeGate:
    """The registered compute budget of a whole run."""

    cpu_hours: float
    gpu_hours: float
    description: str = ""


@dataclass(frozen=True)
class Prereg:
    """A validated (and, unless asked otherwise, lock-checked) registered design."""

    path: Path
    name: str
    description: str
    run_key: int
    sim: SimParams | None
    """The boat scene's registered numbers; None when the design runs another environment."""
    env: EnvConfig
    """The environment every episode runs in (``env:``, or the boat scene named by ``sim:``)."""
    seeds: tuple[int, ...]
    group_size: int
    arms: dict[str, Arm]
    training: Training
    cells: tuple[Cell, ...]
    oracles: Oracles
    analysis: AnalysisNumbers
    decision_rule: DecisionRule
    compute_gate: ComputeGate
    amendments: tuple[Amendment, ...]
    sha256: str
    lock_date: str | None
    phase2: Phase2 | None = None
    """The registered phase-2 pilot (``phase2:``); None when the design registers none."""
    observation: ObservationConfig = field(default_factory=ObservationConfig)
    """The registered task and cameras (``observation:``); none by default."""
    replay: ReplaySection | None = None
    """The registered replays that separate choice from chaos (``replay:``); None when none are."""
    samplers: tuple[str, ...] = ()
    """The lab's modules that register sampling kinds (``samplers:``), imported before the design was
    checked (:func:`register_design_samplers`)."""
    sampler_modules: tuple[str, ...] = ()
    """Every module the design's own kinds are read from: each of :attr:`samplers` and the
    ``entry_module`` of each kind they register. Their code is an input of every job and a source of every
    manifest (:func:`grpo_probe.user_code.module_files`)."""
    history: tuple[Mapping[str, Any], ...] = field(default=(), repr=False, compare=False)
    """The lock's record of every version (hash and date), for :attr:`versions`."""
    raw: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    """The design as parsed from its file, for :attr:`versions`."""
    schema_dir: str | os.PathLike[str] | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def versions(self) -> tuple[RegisteredVersion, ...]:
        """Every registered version (0 = original registration, last = this design), rebuilt from this
        file by undoing the amendments' ``replaces`` and checked against the hashes the lock recorded.

        Why built on first use: rebuilding every version re-validates each one (its schema, its rule), and
        only the jobs that report the versions (the decision, the audit) read them; every other job of
        the workflow loads the design and never asks.
        """
        if self.raw is None:
            return ()
        return registered_versions(self.raw, str(self.path), self.history, self.schema_dir)

    @property
    def enabled_cells(self) -> tuple[Cell, ...]:
        """Cells the workflow runs, in registered order."""
        return tuple(c for c in self.cells if c.enabled)

    def cell(self, cell_id: str) -> Cell:
        """The cell with this id; a ``KeyError`` names the known ids."""
        for c in self.cells:
            if c.id == cell_id:
                return c
        raise KeyError(f"{self.path}: no cell {cell_id!r} (cells: {', '.join(c.id for c in self.cells)})")

    def arm_head(self, arm: str) -> str:
        """The head of a registered arm."""
        return self.arms[arm].head

    def arms_in_use(self) -> tuple[str, ...]:
        """Arms an enabled cell or the parallel oracle needs, in registered arm order."""
        used = {c.arm for c in self.enabled_cells} | set(self.oracles.parallel.arms)
        return tuple(a for a in self.arms if a in used)


def split_seeds(seeds: Sequence[int], seeds_per_shard: int) -> list[tuple[int, ...]]:
    """Shards by index: consecutive runs of at most ``seeds_per_shard`` seeds in the given order.

    Shard ``i`` holds positions ``i * seeds_per_shard`` onward of the registered seed list, whatever the
    seeds' values or order, so no seed can fall in two shards.
    """
    if isinstance(seeds_per_shard, bool) or not isinstance(seeds_per_shard, int) or seeds_per_shard < 1:
        raise ValueError(f"seeds_per_shard must be an integer >= 1, got {seeds_per_shard!r}")
    seeds = tuple(seeds)
    return [seeds[i : i + seeds_per_shard] for i in range(0, len(seeds), seeds_per_shard)]


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
        for camera in observation.cameras:
            if camera.name not in env_cameras:
                problems.append(
                    f"observation.cameras.{camera.name}: the environment renders no camera {camera.name!r} "
                    f"(its cameras: {', '.join(env_cameras) or 'none'})"
                )
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
    """The design's environment: ``env: {id, params}``, or the boat scene its ``sim:`` section describes.

    ``where`` (the prereg's path) prefixes the field in errors. Raises ``ValueError`` on invalid params.
    """
    prefix = f"{where}: " if str(where) else ""
    if "env" in raw:
        env = raw["env"]
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
    step, which builds it (:func:`grpo_probe.probe_jobs.prepare.prereg_check`).
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


def read_valid_prereg(
    path: str | os.PathLike[str], schema_dir: str | os.PathLike[str] | None = None
) -> tuple[dict[str, Any], str]:
    """Parse and validate a prereg (schema, then cross-field rules); return it with its canonical sha256."""
    raw, valid = _read_valid(Path(path), schema_dir)
    return raw, valid.sha256


class _Valid(NamedTuple):
    """What validating a design produced: its canonical sha256 and the sections that validate by parsing."""

    sha256: str
    analysis: AnalysisNumbers
    rule: DecisionRule
    phase2: Phase2 | None
    replay: ReplaySection | None
    sampler_modules: tuple[str, ...]


def _missing_design(path: Path) -> FileNotFoundError:
    """A design file that does not exist, with the designs that do (beside it, else under prereg/)."""
    folder = path.parent if path.parent.is_dir() else Path("prereg")
    found = sorted(p.as_posix() for p in folder.glob("*.yaml")) if folder.is_dir() else []
    listed = f"the designs in {folder.as_posix()}/ are {', '.join(found)}" if found else "no design is there"
    return FileNotFoundError(f"{path}: no such design file; {listed}")


def _read_valid(path: Path, schema_dir: str | os.PathLike[str] | None) -> tuple[dict[str, Any], _Valid]:
    if not path.is_file():
        raise _missing_design(path)
    raw = read_yaml(path)
    return raw, _validate(raw, path, schema_dir)


def register_design_samplers(raw: Mapping[str, Any], path: str | os.PathLike[str]) -> tuple[str, ...]:
    """Import the modules the design's ``samplers:`` names, so their kinds are registered; return the
    modules their kinds are read from (:attr:`Prereg.sampler_modules`).

    Why before the schema: the schema's enum of kinds is the registry, so a cell of a lab's kind is valid
    only once its module has run. Every process that reads the design (Snakemake, each job, ``grpo-probe
    check-policy``) comes through here. A module that fails to import, registers nothing, registers a kind
    twice or a built-in's name is refused, each line naming the file, the field and the module.
    """
    modules = raw.get("samplers", [])
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise PreregError(f'{path}: samplers: a list of module names (["labpolicies.ddim"]), got {modules!r}')
    problems = []
    read_from: list[str] = []
    for i, module in enumerate(modules):
        if module in modules[:i]:
            problems.append(
                f"{path}: samplers[{i}]: {module!r} is listed twice (first at samplers"
                f"[{modules.index(module)}])"
            )
            continue
        try:
            kinds = load_sampler_module(module)
        except SamplerModuleError as exc:
            problems.append(f"{path}: samplers[{i}]: module {exc}")
            continue
        read_from += [module, *(sampler(k).entry_module for k in kinds)]
    if problems:
        raise PreregError("\n".join(problems))
    return tuple(dict.fromkeys(read_from))


def _validate(raw: Any, path: Path, schema_dir: str | os.PathLike[str] | None) -> _Valid:
    """The lab's samplers, the schema, cross-field rules, then the sections that validate themselves as
    they are parsed (criteria named in ``qualifies`` exist; phase 2's seed sets are disjoint, ...): parsed
    once, here, and kept."""
    if not isinstance(raw, dict):
        raise PreregError(f"{path}: a prereg must be a YAML mapping, got {type(raw).__name__}")
    sampler_modules = register_design_samplers(raw, path)
    validate_against(raw, load_prereg_schema(schema_dir), str(path), shipped=schema_dir is None)
    try:
        analysis, rule = parse_analysis_sections(raw, str(path), schema_dir)
        unparsed: list[str] = []
    except ValueError as exc:  # its lines name the file already
        analysis, rule, unparsed = None, None, str(exc).splitlines()
    replay = parse_replay(raw, expand_seeds(raw["seeds"]))
    problems = [f"{path}: {p}" for p in design_problems(raw, rule, replay)] + unparsed
    if problems or analysis is None or rule is None:
        raise PreregError("\n".join(problems))
    phase2 = parse_phase2(raw, str(path))
    try:
        sha = canonical_sha256(raw)
    except ValueError as exc:  # NaN or infinity has no canonical JSON form
        raise PreregError(f"{path}: {exc}") from None
    return _Valid(sha, analysis, rule, phase2, replay, sampler_modules)


def _build(
    path: Path,
    raw: dict[str, Any],
    valid: _Valid,
    lock_date: str | None,
    history: Sequence[Mapping[str, Any]] = (),
    schema_dir: str | os.PathLike[str] | None = None,
) -> Prereg:
    parallel = raw["oracles"]["parallel"]
    gate = raw["compute_gate"]
    env = design_environment(raw, path)
    arms = {
        arm_id: Arm(
            arm_id,
            a["head"],
            a["checkpoint_sha256"],
            a["description"],
            SamplingMode.from_dict(a["anchor"]),
            tuple(a.get("inputs", (OBSERVATION_STATE,))),
            a.get("row_block"),
        )
        for arm_id, a in raw["arms"].items()
    }
    return Prereg(
        path=path,
        name=raw["name"],
        description=raw["description"],
        run_key=raw["run_key"],
        sim=env.params if env.id == BOAT_ID else None,
        env=env,
        seeds=expand_seeds(raw["seeds"]),
        group_size=raw["group_size"],
        arms=arms,
        training=Training(
            demo_seeds=expand_seeds(raw["training"]["demos"]["seeds"]),
            demo_noise=float(raw["training"]["demos"]["noise"]),
            arms={arm: dict(settings) for arm, settings in raw["training"]["arms"].items()},
        ),
        cells=tuple(
            Cell(
                c["id"],
                c["arm"],
                arms[c["arm"]].head,
                SamplingMode.from_dict(c["mode"]),
                c["optional"],
                c["enabled"],
                c["description"],
            )
            for c in raw["cells"]
        ),
        oracles=Oracles(
            parallel=ParallelOracle(
                arms=tuple(parallel["arms"]),
                modes=tuple(SamplingMode.from_dict(m) for m in parallel["modes"]),
                seeds=tuple(parallel["seeds"]),
                draws=parallel["draws"],
                workers=parallel["workers"],
            ),
            draw0_seeds=tuple(raw["oracles"]["draw0"]["seeds"]),
        ),
        analysis=valid.analysis,
        decision_rule=valid.rule,
        compute_gate=ComputeGate(
            float(gate["cpu_hours"]), float(gate["gpu_hours"]), gate.get("description", "")
        ),
        amendments=tuple(parse_amendment(a) for a in raw["amendments"]),
        sha256=valid.sha256,
        lock_date=lock_date,
        history=tuple(history),
        raw=raw,
        schema_dir=schema_dir,
        phase2=valid.phase2,
        observation=ObservationConfig.from_dict(raw.get("observation"), f"{path}: observation"),
        replay=valid.replay,
        samplers=tuple(raw.get("samplers", ())),
        sampler_modules=valid.sampler_modules,
    )


def prereg_from_mapping(
    raw: Mapping[str, Any], path: str | os.PathLike[str], schema_dir: str | os.PathLike[str] | None = None
) -> Prereg:
    """A validated, unlocked :class:`Prereg` from an in-memory design (``path`` names it in errors).

    For designs built by code (tests, a design table rebuilt at another registered version); a design
    the workflow runs comes from :func:`load_prereg`, which also checks the lock.
    """
    path = Path(path)
    raw = dict(raw)
    return _build(path, raw, _validate(raw, path, schema_dir), None, schema_dir=schema_dir)


def load_prereg(
    path: str | os.PathLike[str],
    require_lock: bool = True,
    schema_dir: str | os.PathLike[str] | None = None,
) -> Prereg:
    """Load a registered design; with ``require_lock`` it must match ``<path>.lock`` or nothing runs.

    Raises ``ValueError`` subclasses whose message names the file and the field (schema and cross-field
    rules) or the prereg and its lock and how to amend (lock mismatch).
    """
    path = Path(path)
    raw, valid = _read_valid(path, schema_dir)
    lock_date = None
    history: list[dict[str, Any]] = []
    if require_lock:
        lock = check_lock(path, raw)
        lock_date, history = lock["date"], lock["versions"]
    elif lock_path(path).exists():
        lock = read_lock(lock_path(path))
        if lock["sha256"] == valid.sha256:
            lock_date, history = lock["date"], lock["versions"]
    return _build(path, raw, valid, lock_date, history, schema_dir)


@dataclass(frozen=True)
class LockOutcome:
    """What :func:`lock_prereg` did."""

    lock_path: Path
    lock: dict[str, Any]
    written: bool
    message: str


def lock_prereg(
    path: str | os.PathLike[str],
    schema_dir: str | os.PathLike[str] | None = None,
    date: str | None = None,
    *,
    earlier_locks: Sequence[str | os.PathLike[str]] = (),
    results_hashes: Mapping[str, Sequence[str]] | None = None,
    keep_amendments: bool = True,
) -> LockOutcome:
    """Lock a valid design, or re-lock it after an appended amendment; refuse any other change.

    Locking an unchanged design leaves the existing lock (and its date) untouched. ``earlier_locks``:
    older lock files of this design (e.g. taken from version control) whose versions enter the lock's
    history, each verified by rebuilding it from this file. ``results_hashes``: prereg sha256 -> the
    manifests under the results folder that carry it; an amendment saying ``after_results: false`` is
    refused when results of an earlier version exist (``grpo-probe prereg lock`` collects them).
    ``keep_amendments=False`` (the command line's default) refuses a first lock of a design that lists
    amendments, has no earlier lock and no results: a copy of another design, whose amendments would
    become its history. A lock of another file with another design (copied with it) is always refused.
    """
    path = Path(path)
    raw, sha = read_valid_prereg(path, schema_dir)
    target = lock_path(path)
    old = read_lock(target) if target.exists() else None
    if old is not None and old["file"] != path.name and old["sha256"] != sha:
        raise LockError(foreign_lock_problem(path, old))
    if not keep_amendments and old is None and not earlier_locks and not results_hashes and raw["amendments"]:
        raise LockError(inherited_amendments_problem(path, raw))
    unchanged = old is not None and old["sha256"] == sha and old["file"] == path.name
    if unchanged and old is not None and old["format"] == LOCK_FORMAT and not earlier_locks:
        return LockOutcome(target, old, False, f"{path}: unchanged since its lock {target} ({old['date']})")
    earlier = [(str(p), read_lock(p)) for p in earlier_locks]
    when = old["date"] if unchanged and old is not None else date or utc_now_iso()
    lock, notes = new_lock(path, raw, old, when, earlier, results_hashes)
    write_lock(target, lock)
    verb = "re-locked" if old is not None else "locked"
    lines = [f"{path}: {verb} as {sha} in {target} ({lock['amendments']} amendments)", *notes]
    return LockOutcome(target, lock, True, "\n  ".join(lines))
