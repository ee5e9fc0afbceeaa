"""Bit-for-bit comparison of two runs of the same episodes, naming the first place they differ.

Why an ordered walk and not a table diff: when two paths disagree, the useful answer is *where it
started*: the first (seed, draw, tick) and the field, with both values, because everything after the
first difference differs too. Each episode is walked in time order: the spawn (tick 0), then per replan
the policy's outputs (token ids, log-prob, entropy), then per executed tick the action and the state
traces after it; scalar columns come last. Floats are compared by their bits (so -0.0 != 0.0 and a NaN
equals only the same NaN), and values are reported with ``float.hex`` so a 1-ulp difference is visible.

Ticks count from 1 as in the episode record: the action of tick ``t`` is action ``t - r E - 1`` of
replan ``r``'s chunk (``E`` executed actions per replan), and trace index ``t`` is the state after it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import zip_longest
from typing import Any

import numpy as np

__all__ = [
    "REPLAN_COLUMNS",
    "TRACE_COLUMNS",
    "ComparedEpisode",
    "ComparisonCounts",
    "Divergence",
    "compare_episodes",
    "format_value",
]

TRACE_COLUMNS = (
    "distance_trace_cm",
    "boat_x_trace_m",
    "boat_y_trace_m",
    "pusher_x_trace_m",
    "pusher_y_trace_m",
)
"""The boat's per-tick columns (index 0 = spawn, index t = after tick t); another environment's are its
spec's ``trace_columns``, passed to :func:`compare_episodes`."""
REPLAN_COLUMNS = (
    "replan_frame_sha256",
    "replan_token_ids",
    "replan_n_tokens",
    "replan_logprob",
    "replan_entropy_mean",
)
"""Per-replan columns; compared at the first tick of the replan's chunk, before its first action. The
frames the policy saw come first: a policy's outputs can only be as identical as its inputs."""


@dataclass(frozen=True)
class ComparedEpisode:
    """One side of a comparison: a rollout-table row and, when known, its executed actions [R, E, 6]."""

    row: Mapping[str, Any]
    actions: np.ndarray | None = None


@dataclass
class ComparisonCounts:
    """How much was compared (so a report shows that a pass was not vacuous)."""

    episodes: int = 0
    ticks: int = 0
    actions: int = 0
    token_ids: int = 0
    frames: int = 0
    """Per-replan frame digests compared (0 when no policy read a camera)."""
    values: int = 0
    mismatched_episodes: int = 0

    def add(self, other: ComparisonCounts) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)


@dataclass(frozen=True)
class Divergence:
    """The first difference between two runs: where (arm, mode, seed, draw, tick, field) and both values."""

    arm: str
    mode: str
    seed: int
    draw: int
    tick: int | None
    field: str
    first: str
    second: str
    names: tuple[str, str] = field(default=("first", "second"))

    def message(self) -> str:
        where = "after the last tick" if self.tick is None else f"tick {self.tick}"
        return (
            f"first divergence at arm={self.arm} mode={self.mode} seed={self.seed} draw={self.draw} {where}, "
            f"{self.field}: {self.names[0]}={self.first} {self.names[1]}={self.second}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "mode": self.mode,
            "seed": self.seed,
            "draw": self.draw,
            "tick": self.tick,
            "field": self.field,
            self.names[0]: self.first,
            self.names[1]: self.second,
        }


def format_value(value: Any) -> str:
    """A value as text that shows every bit of a float (``repr`` plus ``float.hex``)."""
    if isinstance(value, (float, np.floating)):
        return f"{float(value)!r} ({float(value).hex()})"
    if isinstance(value, np.ndarray):
        return "[" + ", ".join(format_value(v) for v in value.tolist()) + "]"
    return repr(value)


def _bits(value: Any) -> Any:
    """A comparison key that is equal exactly when the two values are bit-identical."""
    if isinstance(value, (float, np.floating)):
        return struct.pack("<d", float(value))
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_bits(v) for v in value)
    return value


def _entry(column_value: Sequence[Any] | None, index: int) -> Any:
    if column_value is None:
        return None
    return column_value[index] if index < len(column_value) else "<absent>"


