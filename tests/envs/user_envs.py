"""Environments and a policy of "users" for the environment tests, importable by worker processes.

Why here: a design names a user's environment as ``module:factory``; workers import it by that name,
so these live in a module rather than inside a test. Each factory is called as ``factory(**params)``.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from grpo_probe.envs.boat.environment import BoatPush
from grpo_probe.envs.boat.params import SimParams
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies.protocol import PolicyOutput, RowDiagnostics, RowKey, SamplingMode

DRIFT_AT_TICK = 13
"""The drifting boat's first tick in a worker process whose state differs from the sequential path's."""


def factory_name(function: Callable[..., Any]) -> str:
    """``module:function`` of a factory defined here, whatever name pytest imported this module under."""
    return f"{function.__module__}:{function.__qualname__}"


class DriftingBoat(BoatPush):
    """The boat scene, except that in a worker process the boat slides 1 um during tick 13: the kind of
    dependence on the process (a global RNG, a thread count) that the parallel oracle exists to catch."""

    def _run_tick(self, target: np.ndarray) -> None:
        if self._tick + 1 == DRIFT_AT_TICK and multiprocessing.parent_process() is not None:
            self.data.qpos[self._boat_qpos] += 1e-6
        super()._run_tick(target)


def make_drifting_boat(**params: Any) -> DriftingBoat:
    return DriftingBoat(SimParams.from_dict(params))


class BoatWithoutProgress(BoatPush):
    """The boat scene whose record forgets a registered metric."""

    def record(self) -> Any:
        full = super().record()

        class _Record:
            def to_row(self) -> dict[str, Any]:
                row = full.to_row()
                del row["progress_final_cm"]
                return row

            def canonical_bytes(self) -> bytes:
                return full.canonical_bytes()

        return _Record()


def make_boat_without_progress(**params: Any) -> BoatWithoutProgress:
    return BoatWithoutProgress(SimParams.from_dict(params))


class KeyedNoisePolicy:
    """A 'flow' head for any environment: chunk = tanh(obs W + keyed noise), [chunk_length, action_dims]."""

    head = "flow"

    def __init__(self, obs_dim: int, chunk_length: int, action_dims: int) -> None:
        self.obs_dim = obs_dim
        self.shape = (chunk_length, action_dims)
        self.weights = numpy_generator(tag("user_env_policy")).standard_normal(
            (obs_dim, chunk_length * action_dims)
        )
        self.weights *= 0.3 / np.sqrt(obs_dim)

    def act(self, obs: np.ndarray, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        actions = np.zeros((len(keys), *self.shape), dtype=np.float32)
        for row, key in enumerate(keys):
            noise = numpy_generator(key.run_key, tag("user_env_noise"), key.seed, key.replan, key.draw)
            pre = obs[row].astype(np.float64) @ self.weights + 0.5 * noise.standard_normal(
                self.weights.shape[1]
            )
            actions[row] = np.tanh(pre).reshape(self.shape).astype(np.float32)
        return PolicyOutput(actions=actions, diagnostics=[RowDiagnostics(logprob=None) for _ in keys])


def make_noise_policy(
    device: str = "cpu", obs_dim: int = 17, chunk_length: int = 50, action_dims: int = 6
) -> KeyedNoisePolicy:
    """Factory for :class:`grpo_probe.rollout.PolicySource` (``device`` is ignored: numpy only)."""
    del device
    return KeyedNoisePolicy(obs_dim, chunk_length, action_dims)


class GlobalRngPolicy(KeyedNoisePolicy):
    """The keyed noise policy, except that each row's noise comes from numpy's global RNG: the
    contract break a lab's adapter makes when it calls ``np.random`` (the policy checker's ``global-rng``)."""

    def act(self, obs: np.ndarray, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        actions = np.zeros((len(keys), *self.shape), dtype=np.float32)
        for row in range(len(keys)):
            noise = np.random.standard_normal(self.weights.shape[1])  # noqa: NPY002 - the planted break
            pre = obs[row].astype(np.float64) @ self.weights + 0.5 * noise
            actions[row] = np.tanh(pre).reshape(self.shape).astype(np.float32)
        return PolicyOutput(actions=actions, diagnostics=[RowDiagnostics(logprob=None) for _ in keys])


def load_global_rng_policy(checkpoint: str, device: str = "cpu") -> GlobalRngPolicy:
    """An adapter factory (``checkpoint`` is ignored) for a boat arm that breaks the act() contract."""
    del checkpoint, device
    return GlobalRngPolicy(17, 50, 6)


class FrameNoisePolicy(KeyedNoisePolicy):
    """The keyed noise policy, steered by a camera frame too (``observation.images.<camera>``): each row's
    chunk shifts with its frame's mean brightness, so a frame that differed between processes would
    change the chunk and the oracles' digests would disagree."""

    def __init__(self, obs_dim: int, chunk_length: int, action_dims: int, camera: str) -> None:
        super().__init__(obs_dim, chunk_length, action_dims)
        self.image_key = f"observation.images.{camera}"
        self.input_keys = ("observation.state", self.image_key)

    def act(self, obs: Any, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        frames = np.asarray(obs[self.image_key])
        output = super().act(np.asarray(obs["observation.state"]), keys, mode)
        shift = (frames.reshape(len(keys), -1).mean(axis=1) / 255.0 - 0.5).astype(np.float32)
        actions = np.clip(output.actions + shift[:, None, None], -1.0, 1.0).astype(np.float32)
        return PolicyOutput(actions=actions, diagnostics=output.diagnostics)


def make_frame_policy(
    device: str = "cpu", obs_dim: int = 5, chunk_length: int = 20, action_dims: int = 2, camera: str = "top"
) -> FrameNoisePolicy:
    """Factory for :class:`grpo_probe.rollout.PolicySource` (``device`` is ignored: numpy only)."""
    del device
    return FrameNoisePolicy(obs_dim, chunk_length, action_dims, camera)
