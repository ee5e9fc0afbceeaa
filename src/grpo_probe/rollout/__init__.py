"""Rollouts of the probe: the group runner (sequential and parallel paths), shards and the two oracles."""

from grpo_probe.rollout.engine import (
    DEFAULT_ENVS_PER_WORKER,
    ChunkHook,
    GroupJob,
    RolloutPool,
    RolloutWorkerError,
    group_table,
    run_group,
    run_in_process,
    run_lockstep,
    run_parallel,
    run_sequential,
    worker_count,
)
from grpo_probe.rollout.oracles import (
    OracleMismatchError,
    anchor_mode,
    run_draw0_oracle,
    run_parallel_oracle,
    run_replay_oracle,
)
from grpo_probe.rollout.perturb import Replay
from grpo_probe.rollout.policy_source import PolicySource, resolve_device
from grpo_probe.rollout.results import EpisodeResult, EpisodeSpec
from grpo_probe.rollout.shards import merge_shards, write_shard
from grpo_probe.rollout.table import ROLLOUT_SCHEMA, read_rollout_table, write_rollout_table

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
    "group_table",
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
