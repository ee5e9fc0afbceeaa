"""The registered validation study: which designs, which arms, which read should predict which gain.

Why a registered file of its own: the study tests the probe's prediction, so what counts as the prediction
(the read, the cell that stands for each arm, the gain, the bootstrap) is fixed and locked before any
member runs, as a design is. Its members are ordinary registered designs whose pilot runs on every arm
(``phase2.pilot: every_arm``), so each arm gets the same registered compute whatever the gate would say.

The lock (``<file>.lock``) holds the sha256 of the study's canonical content; a study that no longer
matches it is refused with the command that locks it again. A member design carries its own lock. The
content is hashed with each member named by the path it was registered under (:func:`registered_sha256`),
so a member design that moved (``prereg/MOVED.yaml``) is named at its new place with the lock unchanged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from grpo_probe.analysis.cells.reads import READ_NAMES
from grpo_probe.atomic_io import atomic_write_json
from grpo_probe.name_registry import did_you_mean
from grpo_probe.prereg import Prereg, load_prereg
from grpo_probe.prereg.canonical import canonical_sha256, read_yaml
from grpo_probe.prereg.lock import utc_now_iso
from grpo_probe.prereg.moved import read_moves, registered_members
from grpo_probe.prereg.schema import validate_against

__all__ = [
    "ANSWERS",
    "LOCK_FORMAT",
    "ROLES",
    "Engagement",
    "Member",
    "PowerSpec",
    "Study",
    "StudyError",
    "each_design",
    "load_study",
    "lock_study",
    "read_file_lock",
    "read_study_file",
    "registered_sha256",
    "study_lock_path",
    "write_file_lock",
]

LOCK_FORMAT = "grpo-probe-study-lock/1"
ROLES: tuple[str, ...] = ("subject", "positive_control", "negative_control")
ANSWERS: tuple[str, ...] = ("pooled", "within_designs")
"""What a study's verdict is: the pooled rho over all counted arms, or the mean rho inside designs."""


class StudyError(ValueError):
    """The study file, its lock or a member breaks a rule; the message names the file and the field."""


@dataclass(frozen=True)
class Member:
    """One registered design of the study, and the cell whose reads stand for each of its arms."""

    design: Prereg
    role: str
    cells: dict[str, str]
    """arm -> cell id, in the order the study registers them."""


@dataclass(frozen=True)
class Engagement:
    """Which arms count: those whose study cell moved the object in at least ``min`` of its episodes."""

    read: str
    min: float


@dataclass(frozen=True)
class PowerSpec:
    """The registered power simulation: a true Spearman ``rho`` at the study's own arms per design, gains
    measured at ``reliability``, detected when the study's interval lies above zero."""

    rho: float
    reliability: float
    simulations: int
    resamples: int
    seed: int


@dataclass(frozen=True)
class Study:
    """A locked validation study (``prereg/studies/*.yaml``)."""

    path: Path
    sha256: str
    lock_date: str
    name: str
    description: str
    members: tuple[Member, ...]
    predictor: str
    reads: tuple[str, ...]
    gain: str
    resamples: int
    confidence: float
    seed: int
    levels: str = "arms"
    """What the rank correlation's bootstrap resamples: ``arms``, or ``designs_then_arms`` (two-stage)."""
    permutations: int | None = None
    """The within-design permutation test's permutations; None when the study registers none."""
    answer: str = "pooled"
    """The registered verdict (``answer``): ``pooled``, the rho over all counted arms with its interval
    (every study registered before the field), or ``within_designs``, the within-design permutation test
    of the mean rho inside designs, since a lab chooses among the arms of one scene and a pooled rho over
    designs of different sizes orders the scenes as much as the arms."""
    engagement: Engagement | None = None
    min_subject_arms: int | None = None
    power: PowerSpec | None = None
    gain_policy: str | None = None
    """The held-out policy whose gain the study ranks (``gain.policy``: anchor or sampled), read from the
    members' replicate gains (:mod:`grpo_probe.phase2.held_out`); None for a study that registers the gain
    as a column alone, which ranks the anchor's change of each stage's own pilot, as before the field."""

    @property
    def replicates(self) -> int:
        """Pilot replicates per arm of the subject members (``phase2.replicates``; 1 when they register
        none). The members of one study register the same number (:func:`load_study` checks it)."""
        counts = {m.design.phase2.replicates for m in self.subject_members if m.design.phase2 is not None}
        return max(counts, default=1)

    @property
    def subject_members(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if m.role == "subject")

    def folder(self, results: str | os.PathLike[str]) -> Path:
        """Where the study's page and record go: ``<results>/studies/<name>/``."""
        return Path(results) / "studies" / self.name


def study_lock_path(path: str | os.PathLike[str]) -> Path:
    """``<study>.lock``, beside the study file."""
    return Path(f"{path}.lock")


