"""Rollouts of the probe: the group runner (sequential and parallel paths), shards and the two oracles.

Why lazy (PEP 562): the rollout engine imports torch, which costs a job seconds, and the jobs that only
read rollout tables (a cell's join, the decision, phase 2's report) import this package for
``merge_shards`` or ``read_rollout_table``. A name is imported from its module the first time it is
read, so such a job never loads torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpo_probe.lazy_exports import lazy_exports

if TYPE_CHECKING:  # the exports as type checkers see them; at run time each loads on first use
    from grpo_probe.policies.policy_source import PolicySource, resolve_device  # noqa: F401
    from grpo_probe.rollout.engine import (  # noqa: F401
        group_table,
        job_worker_count,
        run_group,
        run_in_process,
        run_sequential,
        worker_count,
    )
    from grpo_probe.rollout.job import DEFAULT_ENVS_PER_WORKER, GroupJob, RolloutWorkerError, design_job  # noqa: F401
    from grpo_probe.rollout.lockstep import ChunkHook, run_lockstep  # noqa: F401
    from grpo_probe.rollout.merge import merge_shards  # noqa: F401
    from grpo_probe.rollout.oracles import (  # noqa: F401
        OracleMismatchError,
        anchor_mode,
        run_draw0_oracle,
        run_parallel_oracle,
        run_replay_oracle,
    )
    from grpo_probe.rollout.perturb import Replay  # noqa: F401
    from grpo_probe.rollout.pool import RolloutPool, run_parallel  # noqa: F401
    from grpo_probe.rollout.results import EpisodeResult, EpisodeSpec  # noqa: F401
    from grpo_probe.rollout.shards import write_shard  # noqa: F401
    from grpo_probe.rollout.table import ROLLOUT_SCHEMA, read_rollout_table, write_rollout_table  # noqa: F401

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        ".engine": (
            "group_table",
            "job_worker_count",
            "run_group",
            "run_in_process",
            "run_sequential",
            "worker_count",
        ),
        ".job": ("DEFAULT_ENVS_PER_WORKER", "GroupJob", "RolloutWorkerError", "design_job"),
        ".lockstep": ("ChunkHook", "run_lockstep"),
        ".merge": ("merge_shards",),
        ".oracles": (
            "OracleMismatchError",
            "anchor_mode",
            "run_draw0_oracle",
            "run_parallel_oracle",
            "run_replay_oracle",
        ),
        ".perturb": ("Replay",),
        ".pool": ("RolloutPool", "run_parallel"),
        ".results": ("EpisodeResult", "EpisodeSpec"),
        ".shards": ("write_shard",),
        ".table": ("ROLLOUT_SCHEMA", "read_rollout_table", "write_rollout_table"),
        "grpo_probe.policies.policy_source": ("PolicySource", "resolve_device"),
    },
    globals(),
)
