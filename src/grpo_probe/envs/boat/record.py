"""The per-episode record: what the simulator measures about one episode, as named terms.

Why a dataclass and not a dict: the episode table's schema, the tests that recompute each metric, and
the analysis all name the same fields; a typo is an ``AttributeError`` here rather than a silent NaN
downstream. ``canonical_bytes`` is the byte form the determinism tests compare.
"""

from __future__ import annotations

from dataclasses import dataclass

from grpo_probe.envs.episode_table import EpisodeMetrics

__all__ = ["EpisodeRecord"]


@dataclass(frozen=True)
class EpisodeRecord(EpisodeMetrics):
    """One episode's outcome. Distances in cm unless the name says otherwise; ticks count from 1.

    The leading columns are every environment's (:class:`grpo_probe.envs.episode_table.EpisodeMetrics`):
    here the distance is the boat's centre to the disk's in the table plane, and ``n_ticks`` counts the
    control ticks executed (fewer than replans x executed_actions when the strike cap ends it).
    """

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
