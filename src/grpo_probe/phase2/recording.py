"""A policy wrapper that records, per row, the observation the policy saw (its state and its frames).

Why: a GRPO update recomputes each recorded chunk's log-prob under the current parameters, and that
needs the observation of every replan: the state vector, and for a camera-fed policy the frames of every
camera it declares (``input_keys``). The rollout engine keeps the policy's per-row diagnostics (token
ids and log-probs, SDE step log-probs) but not the observations, so phase 2 runs the engine unchanged with
this wrapper as the policy: each row's diagnostics come back as a :class:`RecordedRow`, the usual fields
plus ``obs`` and ``frames``. The wrapper declares the inner policy's ``input_keys``, so the engine renders
exactly the cameras the inner policy reads and hashes them per replan as it does for any policy. The
wrapper is built in every rollout process from a checkpoint path
(:func:`recording_policy`, named as a ``PolicySource`` factory), so the parallel and sequential paths
record the same bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from grpo_probe.envs.observation import OBSERVATION_STATE, camera_of
from grpo_probe.policies.checkpoint import load_policy
from grpo_probe.policies.protocol import Policy, PolicyOutput, RowDiagnostics, RowKey, SamplingMode

__all__ = ["RECORDING_FACTORY", "RecordedRow", "RecordingPolicy", "recording_policy"]

RECORDING_FACTORY = "grpo_probe.phase2.recording:recording_policy"
"""The ``PolicySource.factory`` that builds a :class:`RecordingPolicy` from a checkpoint in any process."""


@dataclass
class RecordedRow(RowDiagnostics):
    """A row's diagnostics plus the observation (float32 [obs_dim]) it was sampled from."""

    obs: np.ndarray | None = None
    frames: dict[str, np.ndarray] | None = None
    """``observation.images.<camera>`` -> uint8 [H, W, 3]: the frames the policy saw (None: no camera)."""


class RecordingPolicy:
    """Wraps a policy; ``act`` returns the same actions with each row's observation recorded."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.head = inner.head
        self.obs_dim = inner.obs_dim
        declared = getattr(inner, "input_keys", None)
        if declared is not None:
            self.input_keys: tuple[str, ...] = tuple(declared)
        self.frame_keys: tuple[str, ...] = tuple(k for k in (declared or ()) if camera_of(k) is not None)
        """The camera keys the inner policy reads, whose frames each row records."""

    def act(self, obs: Any, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        out = self.inner.act(obs, keys, mode)
        if isinstance(obs, Mapping):
            seen = np.asarray(obs[OBSERVATION_STATE], dtype=np.float32)
            frames = {k: np.asarray(obs[k]) for k in self.frame_keys}
        else:
            seen, frames = np.asarray(obs, dtype=np.float32), {}
        rows: list[RowDiagnostics] = []
        for i, diag in enumerate(out.diagnostics):
            fields = {f.name: getattr(diag, f.name) for f in dataclasses.fields(RowDiagnostics)}
            row_frames = {k: v[i].copy() for k, v in frames.items()} or None
            rows.append(RecordedRow(**fields, obs=seen[i].copy(), frames=row_frames))
        return PolicyOutput(actions=out.actions, diagnostics=rows)


def recording_policy(checkpoint: str, device: str = "cpu") -> RecordingPolicy:
    """A :class:`RecordingPolicy` around one of this package's checkpoints (a ``PolicySource`` factory)."""
    return RecordingPolicy(load_policy(checkpoint, device=device))
