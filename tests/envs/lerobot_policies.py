"""A policy in LeRobot's keys for the key-convention tests, importable by worker processes by name.

Why here: the parallel oracle builds the policy in each worker from ``module:function``, so it lives in a
module rather than inside a test. It reads exactly what a LeRobot policy reads: ``observation.state``
(the agent's own state), ``observation.environment_state`` and one camera's frames.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from grpo_probe.envs.observation import OBSERVATION_ENVIRONMENT_STATE, OBSERVATION_STATE, image_key
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies.protocol import PolicyOutput, RowDiagnostics, RowKey, SamplingMode


class ThreeKeyPolicy:
    """chunk = tanh(state W_s + environment_state W_e + mean frame brightness + keyed noise).

    ``seen`` keeps, per call in this process, each key's dtype and shape (what the test asserts on).
    """

    head = "flow"
    seen: ClassVar[list[dict[str, tuple[str, tuple[int, ...]]]]] = []

    def __init__(self, obs_dim: int, environment_dim: int, camera: str, chunk_length: int, action_dims: int):
        self.obs_dim = obs_dim
        self.input_keys = (OBSERVATION_STATE, OBSERVATION_ENVIRONMENT_STATE, image_key(camera))
        self.shape = (chunk_length, action_dims)
        weights = numpy_generator(tag("lerobot_test_policy")).standard_normal(
            (obs_dim + environment_dim, chunk_length * action_dims)
        )
        self.weights = weights * 0.3 / np.sqrt(obs_dim + environment_dim)

    def act(self, obs: Mapping[str, Any], keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        type(self).seen.append({k: (str(obs[k].dtype), tuple(obs[k].shape)) for k in obs})
        state, environment, frames = (obs[k] for k in self.input_keys)
        actions = np.zeros((len(keys), *self.shape), dtype=np.float32)
        for row, key in enumerate(keys):
            noise = numpy_generator(key.run_key, tag("lerobot_test_noise"), key.seed, key.replan, key.draw)
            features = np.concatenate([state[row], environment[row]]).astype(np.float64)
            pre = features @ self.weights + frames[row].mean() / 255.0
            pre += 0.5 * noise.standard_normal(self.weights.shape[1])
            actions[row] = np.tanh(pre).reshape(self.shape).astype(np.float32)
        return PolicyOutput(actions=actions, diagnostics=[RowDiagnostics(logprob=None) for _ in keys])


def make_three_key_policy(device: str = "cpu", **options: Any) -> ThreeKeyPolicy:
    """Factory for :class:`grpo_probe.rollout.PolicySource` (``device`` is ignored: numpy only)."""
    del device
    return ThreeKeyPolicy(**options)
