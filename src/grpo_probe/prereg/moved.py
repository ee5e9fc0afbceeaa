"""Registered files that moved: ``prereg/MOVED.yaml`` maps the path a file was registered under to where it
lies now, so a move is recorded rather than re-registered.

Why an index and not a re-lock: a design's lock and every manifest of its results hash its content, not
its path, so moving a design file (``git mv``, bytes unchanged) leaves its registered sha256 as it was.
Two things did name the old path, though. A results folder's manifests record ``prereg_path`` (and list
the design and its lock among the root job's outputs), which ``grpo-probe verify``, the audit and the
one-folder-per-design check read; they look the recorded path up here. And a study or a calibration names
its member designs by path inside its own hashed content; its hash is taken with each member named by the
path it was registered under (:func:`Moves.registered`), so pointing ``design:`` at the new place leaves
the study's lock, and every record made under it, as they were. A file moved twice is followed to its
last place, and a file that never moved is its own registered and current path.

The index is read from the working tree's root (the folder the workflow and the command line run in, where
member designs' paths are relative to); a copy of a registered study outside the repository takes the
index with it, as it takes the member designs.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from grpo_probe.prereg.canonical import read_yaml

__all__ = ["MOVES_FILE", "Moves", "MovesError", "read_moves", "registered_members"]

MOVES_FILE = Path("prereg/MOVED.yaml")
"""The index of moves, relative to the working tree's root."""

_LOCK = ".lock"
"""A design's lock lies beside it (``<design>.lock``) and moves with it, so the index lists designs alone."""

_FIELD = "moved"
"""Its one field: old path -> new path, both relative to the root."""


class MovesError(ValueError):
    """The index of moves is malformed: a path that is not a relative one, a target listed twice, a cycle."""


def _normal(path: str | os.PathLike[str]) -> str:
    """``path`` as the index keys it: POSIX separators, ``.`` and ``x/..`` folded (``./prereg/mine.yaml`` ->
    ``prereg/mine.yaml``), so a manifest's and a study's spelling of one file meet."""
    return posixpath.normpath(PurePosixPath(Path(path).as_posix()).as_posix())


@dataclass(frozen=True)
class Moves:
    """The moves of one working tree: old path -> new path, as the index lists them."""

    moved: Mapping[str, str] = field(default_factory=dict)

    def current(self, path: str | os.PathLike[str]) -> str:
        """Where the file registered (or recorded) as ``path`` lies now (a moved design's lock: beside the
        design's new place); ``path`` itself, as given, when it never moved."""
        here = _normal(path)
        if here.endswith(_LOCK) and here.removesuffix(_LOCK) in self.moved:
            return self.current(here.removesuffix(_LOCK)) + _LOCK
        if here not in self.moved:
            return str(path)
        seen = {here}
        while here in self.moved:
            here = self.moved[here]
            if here in seen:  # read_moves refuses cycles; a hand-built Moves is checked here too
                raise MovesError(f"{MOVES_FILE}: {path} moves in a cycle")
            seen.add(here)
        return here

    def registered(self, path: str | os.PathLike[str]) -> str:
        """The path the file at ``path`` was first registered under (before every move the index lists);
        ``path`` itself, as given, when it never moved (so a file that names it so hashes as it did)."""
        back = {new: old for old, new in self.moved.items()}
        here = _normal(path)
        if here.endswith(_LOCK) and here.removesuffix(_LOCK) in back:
            return self.registered(here.removesuffix(_LOCK)) + _LOCK
        if here not in back:
            return str(path)
        seen = {here}
        while here in back:
            here = back[here]
            if here in seen:
                raise MovesError(f"{MOVES_FILE}: {path} moves in a cycle")
            seen.add(here)
        return here


def _entries(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or set(raw) != {_FIELD} or not isinstance(raw[_FIELD], dict):
        raise MovesError(f"{where}: must be a mapping with one field, {_FIELD}: {{<old path>: <new path>}}")
    moved: dict[str, str] = {}
    for old, new in raw[_FIELD].items():
        for path in (old, new):
            if not isinstance(path, str) or not path or PurePosixPath(path).is_absolute() or "\\" in path:
                raise MovesError(
                    f"{where}: {_FIELD}: {path!r} is not a relative POSIX path (prereg/smoke.yaml); paths "
                    "are relative to the working tree's root, as manifests record them"
                )
        if _normal(old) != old or _normal(new) != new:
            raise MovesError(f"{where}: {_FIELD}: {old}: write both paths without ./ or .. ({old}: {new})")
        if old == new:
            raise MovesError(f"{where}: {_FIELD}: {old} moves to itself")
        if old.endswith(_LOCK) or new.endswith(_LOCK):
            raise MovesError(f"{where}: {_FIELD}: {old}: list the design; its lock moves with it")
        moved[old] = new
    targets: dict[str, str] = {}
    for old, new in moved.items():
        if new in targets:
            raise MovesError(
                f"{where}: {_FIELD}: {targets[new]} and {old} both move to {new}; a file has one "
                "registered path"
            )
        targets[new] = old
    moves = Moves(moved)
    for old in moved:
        try:
            moves.current(old)
        except MovesError:
            raise MovesError(f"{where}: {_FIELD}: {old} moves in a cycle") from None
    return moved


def read_moves(root: str | os.PathLike[str] = ".") -> Moves:
    """The moves ``root/prereg/MOVED.yaml`` lists (none when the file is absent); errors name the file."""
    path = Path(root) / MOVES_FILE
    if not path.is_file():
        return Moves()
    return Moves(_entries(read_yaml(path), str(path)))


def registered_members(raw: Mapping[str, Any], field_name: str, moves: Moves) -> dict[str, Any]:
    """``raw`` (a study's or a calibration's parsed file) with each ``raw[field_name][i].design`` replaced by
    the path that design was registered under: the form the file's hash is taken of, so moving a member
    (and pointing ``design:`` at its new place) leaves the file's lock valid. Entries that are not
    mappings with a string ``design`` are left as they are, for the schema to name."""
    entries = raw.get(field_name)
    if not isinstance(entries, list):
        return dict(raw)
    named = [
        dict(e, design=moves.registered(e["design"]))
        if isinstance(e, Mapping) and isinstance(e.get("design"), str)
        else e
        for e in entries
    ]
    return {**raw, field_name: named}
