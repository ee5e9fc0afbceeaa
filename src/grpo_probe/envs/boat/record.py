"""The per-episode record: what the simulator measures about one episode, as named terms.

Why a dataclass and not a dict: the episode table's schema, the tests that recompute each metric, and
the analysis all name the same fields; a typo is an ``AttributeError`` here rather than a silent NaN
downstream. ``canonical_bytes`` is the byte form the determinism tests compare.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from grpo_probe.envs.episode_table import canonical_row_bytes

__all__ = ["EpisodeRecord"]


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode's outcome. Distances in cm unless the name says otherwise; ticks count from 1."""

    seed: int
    n_ticks: int
    """Control ticks executed (fewer than replans x executed_actions when the strike cap ends it)."""
    d0_cm: float
    """Boat-to-disk centre distance in the table plane at spawn."""
    d_final_cm: float
    """The same distance after the last executed tick."""
    progress_final_cm: float
    """100 * (d0 - d_final) in metres: how far the boat moved toward the disk."""
    best_point_cm: float
    """max over executed ticks t >= 1 of 100 * (d0 - d_t); negative when every tick is farther than d0."""
    distance_trace_cm: tuple[float, ...]
    """d_t for t = 0..n_ticks (index 0 is the spawn)."""
    boat_x_trace_m: tuple[float, ...]
    boat_y_trace_m: tuple[float, ...]
    pusher_x_trace_m: tuple[float, ...]
    pusher_y_trace_m: tuple[float, ...]
    disk_x_m: float
    disk_y_m: float
    contact: bool
    """Any pusher-boat contact at any physics step."""
    first_contact_tick: int | None
    """Tick (1-based) during which the first pusher-boat contact happened; None without contact."""
    reset_strikes: int
    """Safety-monitor events: pressing into the table above the force limit, or leaving the workspace."""
    ended_by_strike_cap: bool
    final_upright: bool
    """Boat up-axis within the registered angle of vertical after the last tick."""
    final_tilt_deg: float
    final_z_mm: float
    """Boat centre height above the table top after the last tick."""
    knocked_off: bool
    """Boat centre fell the registered drop below its resting height (off the table)."""
    max_boat_speed_m_s: float
    """Largest boat linear speed seen at a tick boundary (the swat signature)."""
    success: bool
    """Boat centre within the disk radius at the end, and still on the table."""

    def to_row(self) -> dict[str, Any]:
        """Column name -> value, lists for traces (the episode table's row form)."""
        row = dataclasses.asdict(self)
        for name, value in row.items():
            if isinstance(value, tuple):
                row[name] = list(value)
        return row

    def canonical_bytes(self) -> bytes:
        """Exact byte form of the row (:func:`canonical_row_bytes`)."""
        return canonical_row_bytes(self.to_row())
