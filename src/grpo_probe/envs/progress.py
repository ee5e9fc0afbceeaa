"""The progress reward: how far an episode moved its object toward the goal, in the record's columns.

Why one function: the probe reads ``progress_final_cm`` as the reward of every environment (the boat,
any Gymnasium environment through the adapter, the planes), and its reads compare them; three copies of
the arithmetic could drift apart in a rounding, an order of operations or the empty-episode case, and
the episode bytes the designs pin would no longer mean the same thing in each scene. Every environment
passes its per-tick object-to-goal distances (metres, index 0 the spawn) to :func:`progress_of`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Progress", "progress_of"]


@dataclass(frozen=True)
class Progress:
    """The distance columns of an episode record, in cm (the protocol's ``METRIC_COLUMNS`` of that name)."""

    d0_cm: float
    """The object-to-goal distance at spawn."""
    d_final_cm: float
    """The distance after the last executed tick."""
    progress_final_cm: float
    """``100 (d0 - d_final)`` with the distances in metres: the reward, positive toward the goal."""
    best_point_cm: float
    """The most progress at any executed tick, ``max_t 100 (d0 - d_t)``; 0 for an episode of no tick."""
    distance_trace_cm: tuple[float, ...]
    """The distance at spawn and after each tick."""

    def columns(self) -> dict[str, Any]:
        """Column name -> value, to pass into a record (``Record(**progress.columns(), ...)``)."""
        return dataclasses.asdict(self)


def progress_of(distances_m: Sequence[float]) -> Progress:
    """The progress columns of an episode whose object-to-goal distance was ``distances_m`` (metres; the
    spawn first, then one per executed tick). An empty sequence is an error: there is no spawn to measure
    from."""
    if not len(distances_m):
        raise ValueError("progress_of needs the spawn distance at least (got no distances)")
    d0, d_final = distances_m[0], distances_m[-1]
    best = max(100.0 * (d0 - d) for d in distances_m[1:]) if len(distances_m) > 1 else 0.0
    return Progress(
        d0_cm=100.0 * d0,
        d_final_cm=100.0 * d_final,
        progress_final_cm=100.0 * (d0 - d_final),
        best_point_cm=best,
        distance_trace_cm=tuple(100.0 * d for d in distances_m),
    )
