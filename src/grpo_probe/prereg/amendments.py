"""The amendment record, and every registered version of a design rebuilt from the current file alone.

Why: an amendment made after results exist can move the decision, so a reader must be able to see what
the design decided before it. Each entry of ``amendments:`` records, besides its date, reason and the
fields it names, whether results of an earlier version existed when it was made (``after_results``) and
what it replaced (``replaces``): per changed field path, the previous value (``{was: <value>}``) or that
the field did not exist before (``{absent: true}``; a value of ``null`` is a value, not an absence).
Undoing the entries from the last one back gives every earlier version from this one file, without
git; the lock keeps the sha256 each version was locked with, so the rebuilt versions can be checked.

Version ``k`` is the design with the first ``k`` amendments: version 0 is the original registration,
version ``len(amendments)`` the current design. A version's hash is the canonical sha256 of its design
with the two annotation keys left out of every amendment entry. Entries written before the keys existed
were locked without them, so a version locked then is known by the same hash either way, and annotating
an old entry later does not change which design each version was.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grpo_probe.prereg.canonical import canonical_sha256
from grpo_probe.prereg.rule import AnalysisNumbers, DecisionRule, parse_analysis_sections

__all__ = [
    "ANNOTATION_KEYS",
    "Amendment",
    "FieldChange",
    "ReconstructionError",
    "RegisteredVersion",
    "change_problems",
    "covered_by",
    "design_sha256",
    "field_path",
    "parse_amendment",
    "parse_changes",
    "reconstruct",
    "registered_versions",
    "strip_annotations",
    "undo",
    "value_at",
]

ANNOTATION_KEYS: tuple[str, ...] = ("after_results", "replaces")
"""Keys of an amendment entry that annotate it; a version's hash is taken without them."""

_ABSENT: Any = object()
_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)((?:\[\d+\])*)")
_INDEX = re.compile(r"\[(\d+)\]")


class ReconstructionError(ValueError):
    """A registered version cannot be rebuilt from the current file; the message names file and field."""


@dataclass(frozen=True)
class FieldChange:
    """One field an amendment changed: its path and its value before (``added`` when it did not exist)."""

    path: str
    was: Any
    added: bool

    def text(self) -> str:
        """``arms.ar.anchor (added)`` or ``decision_rule.arm_choice.rank_by (replaced)``."""
        return f"{self.path} ({'added' if self.added else 'replaced'})"


@dataclass(frozen=True)
class Amendment:
    """One append-only change record.

    ``after_results`` and ``replaces`` are None on an entry that does not record them (the versions before
    such an entry cannot be rebuilt); ``undeclared`` lists replaced paths that none of ``fields`` covers,
    which only an entry annotated after it was locked can have (its ``fields`` never change).
    """

    date: str
    reason: str
    fields: tuple[str, ...]
    after_results: bool | None = None
    replaces: tuple[FieldChange, ...] | None = None

    @property
    def undeclared(self) -> tuple[str, ...]:
        """Replaced paths outside every path ``fields`` names."""
        return tuple(c.path for c in self.replaces or () if not covered_by(c.path, self.fields))


@dataclass(frozen=True)
class RegisteredVersion:
    """Version ``index`` of the design, as far as it can be rebuilt from the current file.

    ``analysis`` and ``decision_rule`` are that version's sections (None when ``problem`` says why they
    cannot be had: an entry without ``replaces``, or sections this code cannot evaluate). ``sha256`` and
    ``date`` are what the lock recorded for the version (None when not recorded); ``verified`` says the
    rebuilt design hashes to that sha256. ``differs_in`` names the top-level sections in which the
    version differs from the current design.
    """

    index: int
    sha256: str | None
    date: str | None
    amendment: Amendment | None
    """The amendment that made this version (None for the original registration)."""
    analysis: AnalysisNumbers | None
    decision_rule: DecisionRule | None
    differs_in: tuple[str, ...]
    verified: bool
    problem: str | None

    @property
    def label(self) -> str:
        """``original registration`` or ``amendment 2``."""
        return "original registration" if self.index == 0 else f"amendment {self.index}"