def read_study_file(path: Path, what: str, schema: str) -> dict[str, Any]:
    """A file of this package's kinds (``what``: ``study``, ``calibration``), parsed and checked against
    its shipped schema ``schema`` (a file of :mod:`grpo_probe.study`); errors name the file and field."""
    try:
        raw = read_yaml(path)
    except FileNotFoundError:
        raise StudyError(f"{path}: {what} file not found") from None
    validate_against(
        raw, read_yaml(resources.files("grpo_probe.study").joinpath(schema)), str(path), shipped=True
    )
    return raw


def study_schema() -> dict[str, Any]:
    """The shipped schema of a study file (``study.schema.yaml``), which the suite checks against its
    metaschema."""
    return read_yaml(resources.files("grpo_probe.study").joinpath("study.schema.yaml"))


def _raw(path: Path) -> dict[str, Any]:
    return read_study_file(path, "study", "study.schema.yaml")


def registered_sha256(raw: Mapping[str, Any], field: str) -> str:
    """The sha256 a study (``field``: ``members``) or a calibration (``candidates``) is locked under: its
    canonical form with each entry's ``design`` named by the path it was registered under.

    Why not the file as written: a member's path is part of the hashed content, and a design moved to a
    folder of its purpose (``git mv``, its own hash unchanged) would otherwise re-register every study that
    names it. The moves are read from the working folder's ``prereg/MOVED.yaml``
    (:mod:`grpo_probe.prereg.moved`), where the members' paths are relative to; a file whose members never
    moved hashes exactly as it is written.
    """
    return canonical_sha256(registered_members(raw, field, read_moves()))


def lock_study(path: str | os.PathLike[str]) -> Path:
    """Validate the study (schema and members) and write its lock; returns the lock's path."""
    path = Path(path)
    raw = _raw(path)
    _members(path, raw)
    return write_file_lock(path, registered_sha256(raw, "members"), LOCK_FORMAT)


def write_file_lock(path: Path, sha256: str, lock_format: str) -> Path:
    """Write ``<path>.lock``: the lock format, the file's registered sha256 (:func:`registered_sha256`) and
    the UTC time.

    Shared by every registered file of this package that locks as a study does (a study, a pilot
    calibration), each with its own ``lock_format``.
    """
    lock = study_lock_path(path)
    atomic_write_json(lock, {"format": lock_format, "sha256": sha256, "locked_at": utc_now_iso()})
    return lock


