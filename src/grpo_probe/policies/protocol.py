"""The policy protocol: the one interface the rollout engine calls and a user implements.

Why a protocol and not a base class: a user bringing their own checkpoint writes a small adapter with a
``head`` name, an ``obs_dim`` and an ``act`` method; nothing else of this package needs to be inherited.
Every random draw of a row is keyed by its :class:`RowKey`, and rows never influence each other, so a
row's actions, token ids and log-probs are the same bytes alone or inside any batch.

A worked adapter for a user's own deterministic flow checkpoint (``my_model`` maps a float32
observation batch and a float32 noise batch to chunks in [-1, 1]; (50, 6) is the boat scene's chunk,
another environment's is ``[spec.chunk_length, spec.action_dims]`` of its spec)::

    import numpy as np
    from grpo_probe.keyed_rng import numpy_generator, tag
    from grpo_probe.policies import PolicyOutput, RowDiagnostics

    class MyFlowAdapter:
        head = "flow"
        obs_dim = 17

        def __init__(self, my_model):
            self.my_model = my_model

        def act(self, obs, keys, mode):
            if mode.kind != "flow_ode":
                raise ValueError(f"MyFlowAdapter samples only 'flow_ode', got {mode.kind!r}")
            streams = [numpy_generator(k.run_key, tag("flow_noise"), k.seed, k.replan, k.draw) for k in keys]
            noise = np.stack([g.standard_normal((50, 6)) for g in streams]).astype(np.float32)
            actions = np.stack([self.my_model(o[None], n[None])[0] for o, n in zip(obs, noise)])  # row by row
            return PolicyOutput(actions=actions.astype(np.float32),
                                diagnostics=[RowDiagnostics(logprob=None) for _ in keys])

Noise comes from the row's key (never a global RNG) and each row is computed on its own, so the
adapter passes the probe's draw-0 and parallel oracles. Every rule of the contract is listed in
docs/your-policy.md ("The act() contract, in full"); ``grpo-probe check-policy`` and
:func:`grpo_probe.policies.check.check_policy` check an adapter against them in seconds.

This module is the bottom of the policies package and imports none of it: the heads and checkpoints build
on it, and :func:`grpo_probe.policies.checkpoint.load_policy` reads this package's own checkpoints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from grpo_probe.sampling import SAMPLING_KINDS, SamplingMode

__all__ = [
    "CHUNK_LENGTH",
    "SAMPLING_KINDS",
    "Policy",
    "PolicyOutput",
    "RowDiagnostics",
    "RowKey",
    "SamplingMode",
    "check_obs_batch",
]

CHUNK_LENGTH = 50
"""Actions per chunk of the boat scene's registered ``sim.chunk_length``. A policy returns the chunk of the
environment it runs in, ``EnvSpec.chunk_length`` x ``EnvSpec.action_dims``, which need not be this."""


@dataclass(frozen=True)
class RowKey:
    """Everything a row's random draws are keyed by (plus a stream tag chosen by the head)."""

    run_key: int
    seed: int
    replan: int
    draw: int

    def __post_init__(self) -> None:
        for name in ("run_key", "seed", "replan", "draw"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"RowKey.{name} must be a non-negative integer, got {value!r}")


@dataclass
class RowDiagnostics:
    """What a later GRPO step needs from one sampled chunk; ``None`` where the head has no such thing."""

    logprob: float | None
    """Summed log-prob of the chunk under the sampling distribution."""
    token_ids: np.ndarray | None = None
    """AR: int32 [n_tokens], without BOS and EOS."""
    token_logprobs: np.ndarray | None = None
    """AR: float64 [n_tokens]."""
    entropy: np.ndarray | None = None
    """AR: float64 [n_tokens], entropy of each step's sampling distribution (nats)."""
    step_logprobs: np.ndarray | None = None
    """flow_sde: float64 [steps], Gaussian log-prob of each transition summed over the chunk."""


@dataclass
class PolicyOutput:
    """A batch of chunks, float32 [B, chunk_length, action_dims] in [-1, 1], and one diagnostics record per
    row; chunk_length and action_dims are the environment's (its ``EnvSpec``), e.g. [B, 50, 7] for the
    pusher."""

    actions: np.ndarray
    diagnostics: list[RowDiagnostics]


@runtime_checkable
class Policy(Protocol):
    """Observation batch + per-row keys + a sampling mode -> action chunks and per-row diagnostics."""

    head: str
    obs_dim: int

    def act(self, obs: np.ndarray, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        """``obs`` float32 [B, obs_dim] (an ``ObservationBatch`` for a policy declaring ``input_keys``);
        ``keys`` has length B; returns actions float32 [B, chunk_length, action_dims] of the environment's
        spec."""
        ...


def check_obs_batch(obs: np.ndarray, keys: Sequence[RowKey], obs_dim: int) -> np.ndarray:
    """Validate an ``act`` call's inputs; returns ``obs`` as float32 [B, obs_dim]."""
    obs = np.asarray(obs, dtype=np.float32)
    if obs.ndim != 2 or obs.shape[1] != obs_dim:
        raise ValueError(f"obs must have shape [B, {obs_dim}], got {obs.shape}")
    if len(keys) != obs.shape[0]:
        raise ValueError(f"got {len(keys)} keys for {obs.shape[0]} observation rows")
    if not np.all(np.isfinite(obs)):
        bad = int(np.argwhere(~np.isfinite(obs))[0][0])
        raise ValueError(f"obs row {bad} contains a non-finite value")
    return obs