def field_path(path: str) -> tuple[str | int, ...]:
    """``cells[1].mode.temperature`` -> ``("cells", 1, "mode", "temperature")``; ValueError if malformed."""
    parts: list[str | int] = []
    for segment in path.split("."):
        match = _SEGMENT.fullmatch(segment)
        if match is None:
            raise ValueError(
                f"{path!r} is not a field path (like analysis.competence_tol_cm or cells[1].mode)"
            )
        parts.append(match.group(1))
        parts += [int(i) for i in _INDEX.findall(match.group(2))]
    return tuple(parts)


def covered_by(path: str, fields: Sequence[str]) -> bool:
    """Whether one of ``fields`` names ``path``, a field inside it, or a section containing it."""
    target = field_path(path)
    for field in fields:
        try:
            named = field_path(field)
        except ValueError:
            continue
        shorter = min(len(named), len(target))
        if named[:shorter] == target[:shorter]:
            return True
    return False


def _walk(raw: Any, parts: Sequence[str | int], path: str) -> Any:
    node = raw
    for part in parts:
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise KeyError(f"{path}: no element [{part}]")
        elif not isinstance(node, Mapping) or part not in node:
            raise KeyError(f"{path}: no key {part!r}")
        node = node[part]
    return node


def value_at(raw: Any, path: str) -> Any:
    """The value at ``path`` in a parsed design; KeyError naming the first missing part."""
    return _walk(raw, field_path(path), path)


def _has(raw: Any, path: str) -> bool:
    try:
        value_at(raw, path)
    except KeyError:
        return False
    return True


