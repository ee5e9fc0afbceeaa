"""The registered design as typed objects, and the entry points that read, check and lock it.

Why: every rule of the workflow starts from :func:`load_prereg`, which refuses a design that is invalid
or that no longer matches its lock before any work is done. A design is read, merged with the shared
files it extends (:mod:`grpo_probe.prereg.extends`), checked against the JSON schema field by field and
against the rules that relate fields (:mod:`grpo_probe.prereg.cross_field`), then hashed and compared
with its lock (:mod:`grpo_probe.prereg.lock`).
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
from grpo_probe.envs.observation import OBSERVATION_STATE, ObservationConfig
from grpo_probe.envs.registry import EnvConfig
from grpo_probe.prereg.amendments import Amendment, RegisteredVersion, parse_amendment, registered_versions
from grpo_probe.prereg.canonical import canonical_sha256, read_yaml
from grpo_probe.prereg.cross_field import design_environment, design_problems, environment_problems
from grpo_probe.prereg.extends import EXTENDS, Extended, merge_extends, set_in_shared_file
from grpo_probe.prereg.lock import (
    LOCK_FORMAT,
    LockError,
    check_lock,
    extends_record,
    foreign_lock_problem,
    inherited_amendments_problem,
    lock_path,
    new_lock,
    read_lock,
    utc_now_iso,
    write_lock,
)
from grpo_probe.prereg.moved import MOVES_FILE, read_moves
from grpo_probe.prereg.phase2 import Phase2, parse_phase2
from grpo_probe.prereg.replay import ReplaySection, parse_replay
from grpo_probe.prereg.rule import AnalysisNumbers, DecisionRule, parse_analysis_sections
from grpo_probe.prereg.schema import load_prereg_schema, validate_against
from grpo_probe.prereg.seeds import expand_seeds
from grpo_probe.sampling import SamplingMode, mode_params, sampler
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
    extends: tuple[Extended, ...] = field(default=(), repr=False)
    """The shared files the design extends (``extends:``), merged into it before it was checked."""
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
    extended: tuple[Extended, ...]


def _missing_design(path: Path) -> FileNotFoundError:
    """A design file that does not exist: where it moved, when ``prereg/MOVED.yaml`` says it did (a path
    from an older page or manifest), else the designs that do exist beside it (else under prereg/)."""
    try:
        moved = read_moves().current(path)
    except ValueError:  # an unreadable index: the listing below still helps
        moved = str(path)
    if moved != str(path):
        return FileNotFoundError(
            f"{path}: no such design file; it moved to {moved} ({MOVES_FILE.as_posix()})"
        )
    folder = path.parent if path.parent.is_dir() else Path("prereg")
    found = (
        sorted(p.as_posix() for p in folder.glob("*.yaml") if p.name != MOVES_FILE.name)
        if folder.is_dir()
        else []
    )
    listed = f"the designs in {folder.as_posix()}/ are {', '.join(found)}" if found else "no design is there"
    return FileNotFoundError(f"{path}: no such design file; {listed} (prereg/README.md lists every design)")


def _read_valid(path: Path, schema_dir: str | os.PathLike[str] | None) -> tuple[dict[str, Any], _Valid]:
    if not path.is_file():
        raise _missing_design(path)
    return _merged_valid(read_yaml(path), path, schema_dir)


@functools.lru_cache(maxsize=8)
def _design_fields(schema_dir: str | None) -> tuple[str, ...]:
    """The top-level fields of a design (the schema's), which a shared file's fields must be among; read
    once per process, as every job loads the design."""
    return tuple(load_prereg_schema(schema_dir).get("properties", ()))


def _merged_valid(
    raw: Any, path: Path, schema_dir: str | os.PathLike[str] | None
) -> tuple[dict[str, Any], _Valid]:
    """``raw`` merged with the shared files it extends, and what validating the merged design produced.

    A schema or cross-field problem in a field a shared file sets names that file beside the design.
    """
    extends = isinstance(raw, Mapping) and EXTENDS in raw
    known = _design_fields(None if schema_dir is None else str(schema_dir)) if extends else None
    merged, extended = merge_extends(raw, path, known)
    try:
        return merged, _validate(merged, path, schema_dir, extended)
    except ValueError as exc:
        if not extended:
            raise
        lines = [set_in_shared_file(line, str(path), extended) for line in str(exc).splitlines()]
        raise PreregError("\n".join(lines)) from None


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


def _validate(
    raw: Any, path: Path, schema_dir: str | os.PathLike[str] | None, extended: tuple[Extended, ...] = ()
) -> _Valid:
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
    return _Valid(sha, analysis, rule, phase2, replay, sampler_modules, extended)


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
        extends=valid.extended,
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
    merged, valid = _merged_valid(dict(raw), path, schema_dir)
    return _build(path, merged, valid, None, schema_dir=schema_dir)


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
        lock = check_lock(path, raw, extended=valid.extended)
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

    Locking an unchanged design leaves the existing lock (and its date) untouched, unless the lock does
    not record the shared files it extends as they are (a lock taken before ``extends_sha256``, or a
    shared file rewritten without moving the merged design): it is rewritten, date kept. ``earlier_locks``:
    older lock files of this design (e.g. taken from version control) whose versions enter the lock's
    history, each verified by rebuilding it from this file. ``results_hashes``: prereg sha256 -> the
    manifests under the results folder that carry it; an amendment saying ``after_results: false`` is
    refused when results of an earlier version exist (``grpo-probe prereg lock`` collects them).
    ``keep_amendments=False`` (the command line's default) refuses a first lock of a design that lists
    amendments, has no earlier lock and no results: a copy of another design, whose amendments would
    become its history. A lock of another file with another design (copied with it) is always refused.
    """
    path = Path(path)
    raw, valid = _read_valid(path, schema_dir)
    sha, extends = valid.sha256, extends_record(valid.extended)
    target = lock_path(path)
    old = read_lock(target) if target.exists() else None
    if old is not None and old["file"] != path.name and old["sha256"] != sha:
        raise LockError(foreign_lock_problem(path, old))
    if not keep_amendments and old is None and not earlier_locks and not results_hashes and raw["amendments"]:
        raise LockError(inherited_amendments_problem(path, raw))
    unchanged = old is not None and old["sha256"] == sha and old["file"] == path.name
    recorded = old is not None and old["format"] == LOCK_FORMAT and old.get("extends_sha256", {}) == extends
    if unchanged and old is not None and recorded and not earlier_locks:
        return LockOutcome(target, old, False, f"{path}: unchanged since its lock {target} ({old['date']})")
    earlier = [(str(p), read_lock(p)) for p in earlier_locks]
    when = old["date"] if unchanged and old is not None else date or utc_now_iso()
    lock, notes = new_lock(path, raw, old, when, earlier, results_hashes, valid.extended)
    write_lock(target, lock)
    verb = "re-locked" if old is not None else "locked"
    lines = [f"{path}: {verb} as {sha} in {target} ({lock['amendments']} amendments)", *notes]
    if unchanged and old is not None and old.get("extends_sha256", {}) != extends:
        shared = ", ".join(e.path.as_posix() for e in valid.extended) or "none"
        lines.insert(1, f"the design is unchanged; recorded the shared files it extends ({shared})")
    return LockOutcome(target, lock, True, "\n  ".join(lines))