def read_file_lock(
    path: Path, sha256: str, lock_format: str = LOCK_FORMAT, what: str = "study", command: str = "study lock"
) -> str:
    """The lock date of ``path`` when ``<path>.lock`` holds ``sha256`` under ``lock_format``; otherwise a
    :class:`StudyError` naming both files and the command that locks it (``grpo-probe <command> <path>``)."""
    lock = study_lock_path(path)
    try:
        recorded = json.loads(lock.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StudyError(
            f"{path}: not locked (no {lock}); lock it with `grpo-probe {command} {path}`"
        ) from None
    except ValueError as exc:
        raise StudyError(f"{lock}: not a {what} lock ({exc})") from None
    if not isinstance(recorded, dict) or recorded.get("format") != lock_format:
        raise StudyError(f"{lock}: not a {what} lock (format is not {lock_format!r})")
    if recorded.get("sha256") != sha256:
        raise StudyError(
            f"{path}: its content (sha256 {sha256}) differs from the one locked in {lock} "
            f"({recorded.get('sha256')}); a registered {what} is not edited after the fact. If nothing "
            f"has run under it yet, lock it again: `grpo-probe {command} {path}`"
        )
    return str(recorded.get("locked_at", ""))


def each_design(
    path: Path, raw: Mapping[str, Any], field: str, problems: list[str]
) -> Iterator[tuple[str, Mapping[str, Any], Prereg]]:
    """Each entry of ``raw[field]`` (a study's ``members``, a calibration's ``candidates``) with the
    design its ``design`` names, loaded and checked against its lock, and ``at`` (``<file>:
    <field>[i]``) to word the entry's problems with. A design that does not load is a problem appended
    to ``problems``, and its entry is passed over, so one reading lists every broken entry."""
    for i, entry in enumerate(raw[field]):
        at = f"{path}: {field}[{i}]"
        try:
            design = load_prereg(entry["design"])
        except (OSError, ValueError) as exc:
            problems.append(f"{at}.design: {entry['design']} does not load ({exc})")
            continue
        yield at, entry, design


def _members(path: Path, raw: dict[str, Any]) -> tuple[Member, ...]:
    problems: list[str] = []
    members: list[Member] = []
    for at, entry, design in each_design(path, raw, "members", problems):
        phase2 = design.phase2
        if phase2 is None or phase2.pilot != "every_arm":
            problems.append(
                f"{at}.design: {entry['design']} must register the pilot on every arm "
                "(phase2.pilot: every_arm), so each arm gets the same compute whatever its decision"
            )
        cells = {str(arm): str(cell) for arm, cell in entry["cells"].items()}
        for arm, cell_id in cells.items():
            if arm not in design.arms:
                problems.append(f"{at}.cells.{arm}: {entry['design']} has no arm {arm!r}")
                continue
            if phase2 is not None and design.arms[arm].head not in phase2.heads:
                problems.append(
                    f"{at}.cells.{arm}: the pilot of {entry['design']} has no recipe for the "
                    f"{design.arms[arm].head} head"
                )
            cell = next((c for c in design.enabled_cells if c.id == cell_id), None)
            if cell is None:
                problems.append(f"{at}.cells.{arm}: {entry['design']} has no enabled cell {cell_id!r}")
            elif cell.arm != arm:
                problems.append(f"{at}.cells.{arm}: cell {cell_id!r} samples arm {cell.arm!r}, not {arm!r}")
        members.append(Member(design=design, role=str(entry["role"]), cells=cells))
    problems += _gain_problems(path, raw, members)
    if raw.get("answer", "pooled") == "within_designs" and "permutations" not in raw["bootstrap"]:
        problems.append(
            f"{path}: bootstrap.permutations: answer: within_designs is decided by the within-design "
            "permutation test, so the study must register its permutations (bootstrap.permutations, at "
            "least 99)"
        )
    named = [("predictor", raw["predictor"])] + [(f"reads[{i}]", r) for i, r in enumerate(raw["reads"])]
    if "engagement" in raw:
        named.append(("engagement.read", raw["engagement"]["read"]))
    for field, name in named:
        if name not in READ_NAMES:
            problems.append(
                f"{path}: {field}: {name!r} is not a probe read (reads: {', '.join(READ_NAMES)})"
                + did_you_mean(name, READ_NAMES)
            )
    if raw["predictor"] not in raw["reads"]:
        problems.append(f"{path}: predictor: {raw['predictor']!r} must be one of reads")
    designs = [str(Path(m["design"])) for m in raw["members"]]
    if len(set(designs)) != len(designs):
        problems.append(f"{path}: members: a design is listed twice")
    if problems:
        raise StudyError("\n".join(problems))
    return tuple(members)


def _gain_problems(path: Path, raw: dict[str, Any], members: list[Member]) -> list[str]:
    """A gain registered by policy must be one every member scores, and the subjects' replicates must
    agree (one number of replicates per arm, so each gain's error is of the same mean)."""
    gain = raw["gain"]
    if not isinstance(gain, dict):
        return []
    problems = []
    if gain["policy"] == "sampled":
        for i, member in enumerate(members):
            phase2 = member.design.phase2
            if phase2 is not None and phase2.sampled_draws is None:
                problems.append(
                    f"{path}: gain.policy: sampled, but members[{i}] ({member.design.path}) does not score "
                    "the sampled policy held-out (register phase2.sampled_draws in it)"
                )
    counts = {
        str(m.design.path): m.design.phase2.replicates
        for m in members
        if m.role == "subject" and m.design.phase2 is not None
    }
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{p} {n}" for p, n in counts.items())
        problems.append(
            f"{path}: members: the subject designs register different phase2.replicates ({listed}); a "
            "study's gains are means of the same number of replicates"
        )
    return problems


def load_study(path: str | os.PathLike[str]) -> Study:
    """The typed, locked study; every problem (schema, lock, members) is named with its file and field."""
    path = Path(path)
    raw = _raw(path)
    sha256 = registered_sha256(raw, "members")
    lock_date = read_file_lock(path, sha256)
    members = _members(path, raw)
    boot = raw["bootstrap"]
    engagement, power = raw.get("engagement"), raw.get("power")
    return Study(
        path=path,
        sha256=sha256,
        lock_date=lock_date,
        name=str(raw["name"]),
        description=str(raw["description"]),
        members=members,
        predictor=str(raw["predictor"]),
        reads=tuple(str(r) for r in raw["reads"]),
        gain=str(raw["gain"]["read"] if isinstance(raw["gain"], dict) else raw["gain"]),
        gain_policy=str(raw["gain"]["policy"]) if isinstance(raw["gain"], dict) else None,
        resamples=int(boot["resamples"]),
        confidence=float(boot["confidence"]),
        seed=int(boot["seed"]),
        levels=str(boot.get("levels", "arms")),
        permutations=int(boot["permutations"]) if "permutations" in boot else None,
        answer=str(raw.get("answer", "pooled")),
        engagement=None
        if engagement is None
        else Engagement(read=str(engagement["read"]), min=float(engagement["min"])),
        min_subject_arms=int(raw["min_subject_arms"]) if "min_subject_arms" in raw else None,
        power=None
        if power is None
        else PowerSpec(
            rho=float(power["rho"]),
            reliability=float(power["reliability"]),
            simulations=int(power["simulations"]),
            resamples=int(power["resamples"]),
            seed=int(power["seed"]),
        ),
    )
