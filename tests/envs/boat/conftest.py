"""Shared scripted drivers for the simulator tests."""

from __future__ import annotations

import numpy as np
import pytest

from grpo_probe.envs.boat import BoatPushEnv, SimParams
from grpo_probe.envs.boat.expert import ScriptedExpert, targets_to_actions


@pytest.fixture
def hold_chunk():
    """Make a chunk that holds the pusher tip at ``xyz`` (m), angles zero."""

    def make(xyz: np.ndarray, params: SimParams) -> np.ndarray:
        targets = np.zeros((params.chunk_length, 6))
        targets[:, :3] = xyz
        return targets_to_actions(targets)

    return make


@pytest.fixture
def env() -> BoatPushEnv:
    return BoatPushEnv(SimParams())


@pytest.fixture
def expert_act():
    def make(noise: float, seed: int, params: SimParams | None = None):
        expert = ScriptedExpert(params or SimParams(), noise=noise)
        return lambda obs, replan: expert.act(obs, (0, seed, replan))

    return make
