"""Shards: a cell's seeds split by position in the registered order, each a rollout table written atomically.

Why shards: a SLURM job that dies loses one shard, not a cell; Snakemake reruns just that shard.
A shard's table is written only after all its episodes finished (one rename), so a killed run leaves no
shard file; a rerun first removes temporary files a killed writer may have left beside it, then runs
from a clean start and writes the same bytes an uninterrupted run writes (every draw is keyed, rows are
sorted). Merging sorts again, so the merged bytes do not depend on the order shards are listed in.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from grpo_probe.prereg.design import split_seeds
from grpo_probe.rollout.engine import (
    DEFAULT_ENVS_PER_WORKER,
    ChunkHook,
    GroupJob,
    RolloutPool,
    group_table,
    run_group,
    total_gpu_seconds,
)
from grpo_probe.rollout.progress import RolloutProgress
from grpo_probe.rollout.table import read_rollout_table, rollout_table, write_rollout_table

__all__ = ["ShardSummary", "merge_shards", "remove_stale_temps", "split_seeds", "write_shard"]


@dataclass(frozen=True)
class ShardSummary:
    """What a written shard holds: its path, row count and the sha256 of its bytes, and the GPU seconds
    its policy calls took (None: not measured, the policy ran on the CPU)."""

    path: Path
    rows: int
    sha256: str
    gpu_s: float | None = None


def remove_stale_temps(path: str | os.PathLike[str]) -> list[Path]:
    """Delete temporary files an interrupted atomic write of ``path`` left behind; returns them."""
    dest = Path(path)
    if not dest.parent.is_dir():
        return []
    stale = sorted(dest.parent.glob(f".{dest.name}.*.tmp"))
    for tmp in stale:
        tmp.unlink(missing_ok=True)
    return stale


def write_shard(
    job: GroupJob,
    path: str | os.PathLike[str],
    *,
    workers: int = 0,
    pool: RolloutPool | None = None,
    envs_per_worker: int = DEFAULT_ENVS_PER_WORKER,
    hook: ChunkHook | None = None,
    show_progress: bool = True,
) -> ShardSummary:
    """Run ``job`` (its seeds are the shard's range) and write its rollout table atomically at ``path``."""
    remove_stale_temps(path)
    progress = RolloutProgress(len(job.episodes()), job.label, enabled=show_progress)
    try:
        results = run_group(
            job, workers=workers, pool=pool, envs_per_worker=envs_per_worker, hook=hook, progress=progress
        )
    finally:
        progress.close()
    data = write_rollout_table(group_table(job, results), path)
    return ShardSummary(
        Path(path), len(results), hashlib.sha256(data).hexdigest(), total_gpu_seconds(results)
    )


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
