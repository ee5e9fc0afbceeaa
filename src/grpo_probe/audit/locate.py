"""Which job produced a file, and which recorded files that job's rerun needs.

Why from manifests: every rule lists its outputs (with sha256) in a manifest beside them, and its
upstream manifests list theirs, so the producing job and everything upstream of it can be found from
the results tree alone, without Snakemake's ``.snakemake/metadata`` (which an auditor who received a
results folder copied from a cluster does not have).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.extends import merge_extends
from grpo_probe.prereg.lock import lock_path
from grpo_probe.prereg.moved import read_moves
from grpo_probe.provenance.manifest import ManifestError, read_manifest

__all__ = ["JobRecord", "configured_results_dir", "find_producing_manifest", "job_record", "upstream_files"]

MANIFEST_SUFFIX = ".manifest.json"


@dataclass(frozen=True)
class JobRecord:
    """One job as its manifest recorded it; every path is relative to the workflow's root."""

    manifest: str
    rule: str
    prereg_path: str
    """Where the design lies now: the recorded path, or where ``prereg/MOVED.yaml`` says it moved."""
    outputs: tuple[dict[str, Any], ...]
    inputs: tuple[dict[str, Any], ...]
    raw: dict[str, Any]


def configured_results_dir(root: str | os.PathLike[str], overrides: dict[str, str] | None = None) -> str:
    """The ``results:`` directory of ``root/config/config.yaml`` (``results`` when unset), or its override."""
    if overrides and "results" in overrides:
        return overrides["results"]
    config = Path(root) / "config" / "config.yaml"
    if not config.is_file():
        return "results"
    values = read_yaml(config)
    if not isinstance(values, dict):
        raise ValueError(f"{config}: a config must be a YAML mapping, got {type(values).__name__}")
    results = values.get("results", "results")
    if not isinstance(results, str) or not results:
        raise ValueError(f"{config}: results must be a non-empty string, got {results!r}")
    return results


def _root_relative(path: str | os.PathLike[str], root: Path) -> str:
    """``path`` as the root-relative POSIX string manifests store; relative paths are tried at root first."""
    given = Path(path)
    candidates = [given] if given.is_absolute() else [root / given, Path.cwd() / given]
    for candidate in candidates:
        try:
            return Path(os.path.normpath(candidate.absolute())).relative_to(root).as_posix()
        except ValueError:
            continue
    raise ValueError(f"{path}: not under the audit root {root}")


def job_record(manifest_rel: str, root: str | os.PathLike[str]) -> JobRecord:
    """Read one manifest as a job record; errors name the manifest."""
    manifest = read_manifest(Path(root) / manifest_rel)
    prereg_path = manifest.get("prereg_path")
    if not isinstance(prereg_path, str):
        raise ManifestError(f"{manifest_rel}: manifest lacks 'prereg_path', so its design cannot be rerun")
    return JobRecord(
        manifest=manifest_rel,
        rule=manifest["rule"],
        prereg_path=read_moves(root).current(prereg_path),
        outputs=tuple(manifest["outputs"]),
        inputs=tuple(manifest["inputs"]),
        raw=manifest,
    )


def find_producing_manifest(
    path: str | os.PathLike[str], root: str | os.PathLike[str], results_dir: str = "results"
) -> str:
    """The root-relative manifest that lists ``path`` as an output (or ``path`` itself if it is one).

    Every ``*.manifest.json`` under ``root/results_dir`` is searched, so each design's results tree is.
    A file no manifest lists (logs, benchmarks, compute.md) has no recorded bytes to compare against.
    """
    root_path = Path(root).resolve()
    rel = _root_relative(path, root_path)
    if rel.endswith(MANIFEST_SUFFIX) and (root_path / rel).is_file():
        read_manifest(root_path / rel)  # a named manifest must parse; its own job is the one to rerun
        return rel
    results = root_path / results_dir
    if not results.is_dir():
        raise FileNotFoundError(f"{results}: no results directory to search for the manifest of {rel}")
    found = []
    for manifest_path in sorted(results.rglob(f"*{MANIFEST_SUFFIX}")):
        try:
            manifest = read_manifest(manifest_path)
        except (ManifestError, FileNotFoundError):
            continue  # an unreadable manifest lists nothing we could rerun; verify names it
        if any(entry["path"] == rel for entry in manifest["outputs"]):
            found.append(manifest_path.relative_to(root_path).as_posix())
    if not found:
        raise ValueError(
            f"{rel}: no manifest under {results} lists it as an output (logs, benchmarks and compute "
            "reports are not in the chain, so they have no recorded bytes to rerun against)"
        )
    if len(found) > 1:
        raise ValueError(f"{rel}: listed as an output by more than one manifest: {', '.join(found)}")
    return found[0]


def upstream_files(record: JobRecord, root: str | os.PathLike[str], results_dir: str) -> list[str]:
    """Root-relative files a rerun of ``record``'s job needs: the whole recorded chain upstream of it.

    That is every upstream manifest and the outputs each lists (a job may read a file two links up:
    decision reads the anchor tables), the prereg and its lock, and the job's own listed outputs that
    lie outside ``results_dir``: those are files the workflow reads but did not write (the prereg that
    prereg_check records, a user's checkpoint that bind_checkpoint records).
    """
    root_path = Path(root)
    files: list[str] = [record.prereg_path, lock_path(record.prereg_path).as_posix()]
    files += _extended_files(record.prereg_path, root_path)
    prefix = results_dir.rstrip("/") + "/"
    moves = read_moves(root_path)  # the design and its lock the root job lists may have moved since
    files += [moves.current(e["path"]) for e in record.outputs if not e["path"].startswith(prefix)]
    stack = [entry["path"] for entry in record.inputs]
    seen: set[str] = set()
    while stack:
        manifest_rel = stack.pop()
        if manifest_rel in seen:
            continue
        seen.add(manifest_rel)
        manifest = read_manifest(root_path / manifest_rel)
        files.append(manifest_rel)
        files += [entry["path"] for entry in manifest["outputs"]]
        stack += [entry["path"] for entry in manifest["inputs"]]
    return sorted(set(files))


def _extended_files(prereg: str, root: Path) -> list[str]:
    """Root-relative paths of the shared rule files the design extends (``extends:``): every job of the
    workflow reads the design merged with them, so its rerun needs them beside the design."""
    design = root / prereg
    _, extended = merge_extends(read_yaml(design), design)
    return [Path(os.path.relpath(shared.path.resolve(), root.resolve())).as_posix() for shared in extended]
