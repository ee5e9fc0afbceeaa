"""Verify a manifest chain: re-hash every artifact from a target manifest back to the prereg.

Why: an auditor should not have to trust that results/decision.md came from the locked design through the
registered order. Starting at the target manifest, every listed output is re-hashed, every upstream
manifest is re-hashed against the hash its consumer recorded and then visited in turn (depth first, in
listed order), every manifest must carry the same prereg hash, and the chain must end at a manifest that
records the prereg file, whose canonical hash and lock must still match. The first broken link is named:
the file, the manifest that vouched for it, and the expected and found hash.

A design that moved since its results were made (listed in ``prereg/MOVED.yaml`` of the root,
:mod:`grpo_probe.prereg.moved`) is looked for at its new place, as its lock is: the manifests keep the
path they recorded, and the move changes no byte of either file, so every hash is checked as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_probe.prereg.canonical import canonical_sha256, read_yaml
from grpo_probe.prereg.extends import ExtendsError, merge_extends
from grpo_probe.prereg.lock import lock_path, read_lock, shared_file_changes
from grpo_probe.prereg.moved import MOVES_FILE, Moves, read_moves
from grpo_probe.provenance.environments import environment_line, same_numerics_environment
from grpo_probe.provenance.machine import code_version, environment
from grpo_probe.provenance.manifest import ManifestError, file_sha256, read_manifest, relative_to_root

__all__ = ["BrokenLinkError", "ChainReport", "verify_chain"]

MOVES_NAME = MOVES_FILE.as_posix()


class BrokenLinkError(ValueError):
    """The first link of a manifest chain that does not hold."""

    def __init__(
        self, file: str, manifest: str | None, problem: str, expected: str | None, found: str | None
    ):
        self.file = file
        self.manifest = manifest
        self.problem = problem
        self.expected = expected
        self.found = found
        where = f" (listed in {manifest})" if manifest else ""
        hashes = f": expected {expected}, found {found}" if expected is not None or found is not None else ""
        super().__init__(f"{file}{where}: {problem}{hashes}")


@dataclass
class ChainReport:
    """A verified chain: the manifests visited (target first), artifacts re-hashed, and where it ends."""

    target: str
    prereg_sha256: str
    prereg_path: str
    manifests: list[str] = field(default_factory=list)
    artifacts: int = 0
    notes: list[str] = field(default_factory=list)
    """Differences between the recorded code/environment and this machine's (not failures)."""


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    """Nested dicts as dotted keys (``environment.packages.torch``), so each differing value is one note."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, sub in value.items():
            out.update(_flat(sub, f"{prefix}.{key}"))
        return out
    return {prefix: value}


def _package_notes(recorded: Any, current: dict[str, Any]) -> list[str]:
    """One note per package whose version differs, and one for those on one side only.

    Why apart from the rest: a record lists every installed distribution (an older one only a few), and a
    package absent from the record is not known to differ, so those are counted in one line, not listed."""
    recorded = recorded if isinstance(recorded, dict) else {}
    notes = [
        f"environment.packages.{name}: recorded {recorded[name]!r}, this machine {current[name]!r}"
        for name in sorted(set(recorded) & set(current))
        if recorded[name] != current[name]
    ]
    here_only, recorded_only = sorted(set(current) - set(recorded)), sorted(set(recorded) - set(current))
    if here_only or recorded_only:
        sides = []
        if recorded_only:
            sides.append(f"{len(recorded_only)} recorded but not installed here: {', '.join(recorded_only)}")
        if here_only:
            sides.append(f"{len(here_only)} installed here but not in the record")
        notes.append(f"environment.packages: {'; '.join(sides)}")
    return notes


def _environment_notes(manifest_rel: str, manifest: dict[str, Any], seen: set[str]) -> list[str]:
    """Where the recorded code and environment differ from this machine's, led by whether the two
    environments are byte-compatible: that line says whether a rerun here must give the recorded bytes."""
    here = {"code": code_version(), "environment": environment()}
    found = []
    for section, current in here.items():
        recorded = manifest.get(section, {})
        recorded = recorded if isinstance(recorded, dict) else {}
        if section == "environment":
            found += _package_notes(recorded.get("packages"), current.pop("packages", {}) or {})
            recorded = {key: value for key, value in recorded.items() if key != "packages"}
        old, new = _flat(recorded, section), _flat(current, section)
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                found.append(f"{key}: recorded {old.get(key)!r}, this machine {new.get(key)!r}")
    if not found:
        return []
    differing = same_numerics_environment(manifest.get("environment"), here["environment"])
    lead = f"environment: {environment_line(differing)}" + (
        "; a rerun here need not give the recorded bytes" if differing else ""
    )
    notes = []
    for note in (lead, *found):
        if note not in seen:
            seen.add(note)
            notes.append(f"{manifest_rel}: {note}")
    return notes


def _check_prereg(root: Path, manifest_rel: str, recorded_rel: str, expected_sha: str, moves: Moves) -> None:
    prereg_rel = moves.current(recorded_rel)
    prereg = root / prereg_rel
    if not prereg.is_file():
        moved = f" (moved to {prereg_rel}, per {MOVES_NAME})" if prereg_rel != recorded_rel else ""
        raise BrokenLinkError(
            recorded_rel, manifest_rel, f"prereg file is missing{moved}", expected_sha, None
        )
    try:  # the design as registered: merged with the shared files it extends
        raw, extended = merge_extends(read_yaml(prereg), prereg)
    except ExtendsError as exc:
        raise BrokenLinkError(prereg_rel, manifest_rel, str(exc), expected_sha, None) from None
    found = canonical_sha256(raw)
    lock_file = lock_path(prereg)
    if found != expected_sha:
        shared = shared_file_changes(read_lock(lock_file), extended) if lock_file.is_file() else []
        problem = "; ".join(["prereg content changed (canonical sha256)", *shared])
        raise BrokenLinkError(prereg_rel, manifest_rel, problem, expected_sha, found)
    lock_rel = lock_file.relative_to(root).as_posix()
    if not lock_file.is_file():
        raise BrokenLinkError(lock_rel, manifest_rel, "prereg lock is missing", expected_sha, None)
    locked = read_lock(lock_file)["sha256"]
    if locked != expected_sha:
        raise BrokenLinkError(
            lock_rel, manifest_rel, "prereg lock covers a different design", expected_sha, locked
        )


def _check_entry(path: Path, manifest_rel: str, entry: dict[str, str], missing: str, changed: str) -> None:
    """A file a manifest lists (``entry``: its recorded path and sha256), found at ``path``, must exist
    and hold the bytes recorded; otherwise the link breaks with ``missing`` or ``changed``. One check for
    a manifest's outputs, its input manifests and its sources, so each names the file the same way."""
    if not path.is_file():
        raise BrokenLinkError(entry["path"], manifest_rel, missing, entry["sha256"], None)
    found = file_sha256(path)
    if found != entry["sha256"]:
        raise BrokenLinkError(entry["path"], manifest_rel, changed, entry["sha256"], found)


