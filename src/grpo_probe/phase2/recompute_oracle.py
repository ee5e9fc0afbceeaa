"""The oracle over phase 2's recomputed log-probs: each recorded token or SDE step against its recomputation.

Why: before the first update the recomputation (:mod:`grpo_probe.phase2.recompute`) must give back the
record, entry by entry, within the head's registered tolerance (``phase2.heads.<head>.replay_atol``), and
a camera-fed head's stored frames must hash to the digest the rollout recorded. The first mismatch stops
training, naming seed, draw, replan and token position, SDE step or camera. Its report keeps the name the
results have always given it (``replay_oracle.json``, phase2.md's "Replay oracle"), so no result moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from grpo_probe.envs.observation import frame_sha256
from grpo_probe.phase2.recompute import HeadModel, recompute_logprobs
from grpo_probe.phase2.rollouts import Episode, Replan, RolloutBatch

__all__ = [
    "RecomputeMismatch",
    "RecomputeMismatchError",
    "RecomputeReport",
    "check_recompute",
    "recompute_batch",
]


@dataclass(frozen=True)
class RecomputeMismatch:
    """The first recomputed log-prob outside the tolerance, or the first frame that is not the one the
    policy saw, and where it is."""

    seed: int
    draw: int
    replan: int
    position: int | None
    """Token position (AR) or SDE step (flow); None for the replan's summed log-prob or a frame."""
    what: str
    """``token``, ``step``, ``replan sum`` or ``frame``."""
    recorded: float | None
    """The recorded log-prob (None for a frame)."""
    recomputed: float | None
    camera: str | None = None
    """``frame``: the ``observation.images.<camera>`` key(s) of the replan's frames."""
    recorded_sha256: str | None = None
    """``frame``: the digest the rollout engine recorded when it rendered the frames."""
    replayed_sha256: str | None = None
    """``frame``: the digest of the frames the recomputation reads (None: no frames were stored)."""

    def text(self) -> str:
        """``seed 20000, draw 3, replan 7, token 12: recorded -1.2 recomputed -1.5 (|diff| 0.3)``."""
        where = f"seed {self.seed}, draw {self.draw}, replan {self.replan}"
        if self.what == "frame":
            replayed = "no stored frame" if self.replayed_sha256 is None else f"sha256 {self.replayed_sha256}"
            return (
                f"{where}, frame of {self.camera}: the rollout recorded sha256 {self.recorded_sha256}, "
                f"the replay reads {replayed} (frame mismatch: not the frame the policy saw)"
            )
        if self.position is not None:
            where += f", {self.what} {self.position}"
        else:
            where += f", {self.what}"
        diff = abs(float(self.recorded) - float(self.recomputed))  # type: ignore[arg-type]
        return f"{where}: recorded {self.recorded!r}, recomputed {self.recomputed!r} (|diff| {diff:.3g})"


@dataclass(frozen=True)
class RecomputeReport:
    """What the recompute oracle compared and found; JSON-ready through :meth:`to_dict`."""

    head: str
    iteration: int
    rows: int
    replans: int
    entries: int
    tolerance: float
    max_abs_diff: float
    mean_abs_diff: float
    frames: int
    """Replans whose stored frames were hashed and compared with the recorded digest (0: no camera)."""
    first_mismatch: RecomputeMismatch | None
    recomputed: dict[tuple[int, int, int], np.ndarray] = field(repr=False, compare=False)
    """(seed, draw, replan) -> recomputed per-token or per-step log-probs (float64)."""

    @property
    def passed(self) -> bool:
        return self.first_mismatch is None

    def to_dict(self) -> dict[str, Any]:
        mismatch = self.first_mismatch
        compared = (
            "per token under softmax(masked_logits / T)"
            if self.head == "ar"
            else "per SDE step, Gaussian transition log-prob summed over the chunk"
        )
        if self.frames:
            compared += ", on the stored frames, each hashed against the digest the rollout recorded"
        return {
            "head": self.head,
            "iteration": self.iteration,
            "compared": compared,
            "frames_compared": self.frames,
            "rows": self.rows,
            "replans": self.replans,
            "entries": self.entries,
            "tolerance_nats": self.tolerance,
            "max_abs_diff_nats": self.max_abs_diff,
            "mean_abs_diff_nats": self.mean_abs_diff,
            "passed": self.passed,
            "first_mismatch": None
            if mismatch is None
            else {
                "seed": mismatch.seed,
                "draw": mismatch.draw,
                "replan": mismatch.replan,
                "position": mismatch.position,
                "what": mismatch.what,
                "recorded": mismatch.recorded,
                "recomputed": mismatch.recomputed,
                **(
                    {
                        "camera": mismatch.camera,
                        "recorded_sha256": mismatch.recorded_sha256,
                        "replayed_sha256": mismatch.replayed_sha256,
                    }
                    if mismatch.what == "frame"
                    else {}
                ),
                "text": mismatch.text(),
            },
        }


class RecomputeMismatchError(RuntimeError):
    """A recomputed log-prob differs from the recorded one beyond the tolerance; nothing is trained."""

    def __init__(self, message: str, report: RecomputeReport) -> None:
        super().__init__(message)
        self.report = report


def _units(batch: RolloutBatch, episodes: Sequence[Episode] | None) -> list[tuple[Episode, Replan]]:
    chosen = batch.episodes if episodes is None else episodes
    return [(e, r) for e in chosen for r in e.replans]


