"""What the rollout jobs share: a registered arm's rollout job and the policy source its rule declares."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_probe.prereg import Prereg

__all__ = ["PathLike", "arm_policy_source", "cell_job", "group_job"]

PathLike = str | os.PathLike[str]


def group_job(
    prereg: Prereg, arm: str, cell: str, source: Any, mode: Any, seeds: Sequence[int], group_size: int
):  # -> GroupJob
    """A rollout job of ``arm`` in the prereg's world (:func:`grpo_probe.rollout.design_job`); this package's
    own checkpoint decodes in the arm's registered row block."""
    # Local: this import loads torch (about 1.4 s), which the jobs that read tables never need.
    from grpo_probe.rollout import design_job

    row_block = prereg.arms[arm].row_block
    if row_block is not None and source.factory is None and source.address is None:  # own checkpoint
        source = dataclasses.replace(source, row_block=row_block)
    return design_job(prereg, arm, cell, source, mode, seeds, group_size)


def cell_job(prereg: Prereg, cell: str, source: Any, seeds: Sequence[int], group_size: int):  # -> GroupJob
    """A rollout job of registered cell ``cell``: its arm under its mode, on ``seeds`` x ``group_size``."""
    registered = prereg.cell(cell)
    return group_job(prereg, registered.arm, cell, source, registered.mode, seeds, group_size)


def arm_policy_source(source_json: PathLike, checkpoint: PathLike | None, device: str):
    """The arm's policy: the adapter its source.json records, loading the checkpoint the rule declares.

    Why the declared path and not the one source.json recorded: the checkpoint is an input of the rule,
    so Snakemake knows the job reads it, and an executor that stages inputs puts it exactly there.
    Without one (a caller outside the workflow), the path source.json recorded is used. An arm bound to a
    policy server has no checkpoint here: its recipe is the address (the server places its own model),
    held to the checkpoint sha256 its binding read from the server's hello, where the server declared one.
    """
    # Local: this import loads torch (about 1.4 s), which the jobs that read tables never need.
    from grpo_probe.rollout import PolicySource

    recipe = json.loads(Path(source_json).read_text())
    if recipe.get("address"):
        return PolicySource(
            address=recipe["address"],
            timeout_s=recipe.get("timeout_s"),
            recorded=_recorded(recipe, source_json),
        )
    path = recipe.get("checkpoint") if not checkpoint else str(checkpoint)
    return PolicySource(checkpoint=path, factory=recipe.get("factory"), device=device)


def _recorded(recipe: dict[str, Any], source_json: PathLike):  # -> RecordedCheckpoint | None
    """The checkpoint sha256 a served arm's binding recorded (``server.checkpoint_sha256``), if any."""
    from grpo_probe.policies.served import RecordedCheckpoint

    server = recipe.get("server")
    declared = server.get("checkpoint_sha256") if isinstance(server, dict) else None
    if declared is None:
        return None
    if not isinstance(declared, str) or len(declared) != 64:
        raise ValueError(
            f"{source_json}: field server.checkpoint_sha256 must be 64 hex digits, got {declared!r}"
        )
    return RecordedCheckpoint(declared, f"{source_json} (field server.checkpoint_sha256)")
