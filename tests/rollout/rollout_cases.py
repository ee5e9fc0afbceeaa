"""Shared cases of the rollout tests: short episodes, keyed test-policy sources, job construction."""

from __future__ import annotations

from typing import Any

import numpy as np

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.registry import boat_env
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.rollout import EpisodeSpec, GroupJob, PolicySource

from .keyed_test_policies import factory_name, make_ar_policy, make_flow_policy

SHORT_SIM = SimParams(replans=2, executed_actions=10)
"""Two replans of ten ticks: long enough to cross a replan boundary, short enough for many episodes."""
RUN_KEY = 11

TINY_AR = {
    "steps": 3,
    "warmup_steps": 1,
    "vocab_size": 300,
    "d_model": 32,
    "n_layers": 1,
    "n_heads": 2,
    "batch_size": 8,
}
TINY_FLOW = {
    "steps": 3,
    "warmup_steps": 1,
    "hidden": 64,
    "n_layers": 2,
    "obs_embed": 16,
    "time_embed": 16,
    "batch_size": 8,
}


def keyed_source(head: str, **options: object) -> PolicySource:
    """Source of a keyed test policy ('ar' or 'flow'), importable by worker processes."""
    factory = make_ar_policy if head == "ar" else make_flow_policy
    return PolicySource(factory=factory_name(factory), options=options)


def make_job(
    source: PolicySource,
    mode: SamplingMode,
    seeds: tuple[int, ...] = (0, 1, 2),
    group_size: int = 2,
    **changes: Any,
) -> GroupJob:
    fields = {"arm": "arm_x", "cell": "cell_x", "run_key": RUN_KEY, "env": boat_env(SHORT_SIM), **changes}
    return GroupJob(source=source, mode=mode, seeds=tuple(seeds), group_size=group_size, **fields)


def nudge_one_action(
    env: object, spec: EpisodeSpec, replan: int, chunk: np.ndarray, *, at: tuple[int, int, int, int, int]
) -> np.ndarray:
    """Chunk hook: one action of one episode up by one float32 ulp (at = seed, draw, replan, index, dim)."""
    seed, draw, at_replan, index, dim = at
    if (spec.seed, spec.draw, replan) == (seed, draw, at_replan):
        chunk = chunk.copy()
        chunk[index, dim] = np.nextafter(chunk[index, dim], np.float32(np.inf))
    return chunk
