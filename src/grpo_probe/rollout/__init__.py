"""Rollouts of the probe: the group runner (sequential and parallel paths), shards and the two oracles.

Why lazy (PEP 562): the rollout engine imports torch, which costs a job seconds, and the jobs that only
read rollout tables (a cell's join, the decision, phase 2's report) import this package for
``merge_shards`` or ``read_rollout_table``. A name is imported from its module the first time it is
read, so such a job never loads torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpo_probe.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from grpo_probe.policies.policy_source import PolicySource, resolve_device
    from grpo_probe.rollout.engine import (
        group_table,
        job_worker_count,
        run_group,
        run_in_process,
        run_sequential,
        worker_count,
    )
    from grpo_probe.rollout.job import DEFAULT_ENVS_PER_WORKER, GroupJob, RolloutWorkerError, design_job
    from grpo_probe.rollout.lockstep import ChunkHook, run_lockstep
    from grpo_probe.rollout.merge import merge_shards
    from grpo_probe.rollout.oracles import (
        OracleMismatchError,
        anchor_mode,
        run_draw0_oracle,
        run_parallel_oracle,
        run_replay_oracle,
    )
    from grpo_probe.rollout.perturb import Replay
    from grpo_probe.rollout.pool import RolloutPool, run_parallel
    from grpo_probe.rollout.results import EpisodeResult, EpisodeSpec
    from grpo_probe.rollout.shards import write_shard
    from grpo_probe.rollout.table import ROLLOUT_SCHEMA, read_rollout_table, write_rollout_table

_WHERE: dict[str, str] = {
    "DEFAULT_ENVS_PER_WORKER": "grpo_probe.rollout.job",
    "ChunkHook": "grpo_probe.rollout.lockstep",
    "GroupJob": "grpo_probe.rollout.job",
    "RolloutPool": "grpo_probe.rollout.pool",
    "RolloutWorkerError": "grpo_probe.rollout.job",
    "design_job": "grpo_probe.rollout.job",
    "group_table": "grpo_probe.rollout.engine",
    "job_worker_count": "grpo_probe.rollout.engine",
    "run_group": "grpo_probe.rollout.engine",
    "run_in_process": "grpo_probe.rollout.engine",
    "run_lockstep": "grpo_probe.rollout.lockstep",
    "run_parallel": "grpo_probe.rollout.pool",
    "run_sequential": "grpo_probe.rollout.engine",
    "worker_count": "grpo_probe.rollout.engine",
    "OracleMismatchError": "grpo_probe.rollout.oracles",
    "anchor_mode": "grpo_probe.rollout.oracles",
    "run_draw0_oracle": "grpo_probe.rollout.oracles",
    "run_parallel_oracle": "grpo_probe.rollout.oracles",
    "run_replay_oracle": "grpo_probe.rollout.oracles",
    "Replay": "grpo_probe.rollout.perturb",
    "PolicySource": "grpo_probe.policies.policy_source",
    "resolve_device": "grpo_probe.policies.policy_source",
    "EpisodeResult": "grpo_probe.rollout.results",
    "EpisodeSpec": "grpo_probe.rollout.results",
    "merge_shards": "grpo_probe.rollout.merge",
    "write_shard": "grpo_probe.rollout.shards",
    "ROLLOUT_SCHEMA": "grpo_probe.rollout.table",
    "read_rollout_table": "grpo_probe.rollout.table",
    "write_rollout_table": "grpo_probe.rollout.table",
}
"""Each exported name and the module it is imported from on first use."""


__getattr__ = lazy_exports(__name__, _WHERE, globals())


__all__ = [
    "DEFAULT_ENVS_PER_WORKER",
    "ROLLOUT_SCHEMA",
    "ChunkHook",
    "EpisodeResult",
    "EpisodeSpec",
    "GroupJob",
    "OracleMismatchError",
    "PolicySource",
    "Replay",
    "RolloutPool",
    "RolloutWorkerError",
    "anchor_mode",
    "design_job",
    "group_table",
    "job_worker_count",
    "merge_shards",
    "read_rollout_table",
    "resolve_device",
    "run_draw0_oracle",
    "run_group",
    "run_in_process",
    "run_lockstep",
    "run_parallel",
    "run_parallel_oracle",
    "run_replay_oracle",
    "run_sequential",
    "worker_count",
    "write_rollout_table",
    "write_shard",
]
