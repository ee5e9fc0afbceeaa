"""How competent a trained head is in the simulator: the numbers the README reports per reference arm.

Why here and not in the probe: training budgets are tuned until every arm engages the boat sometimes;
this is the quick check used while tuning (sequential, draw 0), not a registered read of the probe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from grpo_probe.policies.protocol import Policy, RowKey, SamplingMode

__all__ = ["Competence", "default_mode", "measure_competence"]


@dataclass(frozen=True)
class Competence:
    """Means over episodes; ``progress_cm`` is the mean of ``progress_final_cm``."""

    episodes: int
    progress_cm: float
    best_point_cm: float
    contact_rate: float
    success_rate: float
    strikes_mean: float


def default_mode(policy: Policy) -> SamplingMode:
    """The anchor's mode of a head: AR greedy, flow Heun-10 from draw-0 noise."""
    return SamplingMode("greedy") if policy.head == "ar" else SamplingMode("flow_ode")


def measure_competence(
    policy: Policy, seeds: Sequence[int], mode: SamplingMode | None = None, run_key: int = 0, draw: int = 0
) -> Competence:
    """Run one episode per seed with ``policy`` under ``mode`` (default: :func:`default_mode`)."""
    from grpo_probe.envs.boat import BoatPushEnv, run_episode

    mode = mode if mode is not None else default_mode(policy)
    env = BoatPushEnv()
    records = []
    for seed in seeds:

        def act(obs: np.ndarray, replan: int, seed: int = int(seed)) -> np.ndarray:
            out = policy.act(obs[None], [RowKey(run_key, seed, replan, draw)], mode)
            return out.actions[0]

        records.append(run_episode(env, int(seed), act))
    return Competence(
        episodes=len(records),
        progress_cm=float(np.mean([r.progress_final_cm for r in records])),
        best_point_cm=float(np.mean([r.best_point_cm for r in records])),
        contact_rate=float(np.mean([r.contact for r in records])),
        success_rate=float(np.mean([r.success for r in records])),
        strikes_mean=float(np.mean([r.reset_strikes for r in records])),
    )
