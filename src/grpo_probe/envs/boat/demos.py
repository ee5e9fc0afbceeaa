"""The boat's demonstrations by the scripted expert, in one loop of its own (the reference the generic
loop, :func:`grpo_probe.envs.demos.collect_env_demos`, reproduces byte for byte)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from grpo_probe.envs.boat.expert import ScriptedExpert
from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.boat.record import EpisodeRecord
from grpo_probe.envs.boat.simulator import BoatPushEnv
from grpo_probe.envs.demo_set import Demos

__all__ = ["collect_demos"]


def collect_demos(params: SimParams, seeds: Sequence[int], noise: float, run_key: int = 0) -> Demos:
    """Run the expert on every seed; the noise stream is keyed by (run_key, seed, replan)."""
    env = BoatPushEnv(params)
    expert = ScriptedExpert(params, noise=noise)
    obs_rows: list[np.ndarray] = []
    chunk_rows: list[np.ndarray] = []
    seed_rows: list[int] = []
    records: list[EpisodeRecord] = []
    for seed in seeds:
        obs = env.reset(int(seed))
        while not env.done:
            chunk = expert.act(obs, (run_key, int(seed), env.replan_index))
            obs_rows.append(obs)
            chunk_rows.append(chunk)
            seed_rows.append(int(seed))
            obs = env.execute_chunk(chunk)
        records.append(env.record())
    return Demos(
        obs=np.stack(obs_rows).astype(np.float32),
        chunks=np.stack(chunk_rows).astype(np.float32),
        seeds=np.asarray(seed_rows, dtype=np.int64),
        records=tuple(records),
    )
