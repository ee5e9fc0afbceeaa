"""The tested stand-in of docs/lerobot.md: an adapter of LeRobot's shape around a small random-init policy.

Why a stand-in: LeRobot 0.5 needs Python >= 3.12 and torch < 2.12, which cannot share the probe's
environment, so the suite cannot install it. This file has the adapter the page walks through, line for
line in its structure (split keys in, one row at a time, noise seeded from the row's key, actions mapped
onto [-1, 1]), around :class:`TinyPushTFlow`, a numpy policy with random weights and LeRobot's
``predict_action_chunk(batch, noise=...)``. It imports numpy and ``grpo_probe.serve`` only, so it is
served from an interpreter of another Python beside grpo-probe-serve alone
(``tests/e2e/test_lerobot_page.py``). docs/lerobot.md shows the file past this docstring, verbatim.
"""

from __future__ import annotations

import numpy as np

from grpo_probe.serve import PolicyCapabilities, PolicyOutput, RowDiagnostics

STATE = "observation.state"
ENVIRONMENT_STATE = "observation.environment_state"


def row_seed(key) -> int:
    """One 64-bit seed from the row's key (run_key, seed, replan, draw): the same key, the same seed."""
    words = [key.run_key, key.seed, key.replan, key.draw]
    return int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0])


class TinyPushTFlow:
    """Stands in for a LeRobot flow policy on PushT: random weights, Euler steps from the given noise."""

    def __init__(self, chunk_size: int = 8, state_dim: int = 2, environment_dim: int = 16, seed: int = 0):
        self.chunk_size, self.action_dim = chunk_size, 2
        width = state_dim + environment_dim + chunk_size * self.action_dim + 1
        rng = np.random.default_rng(seed)
        self.w = rng.standard_normal((width, chunk_size * self.action_dim)) / np.sqrt(width)

    def predict_action_chunk(self, batch: dict, noise: np.ndarray, steps: int = 10) -> np.ndarray:
        """[B, chunk_size, 2] disk targets in PushT's pixels (0 to 512) from the noise [B, chunk_size, 2]."""
        cond = np.concatenate([batch[STATE], batch[ENVIRONMENT_STATE]], axis=1) / 512.0
        x = noise.reshape(len(noise), -1).astype(np.float64)
        for i in range(steps):
            t = np.full((len(x), 1), 1.0 - i / steps)
            x = x - np.tanh(np.concatenate([cond, x, t], axis=1) @ self.w) / steps
        return 256.0 * (1.0 + np.tanh(x)).reshape(noise.shape)


class LeRobotAdapter:
    """The act() contract around a policy of LeRobot's shape: the probe's rows in, its chunks out."""

    head = "flow"
    input_keys = (STATE, ENVIRONMENT_STATE)
    capabilities = PolicyCapabilities(kinds=("flow_ode",))  # the policy's own sampler, seeded per row

    def __init__(self, policy, state_dim: int, action_low: float, action_high: float):
        self.policy, self.obs_dim = policy, state_dim  # obs_dim: observation.state's width
        self.low, self.high = action_low, action_high

    def act(self, obs, keys, mode):
        if mode.kind != "flow_ode":
            raise ValueError(f"this policy samples with its own noise only (flow_ode), got {mode.kind!r}")
        chunks = []
        for row, key in enumerate(keys):  # one row at a time: no row's bytes depend on its batch
            batch = {name: np.asarray(obs[name][row : row + 1]) for name in self.input_keys}
            shape = (1, self.policy.chunk_size, self.policy.action_dim)
            noise = np.random.default_rng(row_seed(key)).standard_normal(shape)
            action = self.policy.predict_action_chunk(batch, noise=noise, steps=mode.steps)[0]
            chunks.append(np.clip(2.0 * (action - self.low) / (self.high - self.low) - 1.0, -1.0, 1.0))
        diagnostics = [RowDiagnostics(logprob=None) for _ in keys]
        return PolicyOutput(actions=np.stack(chunks).astype(np.float32), diagnostics=diagnostics)


def make_policy(checkpoint=None, device=None) -> LeRobotAdapter:
    """The factory ``python -m grpo_probe.serve lerobot_stand_in:make_policy`` calls (random weights)."""
    return LeRobotAdapter(TinyPushTFlow(), state_dim=2, action_low=0.0, action_high=512.0)