def parse_changes(raw: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    """A schema-valid ``replaces`` mapping as field changes, in path order."""
    return tuple(FieldChange(path, body.get("was"), "was" not in body) for path, body in sorted(raw.items()))


def parse_amendment(entry: Mapping[str, Any]) -> Amendment:
    """A schema-valid amendment entry, typed."""
    replaces = entry.get("replaces")
    return Amendment(
        date=entry["date"],
        reason=entry["reason"],
        fields=tuple(entry["fields"]),
        after_results=entry.get("after_results"),
        replaces=None if replaces is None else parse_changes(replaces),
    )


def strip_annotations(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The entry without ``after_results`` and ``replaces``: what a version's hash covers."""
    return {key: value for key, value in entry.items() if key not in ANNOTATION_KEYS}


def design_sha256(raw: Mapping[str, Any]) -> str:
    """The hash a version is known by: canonical sha256 of the design, annotation keys left out."""
    design = dict(raw)
    design["amendments"] = [strip_annotations(e) for e in raw.get("amendments", [])]
    return canonical_sha256(design)


def _put_back(design: dict[str, Any], path: str, body: Mapping[str, Any]) -> None:
    """Restore ``body["was"]`` at ``path`` (creating the key or appending the list position), or remove
    the field when ``body`` records it as added. KeyError when the parent or the added field is missing."""
    parts = field_path(path)
    parent = _walk(design, parts[:-1], path)
    last = parts[-1]
    if "was" not in body:
        _walk(parent, parts[-1:], path)
        del parent[last]
    elif isinstance(last, int):
        if not isinstance(parent, list) or last > len(parent):
            raise KeyError(f"{path}: no list position [{last}] to restore")
        if last == len(parent):
            parent.append(copy.deepcopy(body["was"]))
        else:
            parent[last] = copy.deepcopy(body["was"])
    elif isinstance(parent, dict):
        parent[last] = copy.deepcopy(body["was"])
    else:
        raise KeyError(f"{path}: the parent of {last!r} is not a mapping")


def undo(design: dict[str, Any], entry: Mapping[str, Any], where: str) -> None:
    """Put back, in place, what ``entry`` replaced: each recorded previous value, or remove an added field.

    ``where`` (``<prereg>: amendments[i]``) prefixes every error.
    """
    replaces = entry.get("replaces")
    if replaces is None:
        raise ReconstructionError(
            f"{where}: records no `replaces`, so the versions before it cannot be rebuilt from this file"
        )
    for path, body in sorted(replaces.items()):
        try:
            _put_back(design, path, body)
        except (KeyError, ValueError) as exc:
            raise ReconstructionError(f"{where}.replaces.{path}: {exc.args[0]} in the later design") from None


def reconstruct(raw: Mapping[str, Any], version: int, where: str) -> dict[str, Any]:
    """Version ``version`` of the design, rebuilt from the current parsed file ``raw``.

    Undoes amendments ``len(amendments) - 1`` down to ``version`` (their ``replaces``), keeps the first
    ``version`` entries, and leaves the annotation keys out of them (they are not part of a version's
    hash). ``where`` names the file in errors.
    """
    entries = list(raw.get("amendments", []))
    if not 0 <= version <= len(entries):
        raise ReconstructionError(f"{where}: no version {version} (the design has {len(entries)} amendments)")
    design = copy.deepcopy(dict(raw))
    for i in range(len(entries) - 1, version - 1, -1):
        undo(design, entries[i], f"{where}: amendments[{i}]")
    design["amendments"] = [strip_annotations(e) for e in entries[:version]]
    return design


def change_problems(entry: Mapping[str, Any], raw: Mapping[str, Any], where: str) -> list[str]:
    """What is wrong with a new entry's ``replaces`` beyond what the version hash can tell.

    Every replaced path must be named by ``fields`` and must really have changed: a field recorded as
    added exists now, and a replaced field's value now differs from the recorded previous value.
    """
    problems = []
    paths = sorted(entry.get("replaces", {}))
    for i, outer in enumerate(paths):
        for inner in paths[i + 1 :]:
            if covered_by(inner, [outer]):
                problems.append(f"{where}.replaces: {outer} and {inner} overlap; record each change once")
    for path, body in sorted(entry.get("replaces", {}).items()):
        at = f"{where}.replaces.{path}"
        if not covered_by(path, entry["fields"]):
            problems.append(f"{at}: not covered by the entry's fields ({', '.join(entry['fields'])})")
        if "was" not in body:
            if not _has(raw, path):
                problems.append(f"{at}: recorded as added, but the design has no {path}")
        elif _has(raw, path) and canonical_sha256(value_at(raw, path)) == canonical_sha256(body["was"]):
            problems.append(f"{at}: the recorded previous value equals the current one; nothing was replaced")
    return problems


def registered_versions(
    raw: Mapping[str, Any],
    where: str,
    history: Sequence[Mapping[str, Any]] = (),
    schema_dir: Any = None,
) -> tuple[RegisteredVersion, ...]:
    """Every version of the design in ``raw`` (a validated file), oldest first, the current one last.

    ``history`` is the lock's ``versions`` list (empty for an unlocked design): it supplies each
    version's recorded hash and date, and a rebuilt version is ``verified`` when it hashes to the
    recorded value. A version that cannot be rebuilt, or whose analysis sections this code cannot
    evaluate, comes back with ``problem`` saying why, never dropped.
    """
    entries = list(raw.get("amendments", []))
    records = {int(r["version"]): r for r in history}
    current = reconstruct(raw, len(entries), where)
    out = []
    for k in range(len(entries) + 1):
        record = records.get(k, {})
        sha, date = record.get("sha256"), record.get("date")
        amendment = parse_amendment(entries[k - 1]) if k else None
        analysis = rule = None
        differs: tuple[str, ...] = ()
        verified = False
        try:
            design = reconstruct(raw, k, where)
            verified = sha is not None and design_sha256(design) == sha
            differs = tuple(
                key
                for key in sorted(set(design) | set(current))
                if key != "amendments"
                and canonical_sha256(design.get(key)) != canonical_sha256(current.get(key))
            )
            analysis, rule = parse_analysis_sections(design, f"{where} (version {k})", schema_dir)
            problem = None
        except ValueError as exc:
            problem = str(exc)
        out.append(RegisteredVersion(k, sha, date, amendment, analysis, rule, differs, verified, problem))
    return tuple(out)
