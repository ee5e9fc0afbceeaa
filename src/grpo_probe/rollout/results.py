"""In-memory results of rollouts: one :class:`EpisodeResult` per (seed, draw).

Why keep more than the table row: the parallel oracle compares the executed action chunks bit for bit,
and those do not belong in the rollout table (15 x 30 x 6 floats per row that no analysis reads). The
timings stay here too: they differ between runs, so they must never reach an artifact whose bytes are
compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from grpo_probe.envs.protocol import EpisodeRecordLike
from grpo_probe.policies.protocol import RowDiagnostics

__all__ = ["EpisodeResult", "EpisodeSpec", "EpisodeTiming"]


@dataclass(frozen=True, order=True)
class EpisodeSpec:
    """One episode of a group: the spawn seed and the draw index (the draw enters only the RNG keys)."""

    seed: int
    draw: int


@dataclass
class EpisodeTiming:
    """Wall seconds attributed to one episode (a batched policy call is split evenly over its rows)."""

    physics_s: float = 0.0
    policy_s: float = 0.0
    total_s: float = 0.0
    render_s: float = 0.0
    """Camera frames rendered for the policy (0.0 when it reads no camera)."""
    gpu_s: float | None = None
    """GPU seconds: the policy calls timed between ``torch.cuda.synchronize()`` barriers, split like
    ``policy_s``; None when the policy ran on the CPU (not measured, never 0.0)."""

    @property
    def overhead_s(self) -> float:
        """Everything that is neither physics nor the policy: resets, records, bookkeeping, transfer."""
        return max(self.total_s - self.physics_s - self.policy_s - self.render_s, 0.0)


@dataclass
class EpisodeResult:
    """What one episode produced: the simulator's record, the policy's per-replan outputs, the timing."""

    spec: EpisodeSpec
    head: str
    record: EpisodeRecordLike
    """The environment's record (boat: :class:`~grpo_probe.envs.boat.record.EpisodeRecord`, or own)."""
    executed_actions: np.ndarray
    """float32 [replans run, executed_actions, action_dims]: the part of each chunk handed to the env."""
    diagnostics: list[RowDiagnostics]
    """One per replan run, in replan order."""
    timing: EpisodeTiming = field(default_factory=EpisodeTiming)
    frame_sha256: list[str] | None = None
    """One digest per replan run of the frames the policy saw
    (:func:`grpo_probe.envs.observation.frame_sha256`), or under LeRobot's keys of every array it saw,
    both state parts with the frames (:func:`grpo_probe.envs.observation.observation_sha256`); None when
    it read no camera under packed keys."""
