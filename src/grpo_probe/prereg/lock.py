"""Locks: the registered design's hash, written once, changed only by an appended amendment.

Why: a pre-registration is worth something only if the design cannot move after results exist. A lock
(``<prereg>.lock``, JSON) holds the sha256 of the prereg's canonical form, the UTC date it was taken, the
number of amendments it covers and the hash of each. Every run checks the prereg against its lock before
doing any work. Re-locking a changed design is allowed only when the change comes with new amendment
entries that name the changed sections, and every earlier amendment is byte-for-byte what was locked.
The lock also keeps one hash per top-level section, so a mismatch can say *what* changed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grpo_probe.atomic_io import atomic_write_text
from grpo_probe.prereg.canonical import canonical_sha256

__all__ = [
    "LOCK_FORMAT",
    "LockError",
    "build_lock",
    "changed_sections",
    "check_lock",
    "lock_path",
    "read_lock",
    "relock_problems",
    "utc_now_iso",
    "write_lock",
]

LOCK_FORMAT = 1


class LockError(ValueError):
    """The prereg and its lock disagree, or a re-lock would rewrite registered history."""


def lock_path(prereg_path: str | os.PathLike[str]) -> Path:
    """``prereg/smoke.yaml`` -> ``prereg/smoke.yaml.lock``."""
    path = Path(prereg_path)
    return path.with_name(path.name + ".lock")


def build_lock(raw: Mapping[str, Any], file_name: str, date: str) -> dict[str, Any]:
    """The lock record of a parsed prereg."""
    amendments = list(raw.get("amendments", []))
    return {
        "format": LOCK_FORMAT,
        "file": file_name,
        "sha256": canonical_sha256(raw),
        "date": date,
        "amendments": len(amendments),
        "amendment_sha256": [canonical_sha256(a) for a in amendments],
        "section_sha256": {key: canonical_sha256(value) for key, value in sorted(raw.items())},
    }


def read_lock(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a lock file; errors name it."""
    path = Path(path)
    try:
        lock = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such lock file") from None
    except json.JSONDecodeError as exc:
        raise LockError(f"{path}: not a valid lock file: {exc}") from None
    required = ("format", "file", "sha256", "date", "amendments", "amendment_sha256", "section_sha256")
    missing = [key for key in required if key not in lock] if isinstance(lock, dict) else list(required)
    if missing:
        raise LockError(f"{path}: not a valid lock file (missing {', '.join(missing)})")
    if lock["format"] != LOCK_FORMAT:
        raise LockError(f"{path}: lock format {lock['format']!r} is not supported (expected {LOCK_FORMAT})")
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
        "({date: YYYY-MM-DD, reason: ..., fields: [<changed field paths>]}), leave earlier entries as they "
        "are, "
        f"then run `grpo-probe prereg lock {prereg}`."
    )


def check_lock(prereg: str | os.PathLike[str], raw: Mapping[str, Any]) -> dict[str, Any]:
    """Return the lock of ``prereg`` if it covers exactly ``raw``; otherwise raise naming both files."""
    prereg = Path(prereg)
    path = lock_path(prereg)
    if not path.exists():
        raise LockError(
            f"{prereg}: not locked (no {path}); run `grpo-probe prereg lock {prereg}` to register it"
        )
    lock = read_lock(path)
    if lock["file"] != prereg.name:
        raise LockError(f"{path}: locks {lock['file']!r}, not {prereg.name!r}")
    if lock["sha256"] != canonical_sha256(raw):
        changed = ", ".join(changed_sections(lock, raw)) or "(formatting of the lock)"
        raise LockError(
            f"{prereg}: does not match its lock {path} (locked {lock['date']}, "
            f"sha256 {lock['sha256'][:12]}..., now {canonical_sha256(raw)[:12]}...); "
            f"changed sections: {changed}. {_how_to_amend(prereg)}"
        )
    return lock


def _section_of(field: str) -> str:
    return field.split(".", 1)[0].split("[", 1)[0]


def relock_problems(
    prereg: str | os.PathLike[str], lock: Mapping[str, Any], raw: Mapping[str, Any]
) -> list[str]:
    """Why ``raw`` may not replace the design ``lock`` covers (empty when the re-lock is allowed)."""
    prereg = Path(prereg)
    where = f"{prereg} (lock {lock_path(prereg)})"
    amendments: Sequence[Any] = raw.get("amendments", [])
    n_locked = int(lock["amendments"])
    problems: list[str] = []
    if len(amendments) < n_locked:
        problems.append(
            f"{where}: amendments are append-only: the lock covers {n_locked}, "
            f"the file has {len(amendments)}; restore the removed entries"
        )
    for i, (locked_hash, entry) in enumerate(zip(lock["amendment_sha256"], amendments, strict=False)):
        if canonical_sha256(entry) != locked_hash:
            problems.append(
                f"{where}: amendments[{i}] differs from the locked entry; earlier amendments never change"
            )
    if problems:
        return problems
    new_entries = list(amendments[n_locked:])
    changed = [s for s in changed_sections(lock, raw) if s != "amendments"]
    if not new_entries:
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
    return problems


def utc_now_iso() -> str:
    """Current UTC time, ISO 8601 to the second (the lock's date)."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