def _events(
    episode: ComparedEpisode,
    executed_per_replan: int,
    skip: frozenset[str],
    trace_columns: Sequence[str] = TRACE_COLUMNS,
) -> Iterator[tuple[Any, ...]]:
    """(tick, field, value, kind) in time order; kind counts what was compared."""
    row = episode.row
    traces = [c for c in trace_columns if c not in skip]
    for j, c in enumerate(traces):
        yield 0, f"{c}[0]", row[c][0], "tick" if j == 0 else "value"
    replans = len(row["replan_logprob"]) if row.get("replan_logprob") is not None else 0
    n_trace = len(row[trace_columns[0]])
    for r in range(replans):
        first_tick = r * executed_per_replan + 1
        for c in REPLAN_COLUMNS:
            if c in skip:
                continue
            value = _entry(row.get(c), r)
            if c == "replan_frame_sha256":  # compared either way; counted only where frames exist
                yield first_tick, f"{c}[{r}]", value, "frame" if row.get(c) is not None else "absent"
            elif c == "replan_token_ids" and isinstance(value, (list, tuple)):
                yield first_tick, f"len({c}[{r}])", len(value), "value"
                for p, token in enumerate(value):
                    yield first_tick, f"{c}[{r}][{p}]", token, "token"
            else:
                yield first_tick, f"{c}[{r}]", value, "value"
        for i in range(executed_per_replan):
            tick = first_tick + i
            if episode.actions is not None and "action" not in skip:
                yield tick, f"action[replan {r}, index {i}]", episode.actions[r, i], "action"
            if tick < n_trace:
                for j, c in enumerate(traces):
                    yield tick, f"{c}[{tick}]", row[c][tick], "tick" if j == 0 else "value"
    for c, value in row.items():
        if c in skip or c in trace_columns or c in REPLAN_COLUMNS:
            continue
        yield None, c, value, "value"


def _describe_action_difference(a: np.ndarray, b: np.ndarray) -> tuple[str, str, str]:
    for d in range(a.shape[0]):
        if a[d].tobytes() != b[d].tobytes():
            return f"[{d}]", format_value(a[d]), format_value(b[d])
    return "", format_value(a), format_value(b)


def compare_episodes(
    first: ComparedEpisode,
    second: ComparedEpisode,
    *,
    executed_per_replan: int,
    skip: Sequence[str] = (),
    trace_columns: Sequence[str] = TRACE_COLUMNS,
) -> tuple[tuple[int | None, str, str, str] | None, ComparisonCounts]:
    """Walk both episodes in time order; return ``((tick, field, first, second), counts)`` of the first
    difference (``None`` when bit-identical) and how much was compared up to it (or in all).

    Actions are compared when both sides carry them; ``skip`` names columns (or ``"action"``) to leave
    out; ``trace_columns`` are the environment's per-tick columns (the boat's by default).
    """
    counts = ComparisonCounts(episodes=1)
    skipped = frozenset(skip)
    if first.actions is None or second.actions is None:
        skipped |= {"action"}  # e.g. anchor rows read from a table, which holds no actions
    sentinel = (None, "<episode ended>", "<absent>", "value")
    for ev_a, ev_b in zip_longest(
        _events(first, executed_per_replan, skipped, trace_columns),
        _events(second, executed_per_replan, skipped, trace_columns),
        fillvalue=sentinel,
    ):
        tick_a, field_a, value_a, kind = ev_a
        tick_b, field_b, value_b, _ = ev_b
        if field_a != field_b:
            tick = tick_a if tick_b is None else (tick_b if tick_a is None else min(tick_a, tick_b))
            counts.mismatched_episodes = 1
            return (tick, f"{field_a} vs {field_b}", format_value(value_a), format_value(value_b)), counts
        if _bits(value_a) != _bits(value_b):
            counts.mismatched_episodes = 1
            if kind == "action":
                dim, text_a, text_b = _describe_action_difference(value_a, value_b)
                return (tick_a, field_a + dim, text_a, text_b), counts
            return (tick_a, field_a, format_value(value_a), format_value(value_b)), counts
        if kind == "tick":
            counts.ticks += 1
        elif kind == "action":
            counts.actions += 1
        elif kind == "token":
            counts.token_ids += 1
        elif kind == "frame":
            counts.frames += 1
        elif kind == "absent":
            pass
        else:
            counts.values += 1
    return None, counts
