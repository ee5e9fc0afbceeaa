"""Guard-trip rates: how often sampled rollouts trip the guards a dense-reward GRPO would need.

Why: progress = d0 - d_final is maximised by any displacement toward the disk, including knocking the
boat flying (memo section 3). Before any guard enters a reward, the probe prices how often stochastic
decoding trips each one, against the deterministic anchor on the same seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from grpo_probe.analysis.cells.tables import RolloutTable
from grpo_probe.prereg import AnalysisNumbers

__all__ = ["GuardRate", "guard_rates", "guard_trips"]


@dataclass(frozen=True)
class GuardRate:
    """One guard channel: episodes that tripped it, sampled and anchor."""

    guard: str
    sampled_count: int
    sampled_n: int
    anchor_count: int
    anchor_n: int

    @property
    def sampled_rate(self) -> float:
        """Tripped share of the sampled episodes (all seeds x K draws, pooled)."""
        return self.sampled_count / self.sampled_n

    @property
    def anchor_rate(self) -> float:
        """Tripped share of the anchor episodes (one per seed)."""
        return self.anchor_count / self.anchor_n


def guard_trips(table: RolloutTable, analysis: AnalysisNumbers) -> dict[str, NDArray[np.bool_]]:
    """Per episode, whether each of the environment's guards tripped.

    Each guard is its environment's one declaration (:class:`grpo_probe.envs.protocol.Guard`: the column
    it reads and when it trips; the boat's are :func:`grpo_probe.envs.boat.spec.boat_guards`), so a guard
    added there is counted here, and in decision.md's reads and glossary, without a change to this module.
    """
    numbers = analysis.to_dict()
    columns = {**table.columns, "progress_final_cm": table.progress_final_cm, "contact": table.contact}
    return {guard.name: guard.trips(columns[guard.column], numbers) for guard in table.guards}


def guard_rates(probe: RolloutTable, anchor: RolloutTable, analysis: AnalysisNumbers) -> list[GuardRate]:
    """Pooled trip rates per guard (in the environment's order), sampled episodes against anchor episodes.

    With the same K draws for every seed, the pooled sampled rate equals the mean over seeds of the
    per-seed rates, so pooling weights seeds equally.
    """
    sampled = guard_trips(probe, analysis)
    anchored = guard_trips(anchor, analysis)
    return [
        GuardRate(
            guard=guard,
            sampled_count=int(sampled[guard].sum()),
            sampled_n=int(sampled[guard].size),
            anchor_count=int(anchored[guard].sum()),
            anchor_n=int(anchored[guard].size),
        )
        for guard in sampled
    ]
