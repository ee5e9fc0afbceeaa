"""A job's inputs checked against the manifests that vouch for them, before the job reads a byte.

Why: Snakemake decides what to rerun from file times, not contents. A table whose bytes changed after
its job wrote it (a flipped bit, a hand edit, a copy from another run) has a newer time, so Snakemake
plans to rerun what reads it, and that job would consume the changed bytes as if they were the
registered ones. Every output a job writes is hashed into its manifest, and downstream jobs take those
manifests as inputs; so the reading job can compare each input with the hash its writer recorded and
refuse a mismatch, naming the file, the manifest and both hashes. ``grpo-probe verify`` does the same
check over a whole chain after the fact; this is the same check at the edge, before the read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grpo_probe.envs.served_record import RECORD_NAME, hold_to_record
from grpo_probe.provenance.manifest import file_sha256, read_manifest, relative_to_root

__all__ = ["ChangedInputError", "Vouched", "refuse_changed_inputs", "vouched_inputs"]

_MANIFEST_SUFFIX = ".manifest.json"


class ChangedInputError(ValueError):
    """An input's bytes differ from what the manifest of the job that wrote it recorded."""


@dataclass(frozen=True)
class Vouched:
    """What one manifest recorded of one output: its sha256, and which manifest recorded it."""

    sha256: str
    manifest: str


def vouched_inputs(inputs: Iterable[str | os.PathLike[str]]) -> dict[str, Vouched]:
    """Every output recorded by the manifests among ``inputs`` and by the manifests they list as their own
    inputs, transitively, keyed by path relative to the working directory.

    Why transitively: a job declares the manifests of the jobs it follows directly (the decision job, the
    joins'), while it may read a table written further up (the anchors): the join's manifest lists the
    anchors' manifest, whose outputs hold the anchors' hash. The nearest manifest wins a path recorded
    twice. A listed manifest that is absent is skipped here: which manifests must exist is the DAG's
    business, and ``grpo-probe verify`` reports a broken chain.
    """
    stack = [relative_to_root(p) for p in inputs if str(p).endswith(_MANIFEST_SUFFIX)]
    stack.reverse()
    seen: set[str] = set()
    vouched: dict[str, Vouched] = {}
    while stack:
        path = stack.pop()
        if path in seen or not Path(path).is_file():
            continue
        seen.add(path)
        record = read_manifest(path)
        for out in record["outputs"]:
            vouched.setdefault(out["path"], Vouched(out["sha256"], path))
        upstream = [entry["path"] for entry in record["inputs"] if entry["path"].endswith(_MANIFEST_SUFFIX)]
        stack.extend(reversed(upstream))
    return vouched


def refuse_changed_inputs(inputs: Iterable[str | os.PathLike[str]]) -> int:
    """Raise :class:`ChangedInputError` if any of ``inputs`` differs from the hash a manifest recorded for
    it; return how many inputs were checked.

    Inputs no manifest vouches for (the design, user code, a checkpoint bound by path, which the lock and
    the arm's manifest check by their own pins) are not checked here. Folders are skipped: the files in
    them are recorded one by one, and no job reads a folder's members as an input.

    A served simulator's record among the inputs (``prereg/served_env.json``, checked like any other) is
    what the simulator is: this job's connections to the environment server, and its rollout workers',
    are then held to it (:func:`grpo_probe.envs.served_record.hold_to_record`).
    """
    paths = [str(p) for p in inputs]
    vouched = vouched_inputs(paths)
    checked = 0
    for path in paths:
        if path.endswith(_MANIFEST_SUFFIX) or Path(path).is_dir():
            continue
        record = vouched.get(relative_to_root(path))
        if record is None:
            continue
        actual = file_sha256(path)
        if actual != record.sha256:
            raise ChangedInputError(
                f"{path}: its bytes changed after the job that wrote it ran: sha256 {actual}, but "
                f"{record.manifest} recorded {record.sha256}. Refusing to read it. Delete the file and "
                "run snakemake again to rebuild it from its registered inputs; `grpo-probe verify` lists "
                "every file of the run that differs."
            )
        checked += 1
    for path in paths:
        if Path(path).name == RECORD_NAME:
            hold_to_record(path)
    return checked
