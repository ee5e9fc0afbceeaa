"""The act() contract's types for a policy served without the probe installed: numpy only.

Why here: the lab's server runs in the lab's own environment (its Python, its torch), where grpo-probe
and its torch need not be installed. ``PolicyOutput`` and ``RowDiagnostics`` are the probe's own
(``grpo_probe.policies.protocol`` imports them from here), so an adapter written against them is the
same on both sides. ``RowKey``, ``SamplingMode`` and ``PolicyCapabilities`` are copies with the fields
and names of the probe's, which validate their values and carry the sampling registry; the server reads
them by attribute, so the probe's own serve as well. Nothing here validates what the probe validates:
the probe's client checks every reply against the contract and names the server's address when one
breaks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PolicyCapabilities", "PolicyOutput", "RowDiagnostics", "RowKey", "SamplingMode"]


@dataclass(frozen=True)
class RowKey:
    """Everything a row's random draws are keyed by: draw a row's noise from these, never a global RNG."""

    run_key: int
    seed: int
    replan: int
    draw: int


@dataclass(frozen=True)
class SamplingMode:
    """How to turn the head's distribution into one chunk: ``kind`` (``greedy``, ``temperature``,
    ``flow_ode``, ``flow_sde``, ``flow_euler``) and the parameters that kind takes (the others are None);
    ``noise`` False switches the Gumbel noise of kind ``temperature`` off (docs/your-policy.md)."""

    kind: str
    temperature: float | None = None
    sde_a: float | None = None
    steps: int = 10
    noise: bool = True


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


@dataclass(frozen=True)
class PolicyCapabilities:
    """What the policy declares it can do (the probe checks it when the arm is bound): the sampling
    ``kinds`` it samples, the ``logprobs`` it records (``per_token``, ``per_step`` or None) and whether it
    is ``trainable`` (a served policy never is for the probe's phase 2)."""

    kinds: tuple[str, ...]
    logprobs: str | None = None
    trainable: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The declaration as the server's hello sends it."""
        return {"kinds": list(self.kinds), "logprobs": self.logprobs, "trainable": self.trainable}
