"""A policy wrapper that records, per row, the observation the policy saw.

Why: a GRPO update recomputes each recorded chunk's log-prob under the current parameters, and that
needs the observation of every replan. The rollout engine keeps the policy's per-row diagnostics (token
ids and log-probs, SDE step log-probs) but not the observations, so phase 2 runs the engine unchanged with
this wrapper as the policy: each row's diagnostics come back as a :class:`RecordedRow`, the usual fields
plus ``obs``. The wrapper is built in every rollout process from a checkpoint path
(:func:`recording_policy`, named as a ``PolicySource`` factory), so the parallel and sequential paths
record the same bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from grpo_probe.policies.checkpoint import load_policy
from grpo_probe.policies.protocol import Policy, PolicyOutput, RowDiagnostics, RowKey, SamplingMode

__all__ = ["RECORDING_FACTORY", "RecordedRow", "RecordingPolicy", "recording_policy"]

RECORDING_FACTORY = "grpo_probe.phase2.recording:recording_policy"
"""The ``PolicySource.factory`` that builds a :class:`RecordingPolicy` from a checkpoint in any process."""


@dataclass
class RecordedRow(RowDiagnostics):
    """A row's diagnostics plus the observation (float32 [obs_dim]) it was sampled from."""

    obs: np.ndarray | None = None


class RecordingPolicy:
    """Wraps a policy; ``act`` returns the same actions with each row's observation recorded."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.head = inner.head
        self.obs_dim = inner.obs_dim

    def act(self, obs: np.ndarray, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        out = self.inner.act(obs, keys, mode)
        seen = np.asarray(obs, dtype=np.float32)
        rows: list[RowDiagnostics] = []
        for i, diag in enumerate(out.diagnostics):
            fields = {f.name: getattr(diag, f.name) for f in dataclasses.fields(RowDiagnostics)}
            rows.append(RecordedRow(**fields, obs=seen[i].copy()))
        return PolicyOutput(actions=out.actions, diagnostics=rows)


def recording_policy(checkpoint: str, device: str = "cpu") -> RecordingPolicy:
    """A :class:`RecordingPolicy` around one of this package's checkpoints (a ``PolicySource`` factory)."""
    return RecordingPolicy(load_policy(checkpoint, device=device))
