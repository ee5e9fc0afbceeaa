"""Shared rule files: a design that ``extends:`` one is merged with it before anything else reads it.

Why: most shipped designs register the same signal criterion word for word. Written once in a shared
file under ``prereg/rules/``, it is one registered text instead of twenty copies that could drift apart.
The merge happens before the schema, the cross-field rules and the hash see the design, so a design that
extends a file hashes exactly as the same design written out in full: converting one changes neither its
registered sha256 nor any result. What a design registers must stay readable from two files at most, so
a shared file extends nothing itself, and a field set in both files is refused rather than overridden:
a shared rule that a design could quietly replace would not be shared.

The lock records each extended file's sha256 (of its canonical form, as the design's own hash is: a
comment or a reindent is no change), so ``grpo-probe verify`` and ``grpo-probe prereg check`` name the
shared file when it moved (:func:`grpo_probe.prereg.lock.check_lock`).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_probe.prereg.canonical import canonical_sha256, read_yaml

__all__ = [
    "EXTENDS",
    "Extended",
    "ExtendsError",
    "merge_extends",
    "read_design",
    "set_in_shared_file",
]

EXTENDS = "extends"
"""The design's field naming the shared files it extends: a path, or a list of paths."""

_NOT_SHARED = ("name", "amendments", EXTENDS)
"""Top-level fields a shared file may not set: a design's own name and history, and a second level of
extension (what a design registers stays readable in two files)."""

_REGISTRY = "prereg"
"""The registry's folder: a design in a folder of its purpose under it (``prereg/designs/smoke/``) names a
shared file relative to it (``rules/signal.yaml``), as a design at its top does."""

_FALLBACK = Path(_REGISTRY)
"""Where a shared file is looked for when it is found neither beside the design nor in a folder enclosing
it up to the registry's: the designs' folder of the working directory (the workflow runs from the
repository root), so a design copied elsewhere still finds it."""


class ExtendsError(ValueError):
    """A design's ``extends:`` names a file that is missing or invalid, or sets a field the file sets."""


@dataclass(frozen=True)
class Extended:
    """One shared file a design extends, as found when the design was read."""

    named: str
    """The path as the design writes it (``rules/signal.yaml``), the key of the lock's record."""
    path: Path
    """Where it was found: beside the design, else in a folder enclosing it up to the registry's
    ``prereg/``, else under the working directory's ``prereg/``."""
    sha256: str
    """The sha256 of its canonical form (:func:`grpo_probe.prereg.canonical.canonical_sha256`)."""
    fields: tuple[str, ...]
    """The field paths it contributes to the merged design (``decision_rule.criteria.signal``)."""


def _named(raw: Mapping[str, Any], where: str) -> list[str]:
    value = raw[EXTENDS]
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ExtendsError(
            f"{where}: {EXTENDS}: a shared file's path relative to the design (rules/signal.yaml) or a "
            f"non-empty list of them, got {value!r}"
        )
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ExtendsError(f"{where}: {EXTENDS}[{i}]: {name!r} is listed twice")
        if Path(name).is_absolute():
            raise ExtendsError(
                f"{where}: {EXTENDS}: {name!r} is absolute; name the file relative to the design, so the "
                "design reads the same on every machine"
            )
    return names


def _enclosing(design: Path) -> list[Path]:
    """The folders a shared file is looked for in, nearest first: the design's own, then each enclosing
    one up to the nearest named ``prereg`` (none above the design's own when no enclosing folder is).

    Why up to the registry's folder: the name a design writes (``rules/signal.yaml``) is the key of its
    lock's ``extends_sha256``, so a design moved into a folder of its purpose keeps writing the same name
    and its lock stays as it was; the registry's top is where that name is found. Stopping there keeps a
    design from picking up an unrelated ``rules/`` folder higher up the file system.
    """
    folders = [design.parent]
    if design.parent.name == _REGISTRY:
        return folders
    for folder in design.parent.parents:
        folders.append(folder)
        if folder.name == _REGISTRY:
            return folders
    return folders[:1]


def _find(name: str, design: Path) -> Path:
    looked = list(dict.fromkeys([folder / name for folder in _enclosing(design)] + [_FALLBACK / name]))
    for candidate in looked:
        if candidate.is_file():
            return candidate
    raise ExtendsError(
        f"{design}: {EXTENDS}: {name!r}: no such file (looked for "
        f"{', '.join(p.as_posix() for p in looked[:-1])} and {looked[-1].as_posix()})"
    )


