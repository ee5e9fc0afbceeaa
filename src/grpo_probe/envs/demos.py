"""Behaviour-cloning demonstrations from any environment with a scripted expert.

Why the same loop for every environment: a demonstration is what the expert saw at a replan and the
chunk it planned there (unexecuted actions included), exactly what a policy maps; the boat's demos
come out of this loop byte for byte as they did from :func:`grpo_probe.sim.demos.collect_demos`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from grpo_probe.envs.registry import EnvConfig, make_env, make_expert
from grpo_probe.sim.demos import Demos

__all__ = ["collect_env_demos"]


def collect_env_demos(config: EnvConfig, seeds: Sequence[int], noise: float, run_key: int = 0) -> Demos:
    """Run the environment's expert on every seed; its noise is keyed by (run_key, seed, replan)."""
    env = make_env(config)
    expert = make_expert(config, noise)
    n_executed = env.spec.executed_actions
    obs_rows: list[np.ndarray] = []
    chunk_rows: list[np.ndarray] = []
    seed_rows: list[int] = []
    for seed in seeds:
        obs = env.reset(int(seed))
        while not env.done:
            chunk = expert.act(obs, (run_key, int(seed), env.replan_index))
            obs_rows.append(obs)
            chunk_rows.append(chunk)
            seed_rows.append(int(seed))
            obs = env.execute(chunk, n_executed)
    return Demos(
        obs=np.stack(obs_rows).astype(np.float32),
        chunks=np.stack(chunk_rows).astype(np.float32),
        seeds=np.asarray(seed_rows, dtype=np.int64),
    )
