"""Shards: atomic writes, a SIGKILLed worker leaves nothing behind, a rerun gives the same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.prereg import split_seeds
from grpo_probe.rollout import RolloutPool, RolloutWorkerError, merge_shards, write_shard

from .rollout_cases import keyed_source, make_job

TEMPERATURE = SamplingMode("temperature", temperature=1.6)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_worker_killed_mid_shard_leaves_no_shard_file_and_the_rerun_matches(
    tmp_path: Path, pool: RolloutPool
) -> None:
    shard = tmp_path / "shard.parquet"
    doomed = make_job(keyed_source("ar", kill_at=(1, 1)), TEMPERATURE, seeds=(0, 1, 2), group_size=2)
    with RolloutPool(2) as fragile, pytest.raises(RolloutWorkerError, match="worker died"):
        write_shard(doomed, shard, pool=fragile, envs_per_worker=2, show_progress=False)
    assert _leftovers(tmp_path) == []

    job = make_job(keyed_source("ar"), TEMPERATURE, seeds=(0, 1, 2), group_size=2)
    rerun = write_shard(job, shard, pool=pool, envs_per_worker=2, show_progress=False)
    uninterrupted = write_shard(job, tmp_path / "reference.parquet", workers=0, show_progress=False)
    assert rerun.sha256 == uninterrupted.sha256
    assert shard.read_bytes() == (tmp_path / "reference.parquet").read_bytes()


def test_rerun_removes_temporary_files_a_killed_writer_left(tmp_path: Path) -> None:
    shard = tmp_path / "shard.parquet"
    stale = tmp_path / ".shard.parquet.k1ll3d.tmp"
    stale.write_bytes(b"half a parquet file")
    job = make_job(keyed_source("flow"), SamplingMode("flow_ode", steps=3), seeds=(0,), group_size=1)
    write_shard(job, shard, show_progress=False)
    assert _leftovers(tmp_path) == ["shard.parquet"]


def test_merged_shards_equal_the_unsharded_table_in_any_listing_order(tmp_path: Path) -> None:
    seeds = (4, 0, 3, 1)
    ranges = split_seeds(seeds, 3)
    assert ranges == [(4, 0, 3), (1,)]
    paths = []
    for i, shard_seeds in enumerate(ranges):
        job = make_job(keyed_source("ar"), TEMPERATURE, seeds=shard_seeds, group_size=2)
        paths.append(write_shard(job, tmp_path / f"shard{i}.parquet", show_progress=False).path)
    whole = write_shard(
        make_job(keyed_source("ar"), TEMPERATURE, seeds=seeds, group_size=2), tmp_path / "whole.parquet"
    )
    forward = merge_shards(paths, tmp_path / "forward.parquet")
    backward = merge_shards(paths[::-1], tmp_path / "backward.parquet")
    assert forward.sha256 == backward.sha256 == whole.sha256
    assert forward.rows == 8


def test_merging_overlapping_shards_is_an_error_naming_the_row(tmp_path: Path) -> None:
    job = make_job(keyed_source("ar"), TEMPERATURE, seeds=(0,), group_size=1)
    first = write_shard(job, tmp_path / "a.parquet", show_progress=False).path
    second = write_shard(job, tmp_path / "b.parquet", show_progress=False).path
    with pytest.raises(ValueError, match=r"seed=0, draw=0\) appears twice"):
        merge_shards([first, second], tmp_path / "merged.parquet")
    assert not (tmp_path / "merged.parquet").exists()
