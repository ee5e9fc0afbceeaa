"""Rerun the one job that produced a file, in a scratch copy, exactly as the workflow runs it.

Why through Snakemake: the job must run with the rule's own inputs, params, threads, wildcards and
script, so the rerun is a Snakemake run of the workflow's own files, targeted at the job's manifest and
restricted to the recorded rule (``--allowed-rules``): every upstream file is then treated as given,
and nothing but that job can run. The scratch directory holds the workflow files of the audited tree
(``workflow/``, ``config/``) and the recorded chain upstream of the job, at the same root-relative
paths, so the rerun writes its outputs (and its manifest) at the paths the manifest records. Before
anything runs, the chain upstream of the job is verified: a rerun from inputs that no longer match
their manifests would prove nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_probe.audit.across import DecisionComparison, compare_decisions
from grpo_probe.audit.compare import OutputComparison, compare_output
from grpo_probe.audit.locate import (
    JobRecord,
    configured_results_dir,
    find_producing_manifest,
    job_record,
    upstream_files,
)
from grpo_probe.provenance.chain import BrokenLinkError, verify_chain
from grpo_probe.provenance.environments import same_numerics_environment
from grpo_probe.provenance.machine import environment
from grpo_probe.provenance.manifest import file_sha256, read_manifest

__all__ = ["WORKFLOW_FILES", "AuditResult", "RerunFailedError", "audit", "rerun_settings"]

WORKFLOW_FILES = ("workflow", "config", "profiles/default")
"""What, besides the recorded chain, a job needs to run: the workflow's own files, from the audited tree
(``profiles/default`` is the profile Snakemake reads by itself; a cluster profile is not wanted here)."""

_TAIL = 4000


class RerunFailedError(RuntimeError):
    """The rerun's Snakemake run failed; the message holds the tail of its output and of the job's log."""


@dataclass
class AuditResult:
    """One audited job: its recorded outputs against the rerun's, and notes that are not failures."""

    target: str
    manifest: str
    rule: str
    outputs: list[OutputComparison]
    command: list[str]
    seconds: float
    notes: list[str] = field(default_factory=list)
    scratch: Path | None = None
    """The scratch directory when kept (``keep=True``), else None."""
    environment_differs: list[str] = field(default_factory=list)
    """Keys in which the manifest's environment and this machine's are not byte-compatible
    (:func:`~grpo_probe.provenance.environments.same_numerics_environment`); empty: bytes must match."""
    environments: tuple[dict[str, Any] | None, dict[str, Any] | None] = (None, None)
    """The manifest's recorded environment and this machine's."""
    across: DecisionComparison | None = None
    """The recorded decision.json against the rerun's, compared as across environments allow; only when
    the job wrote a decision.json that differs and the environments are not byte-compatible."""

    @property
    def identical(self) -> bool:
        return all(out.identical for out in self.outputs)

    @property
    def another_environment(self) -> bool:
        """Whether differing bytes may come from the machine rather than from a change."""
        return bool(self.environment_differs)


def _check_inputs(record: JobRecord, root: Path) -> None:
    """Each upstream manifest still hashes as the job recorded it, and its own chain verifies."""
    for entry in record.inputs:
        path = root / entry["path"]
        if not path.is_file():
            raise BrokenLinkError(
                entry["path"], record.manifest, "input manifest is missing", entry["sha256"], None
            )
        found = file_sha256(path)
        if found != entry["sha256"]:
            raise BrokenLinkError(
                entry["path"], record.manifest, "input manifest changed", entry["sha256"], found
            )
        verify_chain(entry["path"], root=root)


def rerun_settings(record: JobRecord, root: str | os.PathLike[str]) -> dict[str, str]:
    """Snakemake ``--config`` values the recorded job implies: its design, and for a join its shard size.

    A join's inputs are its cell's shards, whose names follow ``seeds_per_shard``; the recorded shard
    manifests list their seeds, and the largest shard's seed count gives back the same split.
    """
    settings = {"prereg": record.prereg_path}
    shard_sizes = []
    for entry in record.inputs:
        upstream = read_manifest(Path(root) / entry["path"])
        seeds = upstream.get("extra", {}).get("seeds")
        if upstream["rule"] == "probe" and isinstance(seeds, list):
            shard_sizes.append(len(seeds))
    if shard_sizes:
        settings["seeds_per_shard"] = str(max(shard_sizes))
    return settings


def _stage(record: JobRecord, root: Path, scratch: Path, results_dir: str) -> None:
    for name in WORKFLOW_FILES:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, scratch / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.is_file():
            shutil.copy2(source, scratch / name)
    if not (scratch / "workflow" / "Snakefile").is_file():
        snakefile = root / "workflow" / "Snakefile"
        raise FileNotFoundError(f"{snakefile}: the audited tree has no workflow to rerun")
    for rel in upstream_files(record, root, results_dir):
        source = root / rel
        if not source.is_file():
            raise FileNotFoundError(f"{source}: recorded upstream of {record.manifest} but missing")
        (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, scratch / rel)  # copies, not links: nothing the rerun does can touch the tree


