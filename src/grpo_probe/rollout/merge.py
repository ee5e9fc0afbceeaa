"""A cell's shards merged into one table, and what a written shard holds.

Why a module of its own: a cell's join merges tables and runs no episode, so it must not import the
rollout engine (and with it torch, seconds of a small job's time).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from grpo_probe.rollout.table import read_rollout_table, rollout_table, write_rollout_table

__all__ = ["ShardSummary", "merge_shards"]


@dataclass(frozen=True)
class ShardSummary:
    """What a written shard holds: its path, row count and the sha256 of its bytes, and the GPU seconds
    its policy calls took (None: not measured, the policy ran on the CPU)."""

    path: Path
    rows: int
    sha256: str
    gpu_s: float | None = None


def merge_shards(paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str]) -> ShardSummary:
    """Concatenate shard tables into one, rows sorted by (seed, draw); overlapping shards are an error.

    All shards must hold one cell and arm: a row's place is (seed, draw), which is only unique within one.
    """
    if not paths:
        raise ValueError(f"{out}: no shards to merge")
    tables = [read_rollout_table(p) for p in paths]
    for path, other in zip(paths[1:], tables[1:], strict=True):
        if not other.schema.equals(tables[0].schema):
            raise ValueError(f"{out}: shard {path} has other columns than {paths[0]} (another environment?)")
    table = pa.concat_tables(tables)
    for column in ("cell", "arm"):
        values = set(table.column(column).to_pylist())
        if len(values) > 1:
            raise ValueError(f"{out}: shards hold more than one {column}: {sorted(values)}")
    merged = rollout_table(table.to_pylist(), tables[0].schema)
    data = write_rollout_table(merged, out)
    return ShardSummary(Path(out), merged.num_rows, hashlib.sha256(data).hexdigest())
