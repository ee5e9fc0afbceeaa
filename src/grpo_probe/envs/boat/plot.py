"""Top-down trajectory figure of one or more episodes (matplotlib, Agg backend).

Why one function for one and many episodes: the demo command draws one episode, and decision.md draws the
K draws of a cell's median seed over one spawn; both should look the same so a reader learns one picture.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.patches import Circle, Rectangle

from grpo_probe.atomic_io import atomic_write_bytes
from grpo_probe.png_io import png_bytes

__all__ = ["plot_trajectories"]

_TABLE_HALF_M = 0.4
_DPI = 100
"""Pixels per inch, of the figure and of its PNG: a 5-inch figure is 500 pixels square."""


def plot_trajectories(
    rows: Sequence[dict[str, Any]],
    out: str | os.PathLike[str],
    disk_radius_m: float,
    title: str = "",
) -> None:
    """Draw boat paths coloured by time, pusher paths, the disk, and start/end boat positions.

    ``rows`` are episode-table rows (mappings with the trace columns); all are drawn on one table.
    The PNG carries no timestamp or software metadata, so its bytes depend only on the rows.
    """
    if not rows:
        raise ValueError("plot_trajectories needs at least one episode row")
    fig, ax = plt.subplots(figsize=(5.0, 5.0), dpi=_DPI)
    ax.add_patch(
        Rectangle(
            (-_TABLE_HALF_M, -_TABLE_HALF_M),
            2 * _TABLE_HALF_M,
            2 * _TABLE_HALF_M,
            facecolor="#efe6d8",
            edgecolor="#8a7a60",
        )
    )
    first = rows[0]
    ax.add_patch(
        Circle(
            (first["disk_x_m"], first["disk_y_m"]),
            disk_radius_m,
            facecolor="#e0505080",
            edgecolor="#b02020",
            label="disk",
        )
    )
    line = None
    for i, row in enumerate(rows):
        bx, by = np.asarray(row["boat_x_trace_m"]), np.asarray(row["boat_y_trace_m"])
        px, py = np.asarray(row["pusher_x_trace_m"]), np.asarray(row["pusher_y_trace_m"])
        ax.plot(px, py, color="#3050c0", alpha=0.35, lw=0.8, label="pusher" if i == 0 else None)
        segments = np.stack([np.column_stack([bx[:-1], by[:-1]]), np.column_stack([bx[1:], by[1:]])], axis=1)
        line = LineCollection(segments, cmap="viridis", lw=2.0)
        line.set_array(np.arange(len(segments)))
        ax.add_collection(line)
        ax.plot(bx[0], by[0], "o", color="black", ms=5, label="boat start" if i == 0 else None)
        ax.plot(bx[-1], by[-1], "s", color="#d08000", ms=5, label="boat end" if i == 0 else None)
    if line is not None:
        fig.colorbar(line, ax=ax, fraction=0.046, pad=0.04, label="tick")
    ax.set_xlim(-0.45, 0.45)
    ax.set_ylim(-0.45, 0.45)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    try:
        data = png_bytes(fig, _DPI)
    finally:
        plt.close(fig)
    atomic_write_bytes(out, data)