def _job_logs(scratch: Path, results_dir: str) -> str:
    logs = sorted((scratch / results_dir).rglob("logs/**/*.log"))
    return "\n".join(f"--- {p.relative_to(scratch)}\n{p.read_text(errors='replace')[-_TAIL:]}" for p in logs)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, sub in value.items():
            out.update(_flatten(sub, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def _manifest_notes(record: JobRecord, rerun_manifest: Path) -> list[str]:
    """How the rerun's own manifest differs from the recorded one (code, machine), field by field."""
    if not rerun_manifest.is_file():
        return [f"{record.manifest}: the rerun wrote no manifest"]
    rerun = json.loads(rerun_manifest.read_text(encoding="utf-8"))
    recorded, found = _flatten(record.raw), _flatten(rerun)
    differing = [key for key in sorted(set(recorded) | set(found)) if recorded.get(key) != found.get(key)]
    if not differing:
        return [f"{record.manifest}: the rerun's manifest records the same inputs, code and machine"]
    return [
        f"{record.manifest}: {key}: recorded {recorded.get(key)!r}, rerun {found.get(key)!r}"
        for key in differing
        if not key.startswith("outputs")  # the outputs are compared one by one
    ]


def decision_across(
    outputs: list[OutputComparison],
    root: Path,
    scratch: Path,
    environments: tuple[dict[str, Any] | None, dict[str, Any] | None],
) -> tuple[DecisionComparison | None, list[str]]:
    """The rerun's decision.json against the recorded one when they differ, compared across environments.

    Why: on another machine the bytes of a decision record are expected to differ; whether the decision
    and its intervals hold is what the auditor can still check. The recorded record is read only when the
    file in the tree still holds the recorded bytes; otherwise a note says why nothing was compared.
    """
    for out in outputs:
        if Path(out.path).name != "decision.json" or out.identical or out.found_sha256 is None:
            continue
        recorded = root / out.path
        if not recorded.is_file() or file_sha256(recorded) != out.expected_sha256:
            return None, [f"{out.path}: the recorded bytes are not at hand; the decisions were not compared"]
        rerun = json.loads((scratch / out.path).read_text(encoding="utf-8"))
        record = json.loads(recorded.read_text(encoding="utf-8"))
        here, recorded_env = environments[1], environments[0]
        return compare_decisions(rerun, record, ("rerun", "recorded"), environments=(here, recorded_env)), []
    return None, []


def audit(
    path: str | os.PathLike[str],
    root: str | os.PathLike[str] | None = None,
    *,
    keep: bool = False,
    cores: int | None = None,
    config: Mapping[str, str] | None = None,
    scratch_parent: str | os.PathLike[str] | None = None,
) -> AuditResult:
    """Rerun the job that produced ``path`` (under ``root``, default the working directory) and compare.

    ``config`` holds extra Snakemake ``--config`` values (a run that overrode config on its command line);
    the recorded design always wins for ``prereg``. Raises ``ValueError`` (naming the file) when no
    manifest lists ``path`` or the chain upstream of it is broken, and :class:`RerunFailedError` when
    the job fails.
    """
    root_path = Path(root if root is not None else Path.cwd()).resolve()
    overrides = dict(config or {})
    results_dir = configured_results_dir(root_path, overrides)
    manifest_rel = find_producing_manifest(path, root_path, results_dir)
    record = job_record(manifest_rel, root_path)
    _check_inputs(record, root_path)
    settings = {**overrides, **rerun_settings(record, root_path)}
    scratch = Path(tempfile.mkdtemp(prefix="grpo-probe-audit-", dir=scratch_parent))
    try:
        _stage(record, root_path, scratch, results_dir)
        command = [
            sys.executable,
            "-m",
            "snakemake",
            "--cores",
            str(cores or os.cpu_count() or 1),
            "--config",
            *(f"{key}={value}" for key, value in sorted(settings.items())),
            "--allowed-rules",
            record.rule,
            "--",
            record.manifest,
        ]
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=scratch, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            output = (proc.stdout + proc.stderr)[-_TAIL:]
            where = f"kept in {scratch}" if keep else "rerun with --keep to keep it"
            raise RerunFailedError(
                f"{record.manifest}: the rerun of rule {record.rule} failed (exit {proc.returncode}; "
                f"scratch directory {where})\n{output}\n{_job_logs(scratch, results_dir)}"
            )
        outputs = [
            compare_output(entry, scratch / entry["path"], root_path / entry["path"])
            for entry in record.outputs
        ]
        notes = _manifest_notes(record, scratch / record.manifest)
        environments = (record.raw.get("environment"), environment())
        differing = same_numerics_environment(*environments)
        across = None
        if differing and not all(out.identical for out in outputs):
            across, across_notes = decision_across(outputs, root_path, scratch, environments)
            notes += across_notes
        for entry in record.outputs:
            recorded = root_path / entry["path"]
            if not recorded.is_file():
                notes.append(f"{entry['path']}: missing from the audited tree (the rerun still wrote it)")
            elif file_sha256(recorded) != entry["sha256"]:
                notes.append(
                    f"{entry['path']}: the file in the audited tree no longer matches its manifest "
                    f"(sha256 {file_sha256(recorded)}); `grpo-probe verify` names such files"
                )
    except BaseException:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    if not keep:
        with contextlib.suppress(OSError):
            shutil.rmtree(scratch)
    return AuditResult(
        target=str(path),
        manifest=record.manifest,
        rule=record.rule,
        outputs=outputs,
        command=command,
        seconds=seconds,
        notes=notes,
        scratch=scratch if keep else None,
        environment_differs=differing,
        environments=environments,
        across=across,
    )