def _check_source(root: Path, manifest_rel: str, entry: dict[str, str]) -> None:
    """A user's file the step read (environment or adapter code, a checkpoint folder's file) must hold
    the bytes it held then: otherwise the results describe code or weights that no longer exist."""
    _check_entry(
        root / entry["path"],
        manifest_rel,
        entry,
        "source is missing (the step read it)",
        "source changed since the step read it; its results are stale (snakemake plans the jobs "
        "that read it again)",
    )


def verify_chain(target: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> ChainReport:
    """Re-hash the chain ending at ``target``; raise :class:`BrokenLinkError` at the first broken link.

    Paths in manifests are relative to ``root`` (default: the working directory).
    """
    root_path = Path(root).resolve() if root is not None else Path.cwd().resolve()
    target_rel = relative_to_root(target, root_path)
    if not (root_path / target_rel).is_file():
        raise BrokenLinkError(target_rel, None, "target manifest is missing", None, None)
    try:
        moves = read_moves(root_path)
    except ValueError as exc:
        raise BrokenLinkError(MOVES_NAME, None, f"unreadable index of moves ({exc})", None, None) from None
    report: ChainReport | None = None
    seen_notes: set[str] = set()
    visited: set[str] = set()
    stack: list[str] = [target_rel]
    while stack:
        manifest_rel = stack.pop()
        if manifest_rel in visited:
            continue
        visited.add(manifest_rel)
        try:
            manifest = read_manifest(root_path / manifest_rel)
        except ManifestError as exc:
            raise BrokenLinkError(manifest_rel, None, f"unreadable manifest ({exc})", None, None) from None
        if report is None:
            report = ChainReport(target=target_rel, prereg_sha256=manifest["prereg_sha256"], prereg_path="")
        report.manifests.append(manifest_rel)
        if manifest["prereg_sha256"] != report.prereg_sha256:
            raise BrokenLinkError(
                manifest_rel,
                None,
                "prereg hash differs from the target's",
                report.prereg_sha256,
                manifest["prereg_sha256"],
            )
        for entry in manifest["outputs"]:
            path = root_path / moves.current(entry["path"])  # the root job lists the design and its lock
            _check_entry(path, manifest_rel, entry, "output is missing", "output changed")
            report.artifacts += 1
        if "prereg_path" in manifest:
            _check_prereg(root_path, manifest_rel, manifest["prereg_path"], report.prereg_sha256, moves)
            report.prereg_path = report.prereg_path or manifest["prereg_path"]
        upstream = []
        for entry in manifest["inputs"]:
            path = root_path / entry["path"]
            _check_entry(path, manifest_rel, entry, "input manifest is missing", "input manifest changed")
            upstream.append(entry["path"])
        for entry in manifest.get("sources", ()):
            _check_source(root_path, manifest_rel, entry)
        stack.extend(reversed(upstream))  # depth first, in listed order
        report.notes += _environment_notes(manifest_rel, manifest, seen_notes)
    assert report is not None  # the target was visited
    if not report.prereg_path:
        raise BrokenLinkError(
            target_rel,
            None,
            "the chain never reaches the prereg (no manifest records prereg_path)",
            None,
            None,
        )
    return report