def recompute_batch(
    head_model: HeadModel,
    batch: RolloutBatch,
    tolerance: float,
    episodes: Sequence[Episode] | None = None,
    chains: torch.Tensor | None = None,
) -> RecomputeReport:
    """Recompute every recorded log-prob of ``batch`` and compare with the record; never raises on a mismatch.

    Per entry (token or SDE step): |recomputed - recorded| <= tolerance. Per replan: the recorded summed
    log-prob (the ``replan_logprob`` column) must equal the sum of the recomputed entries within
    ``tolerance`` x entries. The first mismatch in (seed, draw, replan, position) order is reported.
    ``chains``: the flow chains of every replan of ``episodes`` (or of the batch), in order, if known.
    """
    if batch.head != head_model.head:
        raise ValueError(
            f"{batch.path}: rollouts of the {batch.head} head, model of the {head_model.head} head"
        )
    units = _units(batch, episodes)
    first, frames = _frame_mismatch(head_model, units)
    if first is not None and first.replayed_sha256 is None:  # no frame to recompute with
        return RecomputeReport(
            head=batch.head,
            iteration=batch.iteration,
            rows=len({(e.seed, e.draw) for e, _ in units}),
            replans=len(units),
            entries=0,
            tolerance=tolerance,
            max_abs_diff=0.0,
            mean_abs_diff=0.0,
            frames=frames,
            first_mismatch=first,
            recomputed={},
        )
    recomputed = recompute_logprobs(head_model, batch, units, chains)
    what = "token" if batch.head == "ar" else "step"
    diffs: list[np.ndarray] = []
    by_key: dict[tuple[int, int, int], np.ndarray] = {}
    for (episode, replan), mine in zip(units, recomputed, strict=True):
        recorded = replan.token_logprobs if batch.head == "ar" else replan.step_logprobs
        if recorded is None or len(recorded) != len(mine):
            raise ValueError(
                f"{batch.path}: seed {episode.seed}, draw {episode.draw}, replan {replan.replan}: "
                f"recorded {what} log-probs are missing or have the wrong length"
            )
        by_key[(episode.seed, episode.draw, replan.replan)] = mine
        diff = np.abs(mine - recorded)
        diffs.append(diff)
        if first is None:
            bad = np.flatnonzero(~(diff <= tolerance))  # NaN counts as a mismatch
            if bad.size:
                k = int(bad[0])
                first = RecomputeMismatch(
                    episode.seed, episode.draw, replan.replan, k, what, float(recorded[k]), float(mine[k])
                )
            elif not abs(float(mine.sum()) - replan.logprob) <= tolerance * len(mine):
                first = RecomputeMismatch(
                    episode.seed, episode.draw, replan.replan, None, "replan sum",
                    replan.logprob, float(mine.sum()),
                )  # fmt: skip
    every = np.concatenate(diffs) if diffs else np.zeros(0)
    return RecomputeReport(
        head=batch.head,
        iteration=batch.iteration,
        rows=len({(e.seed, e.draw) for e, _ in units}),
        replans=len(units),
        entries=int(every.size),
        tolerance=tolerance,
        max_abs_diff=float(every.max()) if every.size else 0.0,
        mean_abs_diff=float(every.mean()) if every.size else 0.0,
        frames=frames,
        first_mismatch=first,
        recomputed=by_key,
    )


def _frame_mismatch(
    head_model: HeadModel, units: Sequence[tuple[Episode, Replan]]
) -> tuple[RecomputeMismatch | None, int]:
    """The first unit whose stored frames do not hash to the digest the rollout recorded; (it, compared).

    Every unit of a camera-fed head is compared; a head that reads the state alone compares the units
    whose rollout recorded a digest anyway (none, for the reference heads).
    """
    first: RecomputeMismatch | None = None
    compared = 0
    for episode, replan in units:
        if not head_model.frame_keys and replan.frame_sha256 is None:
            continue
        compared += 1
        stored = dict(replan.frames or {})
        replayed = frame_sha256(stored) if stored else None
        if first is None and (replan.frame_sha256 is None or replayed != replan.frame_sha256):
            cameras = ", ".join(sorted(stored) or head_model.frame_keys) or "no camera"
            first = RecomputeMismatch(
                episode.seed, episode.draw, replan.replan, None, "frame", None, None,
                camera=cameras, recorded_sha256=replan.frame_sha256, replayed_sha256=replayed,
            )  # fmt: skip
    return first, compared


def check_recompute(report: RecomputeReport, where: str) -> None:
    """Raise :class:`RecomputeMismatchError` naming ``where`` and the first mismatch, if there is one."""
    mismatch = report.first_mismatch
    if mismatch is not None and mismatch.what == "frame":
        raise RecomputeMismatchError(
            f"{where}: replay oracle failed, the {report.head} head would be conditioned on a frame other "
            f"than the one its policy saw, at {mismatch.text()}; nothing is trained",
            report,
        )
    if mismatch is not None:
        raise RecomputeMismatchError(
            f"{where}: replay oracle failed, the {report.head} head's recomputed log-prob differs from the "
            f"recorded one beyond the registered tolerance {report.tolerance:g} nats at "
            f"{mismatch.text()}; nothing is trained",
            report,
        )
