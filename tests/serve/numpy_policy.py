"""A policy with the act() contract built on numpy and grpo_probe.serve alone, as a lab's might be.

Why numpy-only and arithmetic-only: the same file runs in the project's interpreter and, served, in an
interpreter of another Python and another numpy (tests/serve/test_standalone_server.py). Its rows use
only integer hashing (splitmix64 on the row's key) and IEEE additions and products, which give the same
bits under any numpy, so the two must agree byte for byte. Each row reads only its own observation and
key, so it keeps the contract's batch and key rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from grpo_probe.serve import PolicyOutput, RowDiagnostics

CHUNK_SHAPE = (50, 6)
OBS_DIM = 17


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on a uint64 array (wrapping arithmetic): a keyed stream without an RNG."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _uniform(key: Any, count: int) -> np.ndarray:
    """``count`` float64 in [0, 1) from the row's key."""
    fields = np.array([key.run_key, key.seed, key.replan, key.draw], dtype=np.uint64)
    state = np.uint64(0x9E3779B97F4A7C15)
    for value in _splitmix64(fields):
        state = _splitmix64(np.array([state ^ value], dtype=np.uint64))[0]
    counters = np.arange(count, dtype=np.uint64) + state
    return (_splitmix64(counters) >> np.uint64(11)).astype(np.float64) * 2.0**-53


class NumpyFlowPolicy:
    """Flow head, kinds flow_ode, flow_sde and flow_euler: a chunk tied to the observation, plus keyed
    initial noise, plus (flow_sde with a > 0) keyed step noise and per-step log-probs; at a = 0 the SDE
    sampler is the Euler sampler, bit for bit, as the contract asks."""

    head = "flow"
    obs_dim = OBS_DIM

    def act(self, obs: np.ndarray, keys: Sequence[Any], mode: Any) -> PolicyOutput:
        if mode.kind not in ("flow_ode", "flow_sde", "flow_euler"):
            raise ValueError(f"NumpyFlowPolicy samples flow kinds only, got {mode.kind!r}")
        obs = np.asarray(obs, dtype=np.float32)
        count = CHUNK_SHAPE[0] * CHUNK_SHAPE[1]
        a = float(mode.sde_a or 0.0) if mode.kind == "flow_sde" else 0.0
        chunks, rows = [], []
        for state, key in zip(obs, keys, strict=True):
            stream = _uniform(key, 2 * count)
            chunk = np.resize(state.astype(np.float64) * 0.05, count) + (2.0 * stream[:count] - 1.0) * 0.5
            if a > 0:
                chunk = chunk + (2.0 * stream[count:] - 1.0) * a
            chunks.append(np.clip(chunk, -1.0, 1.0).reshape(CHUNK_SHAPE).astype(np.float32))
            steps = np.full(mode.steps, -0.5 * a, dtype=np.float64) if a > 0 else None
            rows.append(
                RowDiagnostics(logprob=None if steps is None else float(steps.sum()), step_logprobs=steps)
            )
        return PolicyOutput(actions=np.stack(chunks), diagnostics=rows)


def make_policy(**_: Any) -> NumpyFlowPolicy:
    """The factory ``python -m grpo_probe.serve`` and a ``PolicySource`` call."""
    return NumpyFlowPolicy()
