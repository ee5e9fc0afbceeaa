"""The record of an episode that moves an object toward a goal in the table plane, and its schema.

Why its own module: every environment that pushes an object to a goal records the same columns (the
protocol's metrics, the object's traces, the goal, optionally the effector's traces, then its guard
channels), whether it is Gymnasium's Pusher through the adapter or a plane of the lab's own
(:mod:`grpo_probe.envs.planes`); the record and its schema sit below them all and import no simulator.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from grpo_probe.envs.episode_table import EpisodeMetrics
from grpo_probe.envs.protocol import METRIC_COLUMNS

__all__ = ["PushRecord", "push_schema"]

_F64_LIST = pa.list_(pa.float64())


@dataclass(frozen=True)
class PushRecord(EpisodeMetrics):
    """One episode of an object moved toward a goal in the table plane, as the protocol records it.

    Distances in cm unless the name says otherwise; ticks count from 1; traces hold index 0 = spawn. The
    leading columns are every environment's (:class:`grpo_probe.envs.episode_table.EpisodeMetrics`);
    ``channels`` are the environment's own columns (its guard channels), in its schema's order.
    """

    contact: bool
    first_contact_tick: int | None
    success: bool
    object_x_trace_m: tuple[float, ...]
    object_y_trace_m: tuple[float, ...]
    goal_x_m: float
    goal_y_m: float
    effector_x_trace_m: tuple[float, ...] | None = None
    effector_y_trace_m: tuple[float, ...] | None = None
    channels: tuple[tuple[str, Any], ...] = field(default=())

    def to_row(self) -> dict[str, Any]:
        """Column name -> value, lists for traces (the episode table's row form)."""
        row: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "channels":
                row.update(value)
            elif f.name.startswith("effector_") and value is None:
                continue
            else:
                row[f.name] = list(value) if isinstance(value, tuple) else value
        return row


def push_schema(channels: tuple[pa.Field, ...], effector: bool) -> pa.Schema:
    """The episode schema of a :class:`PushRecord`: the metrics, the traces, then the channels."""
    traces = [pa.field("object_x_trace_m", _F64_LIST, False), pa.field("object_y_trace_m", _F64_LIST, False)]
    if effector:
        traces += [
            pa.field("effector_x_trace_m", _F64_LIST, False),
            pa.field("effector_y_trace_m", _F64_LIST, False),
        ]
    goal = [pa.field("goal_x_m", pa.float64(), False), pa.field("goal_y_m", pa.float64(), False)]
    return pa.schema([*METRIC_COLUMNS, *traces, *goal, *channels])
