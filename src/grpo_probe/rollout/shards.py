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
from pathlib import Path
from typing import TYPE_CHECKING

from grpo_probe.prereg.design import split_seeds
from grpo_probe.rollout.merge import ShardSummary, merge_shards
from grpo_probe.rollout.progress import RolloutProgress
from grpo_probe.rollout.table import write_rollout_table

if TYPE_CHECKING:  # the engine imports torch: only write_shard, which runs episodes, imports it
    from grpo_probe.rollout.job import GroupJob
    from grpo_probe.rollout.lockstep import ChunkHook
    from grpo_probe.rollout.pool import RolloutPool

__all__ = ["ShardSummary", "merge_shards", "remove_stale_temps", "split_seeds", "write_shard"]


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
    envs_per_worker: int | None = None,
    hook: ChunkHook | None = None,
    show_progress: bool = True,
) -> ShardSummary:
    """Run ``job`` (its seeds are the shard's range) and write its rollout table atomically at ``path``
    (``envs_per_worker``: lockstep envs per task, the engine's default when None)."""
    from grpo_probe.rollout.engine import group_table, run_group, total_gpu_seconds
    from grpo_probe.rollout.job import DEFAULT_ENVS_PER_WORKER

    if envs_per_worker is None:
        envs_per_worker = DEFAULT_ENVS_PER_WORKER
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
