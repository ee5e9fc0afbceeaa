"""The study's workflow step and its audit: the page from the members' records, and the chains behind it.

Why a manifest whose inputs are the members' manifests: each member's chain already ends at its own locked
design, so the study's manifest only adds the study file's hash and its outputs. :func:`verify_study`
re-hashes those, checks the study against its lock, and walks every member's chain, so an auditor can
trace the study's answer back to each design it read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from grpo_probe.provenance.chain import BrokenLinkError, ChainReport, verify_chain
from grpo_probe.provenance.manifest import file_sha256, read_manifest, write_manifest
from grpo_probe.study.design import load_study
from grpo_probe.study.report import build_study_report

__all__ = ["StudyVerification", "study_report", "verify_study"]

PathLike = str | os.PathLike[str]


def study_report(
    study_path: PathLike,
    decisions: Sequence[PathLike],
    phase2s: Sequence[PathLike],
    upstream: Sequence[PathLike],
    out_md: PathLike,
    out_json: PathLike,
    out_table: PathLike,
    out_figure: PathLike,
    manifest: PathLike,
) -> None:
    """validation.md and its record, table and figure; ``upstream``: each member's decision and phase-2
    manifests, which the study's manifest chains to."""
    study = load_study(study_path)
    build_study_report(study, decisions, phase2s, out_md, out_json, out_table, out_figure)
    write_manifest(
        manifest,
        [out_md, out_json, out_table, out_figure],
        upstream,
        study.sha256,
        "study_report",
        extra={"study_path": Path(study_path).as_posix()},
    )


@dataclass
class StudyVerification:
    """A verified study: its own outputs re-hashed, and one verified chain per member manifest."""

    study_path: str
    artifacts: int = 0
    chains: list[ChainReport] = field(default_factory=list)


def verify_study(manifest_path: PathLike, root: PathLike | None = None) -> StudyVerification:
    """Re-hash the study's outputs, check the study against its lock, and verify every member's chain.

    Raises :class:`grpo_probe.provenance.chain.BrokenLinkError` at the first broken link.
    """
    root_path = Path(root) if root is not None else Path.cwd()
    manifest = read_manifest(manifest_path)
    study_rel = manifest.get("extra", {}).get("study_path")
    if not study_rel:
        raise BrokenLinkError(str(manifest_path), None, "not a study manifest (no study_path)", None, None)
    study = load_study(root_path / study_rel)
    if study.sha256 != manifest["prereg_sha256"]:
        raise BrokenLinkError(
            study_rel,
            str(manifest_path),
            "study changed since its page",
            manifest["prereg_sha256"],
            study.sha256,
        )
    result = StudyVerification(study_path=study_rel)
    for entry in manifest["outputs"]:
        path = root_path / entry["path"]
        if not path.is_file():
            raise BrokenLinkError(
                entry["path"], str(manifest_path), "output is missing", entry["sha256"], None
            )
        found = file_sha256(path)
        if found != entry["sha256"]:
            raise BrokenLinkError(entry["path"], str(manifest_path), "output changed", entry["sha256"], found)
        result.artifacts += 1
    for entry in manifest["inputs"]:
        path = root_path / entry["path"]
        found = file_sha256(path) if path.is_file() else None
        if found != entry["sha256"]:
            reason = "member manifest is missing" if found is None else "member manifest changed"
            raise BrokenLinkError(entry["path"], str(manifest_path), reason, entry["sha256"], found)
        result.chains.append(verify_chain(path, root=root_path))
    return result
