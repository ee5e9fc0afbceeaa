"""Locks: the registered design's hash, written once, changed only by an appended amendment.

Why: a pre-registration is worth something only if the design cannot move after results exist. A lock
(``<prereg>.lock``, JSON) holds the sha256 of the prereg's canonical form, the UTC date it was taken, the
number of amendments it covers and the hash of each. Every run checks the prereg against its lock before
doing any work. Re-locking a changed design is allowed only when the change comes with new amendment
entries that name the changed sections and record what they replaced, and every earlier amendment is
byte-for-byte what was locked (an entry locked before ``after_results``/``replaces`` existed may gain
them once, as an annotation that the version hashes below verify). The lock also keeps one hash per
top-level section, so a mismatch can say *what* changed.

Format 2 adds the history: per registered version (0 = the original registration, k = after amendment
k) the hash of its design (:func:`grpo_probe.prereg.amendments.design_sha256`), the date it was first
locked, and every file hash it was locked under. Rebuilding version k from the current file (undoing the
amendments' ``replaces``) must give exactly the recorded hash; that is checked when locking and on every
load. A format-1 lock (no history) is still read: it knows only its own version.

A design that extends shared files (:mod:`grpo_probe.prereg.extends`) is hashed merged with them, and its
lock adds ``extends_sha256``: each file as the design names it -> the sha256 of its canonical form. A
change to a shared file is then named as such wherever the lock is checked; a lock taken before the
field existed (none) still verifies the merged design by its hash alone.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grpo_probe.atomic_io import atomic_write_text, read_json
from grpo_probe.prereg.amendments import (
    ANNOTATION_KEYS,
    ReconstructionError,
    change_problems,
    covered_by,
    design_sha256,
    reconstruct,
    strip_annotations,
)
from grpo_probe.prereg.canonical import canonical_sha256
from grpo_probe.prereg.extends import Extended

__all__ = [
    "LOCK_FORMAT",
    "LockError",
    "build_lock",
    "changed_sections",
    "check_lock",
    "extends_record",
    "foreign_lock_problem",
    "history_problems",
    "inherited_amendments_problem",
    "lock_path",
    "new_lock",
    "read_lock",
    "relock_problems",
    "shared_file_changes",
    "utc_now_iso",
    "write_lock",
]

LOCK_FORMAT = 2
_READABLE = (1, 2)
_VERIFIED = "rebuilt and matching the lock"
_NO_HASH = "not verified: the lock recorded no hash"
_NOT_REBUILT = "not rebuilt (a later amendment records no replaces)"
"""A version's standing as ``prereg lock`` reports it, worded as decision.md's version table words it."""


class LockError(ValueError):
    """The prereg and its lock disagree, or a re-lock would rewrite registered history."""


def lock_path(prereg_path: str | os.PathLike[str]) -> Path:
    """``prereg/smoke.yaml`` -> ``prereg/smoke.yaml.lock``."""
    path = Path(prereg_path)
    return path.with_name(path.name + ".lock")


def _version(index: int, sha256: str | None = None, date: str | None = None) -> dict[str, Any]:
    """One history record: version ``index``, its design hash and first lock date (None: not recorded),
    and the file hashes it was locked under."""
    return {"version": index, "sha256": sha256, "date": date, "file_sha256": []}


def extends_record(extended: Sequence[Extended]) -> dict[str, str]:
    """The lock's ``extends_sha256``: each shared file the design extends, as the design names it, -> the
    sha256 of its canonical form (empty when it extends none)."""
    return {e.named: e.sha256 for e in extended}


def build_lock(
    raw: Mapping[str, Any],
    file_name: str,
    date: str,
    versions: Sequence[Mapping[str, Any]] | None = None,
    extends: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The lock record of a parsed prereg (merged with the files it extends); ``versions`` is its history
    (default: this version only); ``extends``: :func:`extends_record` of the files it extends, recorded
    when there are any (a design that extends none has the lock it always had)."""
    amendments = list(raw.get("amendments", []))
    sha = canonical_sha256(raw)
    if versions is None:
        versions = [_version(k) for k in range(len(amendments))]
        versions.append(_version(len(amendments), design_sha256(raw), date) | {"file_sha256": [sha]})
    lock = {
        "format": LOCK_FORMAT,
        "file": file_name,
        "sha256": sha,
        "date": date,
        "amendments": len(amendments),
        "amendment_sha256": [canonical_sha256(a) for a in amendments],
        "section_sha256": {key: canonical_sha256(value) for key, value in sorted(raw.items())},
        "versions": [dict(v) for v in versions],
    }
    if extends:
        lock["extends_sha256"] = dict(sorted(extends.items()))
    return lock