def _read_shared(name: str, path: Path, design: Path, known: Collection[str] | None) -> dict[str, Any]:
    try:
        shared = read_yaml(path)
    except ValueError as exc:
        raise ExtendsError(f"{design}: {EXTENDS}: {name!r}: {exc}") from None
    if not isinstance(shared, dict) or not shared:
        raise ExtendsError(
            f"{path}: a shared file is a non-empty mapping of design fields (decision_rule: ...), got "
            f"{type(shared).__name__ if shared else 'nothing'} (extended by {design})"
        )
    for key in shared:
        if key in _NOT_SHARED:
            raise ExtendsError(
                f"{path}: {key}: a shared file may not set {key!r} (a design's own name and amendments "
                f"stay in the design, and a shared file extends nothing) (extended by {design})"
            )
        if known is not None and key not in known:
            raise ExtendsError(
                f"{path}: {key}: not a design field (the fields are {', '.join(sorted(known))}) "
                f"(extended by {design})"
            )
    return shared


def _merge(
    base: Mapping[str, Any], own: Mapping[str, Any], at: str, sources: tuple[str, str], found: list[str]
) -> dict[str, Any]:
    """``own`` over ``base``: mappings merge field by field; any other field set in both is refused.

    Key order: the fields only ``base`` sets first (in its order), then ``own``'s in its order, so a
    criterion shared ahead of a design's own keeps the place it had when written out in full.
    """
    merged = {k: v for k, v in base.items() if k not in own}
    found += [f"{at}{k}" for k in merged]
    for key, value in own.items():
        if key not in base:
            merged[key] = value
        elif isinstance(value, Mapping) and isinstance(base[key], Mapping):
            merged[key] = _merge(base[key], value, f"{at}{key}.", sources, found)
        else:
            raise ExtendsError(
                f"{sources[1]}: {at}{key}: also set in {sources[0]}, which it extends; a shared field is "
                "not overridden: remove it from one of the two files"
            )
    return merged


def merge_extends(
    raw: Any, path: str | os.PathLike[str], known: Collection[str] | None = None
) -> tuple[Any, tuple[Extended, ...]]:
    """The design ``raw`` (read from ``path``) merged with the files its ``extends:`` names, without the
    ``extends`` field, and those files; a design that extends nothing comes back as it is.

    ``known``: the top-level fields a design may have (the schema's), which a shared file's fields must
    be among; None skips that check (the schema then refuses the merged design). Raises
    :class:`ExtendsError` naming the file and the field.
    """
    if not isinstance(raw, Mapping) or EXTENDS not in raw:
        return raw, ()
    design = Path(path)
    own = {k: v for k, v in raw.items() if k != EXTENDS}
    merged: dict[str, Any] = {}
    extended = []
    for name in _named(raw, str(design)):
        found = _find(name, design)
        shared = _read_shared(name, found, design, known)
        fields: list[str] = []
        merged = _merge(merged, shared, "", (" and ".join(e.named for e in extended), found.as_posix()), [])
        _merge(shared, own, "", (found.as_posix(), str(design)), fields)
        extended.append(Extended(name, found, canonical_sha256(shared), tuple(fields)))
    sources = (" and ".join(e.path.as_posix() for e in extended), str(design))
    return _merge(merged, own, "", sources, []), tuple(extended)


def read_design(path: str | os.PathLike[str]) -> Any:
    """A design file as registered: parsed strictly and merged with the files it extends.

    The form every hash of a design is taken of (its lock, the manifests' ``prereg_sha256``).
    """
    return merge_extends(read_yaml(path), path)[0]


def set_in_shared_file(line: str, where: str, extended: tuple[Extended, ...]) -> str:
    """``line`` (``"<where>: <field path>: <problem>"``) with the shared file named when the field it
    reports comes from one, so the reader edits the file that holds it."""
    prefix = f"{where}: "
    if not line.startswith(prefix):
        return line
    field = line[len(prefix) :]
    for shared in extended:
        for contributed in shared.fields:
            rest = field[len(contributed) :]
            if field.startswith(contributed) and rest[:1] in (".", "[", ":"):
                return f"{line} (set in {shared.path.as_posix()}, which {where} extends)"
    return line