def _history_shape_problem(lock: Mapping[str, Any]) -> str | None:
    versions = lock["versions"]
    if not isinstance(versions, list) or [
        v.get("version") if isinstance(v, dict) else None for v in versions
    ] != list(range(int(lock["amendments"]) + 1)):
        return f"versions must list versions 0..{lock['amendments']} in order"
    for v in versions:
        if not {"sha256", "date", "file_sha256"} <= set(v) or not isinstance(v["file_sha256"], list):
            return f"versions[{v['version']}] needs sha256, date and file_sha256"
    return None


def read_lock(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a lock file; errors name it. A format-1 lock comes back with a one-version history."""
    path = Path(path)
    lock = read_json(path, "lock file", LockError)
    required = ("format", "file", "sha256", "date", "amendments", "amendment_sha256", "section_sha256")
    missing = [key for key in required if key not in lock] if isinstance(lock, dict) else list(required)
    if missing:
        raise LockError(f"{path}: not a valid lock file (missing {', '.join(missing)})")
    if lock["format"] not in _READABLE:
        raise LockError(
            f"{path}: lock format {lock['format']!r} is not supported (expected one of {_READABLE})"
        )
    if lock["format"] == 1:
        # format 1 had no annotation keys, so the file hash it holds is also its version's design hash
        n = int(lock["amendments"])
        lock["versions"] = [_version(k) for k in range(n)]
        lock["versions"].append(_version(n, lock["sha256"], lock["date"]) | {"file_sha256": [lock["sha256"]]})
    elif "versions" not in lock:
        raise LockError(f"{path}: not a valid lock file (missing versions)")
    problem = _history_shape_problem(lock)
    if problem:
        raise LockError(f"{path}: not a valid lock file: {problem}")
    return lock


def write_lock(path: str | os.PathLike[str], lock: Mapping[str, Any]) -> None:
    """Write a lock atomically, as stable pretty JSON."""
    atomic_write_text(path, json.dumps(lock, sort_keys=True, indent=2) + "\n")


def changed_sections(lock: Mapping[str, Any], raw: Mapping[str, Any]) -> list[str]:
    """Top-level sections whose content differs from the lock (added and removed ones included)."""
    locked = lock["section_sha256"]
    now = {key: canonical_sha256(value) for key, value in raw.items()}
    return sorted(key for key in set(locked) | set(now) if locked.get(key) != now.get(key))


def _how_to_amend(prereg: Path) -> str:
    return (
        "A locked design changes only by amendment: append an entry to `amendments:` "
        "({date: YYYY-MM-DD, reason: ..., after_results: true|false, replaces: {<field path>: {was: "
        "<previous value>} or {absent: true}}, fields: [<changed field paths>]}), leave earlier entries as "
        f"they are, then run `grpo-probe prereg lock {prereg}`."
    )


def history_problems(
    prereg: str | os.PathLike[str], lock: Mapping[str, Any], raw: Mapping[str, Any]
) -> list[str]:
    """Recorded versions that the current file rebuilds to a different hash (empty when all agree).

    A version that cannot be rebuilt because a later entry records no ``replaces`` is not a problem
    here (it is shown as not rebuildable); a ``replaces`` that does not apply, or a rebuilt design whose
    hash is not the recorded one, is.
    """
    prereg = Path(prereg)
    problems = []
    entries = list(raw.get("amendments", []))
    for record in lock["versions"]:
        k, recorded = record["version"], record["sha256"]
        if recorded is None or any("replaces" not in e for e in entries[k:]):
            continue
        try:
            rebuilt = design_sha256(reconstruct(raw, k, str(prereg)))
        except ReconstructionError as exc:
            problems.append(f"{exc} (rebuilding version {k})")
            continue
        if rebuilt != recorded:
            problems.append(
                f"{prereg}: version {k} rebuilt from the amendments' replaces hashes to {rebuilt[:12]}..., "
                f"but {lock_path(prereg)} recorded {recorded[:12]}... for it (locked {record['date']}); "
                f"the replaces of amendments[{k}:] do not give back what was locked"
            )
    return problems


def foreign_lock_problem(prereg: str | os.PathLike[str], lock: Mapping[str, Any]) -> str:
    """What to do about a lock of another file (one copied along with its design)."""
    prereg = Path(prereg)
    return (
        f"{lock_path(prereg)}: locks {lock['file']!r}, not {prereg.name!r}; a lock belongs to the file it "
        f"was taken of: delete {lock_path(prereg)} and run `grpo-probe prereg lock {prereg}` to register "
        "this one"
    )


def inherited_amendments_problem(prereg: str | os.PathLike[str], raw: Mapping[str, Any]) -> str:
    """Why a first lock of a design that already lists amendments is refused, and the two ways on.

    Why: a design copied from another (``cp prereg/smoke.yaml prereg/mine.yaml``) carries the original's
    amendments. Locked as they are, they become the copy's history: decision.md would list versions the
    copy never had, each "not verified", since no lock of the copy recorded them.
    """
    n = len(raw.get("amendments", []))
    return (
        f"{prereg}: lists {n} amendment{'s' if n != 1 else ''} but has no lock of its own and no results: "
        "a design copied from another carries the original's amendments, which locked as they are would "
        "read as this design's history. Start clean with `amendments: []`, or keep them deliberately "
        f"with `grpo-probe prereg lock --keep-amendments {prereg}` (their earlier versions are then shown "
        "as not verified: no lock recorded their hashes)."
    )


def shared_file_changes(lock: Mapping[str, Any], extended: Sequence[Extended]) -> list[str]:
    """How the shared files the design extends now differ from those its lock recorded, one line each
    naming the file (empty when they agree, or when the lock predates ``extends_sha256``)."""
    recorded = lock.get("extends_sha256")
    if recorded is None:
        return []
    now = extends_record(extended)
    where = {e.named: e.path.as_posix() for e in extended}
    changes = []
    for name in sorted(set(recorded) | set(now)):
        was, found = recorded.get(name), now.get(name)
        if was == found:
            continue
        if was is None:
            changes.append(f"it extends {where[name]} now, which the lock does not record")
        elif found is None:
            changes.append(f"it no longer extends {name} (locked as {was[:12]}...)")
        else:
            changes.append(
                f"{where[name]}, which it extends, changed since the lock (sha256 {was[:12]}... locked, "
                f"now {found[:12]}...)"
            )
    return changes


def _shared_sections(changed: Sequence[str], extended: Sequence[Extended]) -> list[str]:
    """For a lock without ``extends_sha256``: the changed sections a shared file sets part of."""
    return [
        f"{section} is partly set in {e.path.as_posix()}, which it extends"
        for e in extended
        for section in changed
        if any(_section_of(f) == section for f in e.fields)
    ]


def check_lock(
    prereg: str | os.PathLike[str],
    raw: Mapping[str, Any],
    *,
    valid: bool = True,
    extended: Sequence[Extended] = (),
) -> dict[str, Any]:
    """Return the lock of ``prereg`` if it covers exactly ``raw``; otherwise raise naming both files.

    ``raw``: the design merged with the shared files it extends, ``extended`` those files. A lock that
    records their hashes must record exactly these (a shared file that changed is named, whether or not
    the merged design moved with it); an older lock checks the merged design's hash alone.
    ``valid``: whether ``raw`` passed its schema and cross-field rules. A design that does not cannot be
    re-locked, so a mismatch then points at the edit (a misspelt field is the usual cause) rather than
    at writing an amendment.
    """
    prereg = Path(prereg)
    path = lock_path(prereg)
    if not path.exists():
        raise LockError(
            f"{prereg}: not locked (no {path}); run `grpo-probe prereg lock {prereg}` to register it"
        )
    lock = read_lock(path)
    if lock["file"] != prereg.name:
        raise LockError(foreign_lock_problem(prereg, lock))
    shared = shared_file_changes(lock, extended)
    if lock["sha256"] != canonical_sha256(raw):
        sections = changed_sections(lock, raw)
        changed = ", ".join(sections) or "(formatting of the lock)"
        if "extends_sha256" not in lock:
            shared = _shared_sections(sections, extended)
        changed += "".join(f"; {line}" for line in shared)
        how = (
            _how_to_amend(prereg)
            if valid
            else "The design fails the checks above: fix those first (undoing a mistaken edit restores "
            "the match)."
        )
        raise LockError(
            f"{prereg}: does not match its lock {path} (locked {lock['date']}, "
            f"sha256 {lock['sha256'][:12]}..., now {canonical_sha256(raw)[:12]}...); "
            f"changed sections: {changed}. {how}"
        )
    if shared:
        raise LockError(
            f"{prereg}: {'; '.join(shared)}. The merged design still matches its lock {path} (sha256 "
            f"{lock['sha256'][:12]}...), so no registered number moved: `grpo-probe prereg lock {prereg}` "
            "records the shared files as they are now"
        )
    problems = history_problems(prereg, lock, raw)
    if problems:
        raise LockError("\n".join(problems))
    return lock


def _section_of(field: str) -> str:
    return field.split(".", 1)[0].split("[", 1)[0]


def _entry_problems(
    where: str, lock: Mapping[str, Any], entries: Sequence[Any]
) -> tuple[list[str], list[int]]:
    """Append-only: every locked entry is unchanged, or gained only the annotation keys. Returns the
    problems and the indices of entries annotated now."""
    n_locked = int(lock["amendments"])
    problems: list[str] = []
    annotated: list[int] = []
    if len(entries) < n_locked:
        problems.append(
            f"{where}: amendments are append-only: the lock covers {n_locked}, "
            f"the file has {len(entries)}; restore the removed entries"
        )
    for i, (locked_hash, entry) in enumerate(zip(lock["amendment_sha256"], entries, strict=False)):
        if canonical_sha256(entry) == locked_hash:
            continue
        if isinstance(entry, Mapping) and canonical_sha256(strip_annotations(entry)) == locked_hash:
            annotated.append(i)
            continue
        problems.append(
            f"{where}: amendments[{i}] differs from the locked entry; earlier amendments never change "
            f"(an entry locked without {' and '.join(ANNOTATION_KEYS)} may only gain them)"
        )
    return problems, annotated


def relock_problems(
    prereg: str | os.PathLike[str], lock: Mapping[str, Any], raw: Mapping[str, Any]
) -> list[str]:
    """Why ``raw`` may not replace the design ``lock`` covers (empty when the re-lock is allowed).

    Earlier entries unchanged (or only annotated), changed sections named by new entries, and each new
    entry records ``after_results`` and a ``replaces`` that names only fields it declares and only values
    that changed. That the ``replaces`` give back the locked design exactly is checked by :func:`new_lock`.
    """
    prereg = Path(prereg)
    where = f"{prereg} (lock {lock_path(prereg)})"
    amendments: Sequence[Any] = raw.get("amendments", [])
    n_locked = int(lock["amendments"])
    problems, _ = _entry_problems(where, lock, amendments)
    if problems:
        return problems
    new_entries = list(amendments[n_locked:])
    changed = [s for s in changed_sections(lock, raw) if s != "amendments"]
    if not new_entries:
        if changed:
            problems.append(
                f"{where}: changed sections {', '.join(changed)} without a new amendment entry. "
                f"{_how_to_amend(prereg)}"
            )
        return problems
    covered = {_section_of(field) for entry in new_entries for field in entry.get("fields", [])}
    uncovered = [s for s in changed if s not in covered]
    if uncovered:
        problems.append(
            f"{where}: changed sections {', '.join(uncovered)} are not named in the new amendments' fields "
            f"(they name {', '.join(sorted(covered))})"
        )
    for i, entry in enumerate(new_entries, start=n_locked):
        at = f"{prereg}: amendments[{i}]"
        missing = [key for key in ANNOTATION_KEYS if key not in entry]
        if missing:
            problems.append(
                f"{at}: a new amendment must record {' and '.join(missing)} (after_results: whether results "
                "of an earlier version existed; replaces: each changed field's previous value, "
                "{was: <value>} or {absent: true})"
            )
        else:
            problems += change_problems(entry, raw, at)
    return problems


def _results_problems(
    prereg: Path,
    raw: Mapping[str, Any],
    versions: Sequence[Mapping[str, Any]],
    check: Sequence[int],
    results_hashes: Mapping[str, Sequence[str]],
) -> list[str]:
    """Entries in ``check`` that say ``after_results: false`` although manifests of an earlier version
    exist. A manifest hash of version v <= i is earlier than entry i; a hash no version of the history
    knows (and not the file being locked) counts as earlier too, since the lock cannot place it."""
    sha = canonical_sha256(raw)
    version_of = {h: v["version"] for v in versions for h in v["file_sha256"]}
    problems = []
    entries = raw.get("amendments", [])
    for i in check:
        if entries[i].get("after_results") is not False:
            continue
        for found, manifests in sorted(results_hashes.items()):
            if found == sha or version_of.get(found, -1) > i:
                continue
            which = (
                f"version {version_of[found]}" if found in version_of else "a hash this lock has no record of"
            )
            problems.append(
                f"{prereg}: amendments[{i}].after_results is false, but {manifests[0]} (and "
                f"{len(manifests) - 1} more) carries prereg sha256 {found[:12]}... ({which}): results of an "
                "earlier version existed when it was made; set after_results: true"
            )
    return problems


def _from_earlier_lock(
    prereg: Path, earlier: Mapping[str, Any], source: str, versions: list[dict[str, Any]]
) -> str | None:
    """Enter the version an earlier lock file covered into ``versions``; a problem text if it conflicts."""
    if earlier["file"] != prereg.name:
        return f"{source}: locks {earlier['file']!r}, not {prereg.name!r}"
    k = int(earlier["amendments"])
    if k >= len(versions):
        return f"{source}: covers {k} amendments, but {prereg} has only {len(versions) - 1}"
    own = earlier["versions"][k]
    record = versions[k]
    if record["sha256"] is not None and record["sha256"] != own["sha256"]:
        return (
            f"{source}: records version {k} as {own['sha256'][:12]}..., but the lock has "
            f"{record['sha256'][:12]}... for it"
        )
    record["sha256"], record["date"] = own["sha256"], record["date"] or own["date"]
    for h in own["file_sha256"]:
        if h not in record["file_sha256"]:
            record["file_sha256"].append(h)
    return None


def new_lock(
    prereg: str | os.PathLike[str],
    raw: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    date: str,
    earlier: Sequence[tuple[str, Mapping[str, Any]]] = (),
    results_hashes: Mapping[str, Sequence[str]] | None = None,
    extended: Sequence[Extended] = (),
) -> tuple[dict[str, Any], list[str]]:
    """The lock to write for ``raw`` (replacing ``old``, if any), with its verified history, and notes.

    ``earlier``: (file name, parsed lock) of older lock files of this design, whose versions enter the
    history (each verified by rebuilding it). ``results_hashes``: prereg hash -> manifests under the
    results folder that carry it; an entry saying ``after_results: false`` is refused when one is of an
    earlier version. ``extended``: the shared files the design extends, whose hashes the lock records.
    Raises :class:`LockError` listing every problem.
    """
    prereg = Path(prereg)
    entries = list(raw.get("amendments", []))
    n = len(entries)
    problems: list[str] = []
    notes: list[str] = []
    versions = [_version(k) for k in range(n + 1)]
    check_results: list[int] = []
    if old is not None:
        problems += relock_problems(prereg, old, raw)
        _, annotated = _entry_problems(str(prereg), old, entries)
        check_results = annotated + list(range(int(old["amendments"]), n))
        for record in old["versions"]:
            if record["version"] <= n:
                versions[record["version"]] = dict(record, file_sha256=list(record["file_sha256"]))
        for i in annotated:
            notes.append(
                f"amendments[{i}]: annotated with {', '.join(k for k in ANNOTATION_KEYS if k in entries[i])}"
            )
    else:
        check_results = list(range(n))
    for source, earlier_lock in earlier:
        problem = _from_earlier_lock(prereg, earlier_lock, source, versions)
        if problem:
            problems.append(problem)
    current = versions[n]
    if current["sha256"] is None:
        current["sha256"], current["date"] = design_sha256(raw), date
    elif current["sha256"] != design_sha256(raw):
        problems.append(
            f"{prereg}: the design of version {n} changed ({current['sha256'][:12]}... locked "
            f"{current['date']}, now {design_sha256(raw)[:12]}...) without a new amendment entry"
        )
    if canonical_sha256(raw) not in current["file_sha256"]:
        current["file_sha256"].append(canonical_sha256(raw))
    lock = build_lock(raw, prereg.name, date, versions, extends_record(extended))
    problems += history_problems(prereg, lock, raw)
    required = {int(e["amendments"]) for _, e in earlier}
    if old is not None and int(old["amendments"]) < n:
        required.add(int(old["amendments"]))
    for k in sorted(required):
        blocking = [i for i in range(k, n) if "replaces" not in entries[i]]
        if blocking:
            problems.append(
                f"{prereg}: version {k} cannot be verified: amendments[{blocking[-1]}] records no replaces"
            )
    for i, entry in enumerate(entries):
        undeclared = [p for p in entry.get("replaces", {}) if not covered_by(p, entry["fields"])]
        if undeclared and i < (int(old["amendments"]) if old is not None else 0):
            notes.append(
                f"amendments[{i}] replaced {', '.join(sorted(undeclared))}, which its fields "
                f"({', '.join(entry['fields'])}) do not name"
            )
    if results_hashes:
        problems += _results_problems(prereg, raw, lock["versions"], check_results, results_hashes)
    if problems:
        raise LockError("\n".join(problems))
    notes += _version_notes(lock["versions"], entries)
    return lock, notes


def _version_notes(versions: Sequence[Mapping[str, Any]], entries: Sequence[Any]) -> list[str]:
    """Each registered version's standing, in the words of decision.md's version table: rebuilt and
    matching the lock, not verified (the lock recorded no hash), or not rebuilt (a later entry records no
    ``replaces``). Called after every recorded hash was checked, so a rebuildable recorded one matches."""
    groups: dict[str, list[str]] = {}
    for v in versions:
        k = int(v["version"])
        if any("replaces" not in e for e in entries[k:]):
            standing = _NOT_REBUILT
        elif v["sha256"] is None:
            standing = _NO_HASH
        else:
            standing = _VERIFIED
        groups.setdefault(standing, []).append(str(k))
    return [
        f"version{'s' if len(groups[g]) > 1 else ''} {', '.join(groups[g])} {g}"
        for g in (_VERIFIED, _NO_HASH, _NOT_REBUILT)
        if g in groups
    ]


def utc_now_iso() -> str:
    """Current UTC time, ISO 8601 to the second (the lock's date)."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
