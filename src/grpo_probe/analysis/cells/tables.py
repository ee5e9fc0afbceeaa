"""Probe and anchor rollout tables, read and checked before any statistic touches them.

Why: a statistic computed on a table with a missing column, a NaN metric, or a group of the wrong shape
is a wrong number in decision.md with nothing pointing at the cause. Every check here fails with a
ValueError naming the table's path and the column (and the seed, draw or cell where it applies). Rows
are sorted by (seed, draw), so the analysis does not depend on the order shards were concatenated in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from grpo_probe.envs.boat.spec import boat_spec
from grpo_probe.envs.protocol import EnvSpec, Guard
from grpo_probe.parquet_io import read_table_file

__all__ = [
    "ANCHOR_CELL",
    "REQUIRED_COLUMNS",
    "RolloutTable",
    "read_anchor_table",
    "read_probe_table",
    "read_rollout_table",
    "required_columns",
]

ANCHOR_CELL = "anchor"
"""The ``cell`` value of anchor rows."""

_FLOAT_METRICS = ("progress_final_cm", "best_point_cm")
_BOOL_METRICS = ("contact",)
_INT_METRICS = ("seed", "draw")
_STRINGS = ("cell", "arm", "head")
_AR_LISTS = ("replan_entropy_mean", "replan_n_tokens")

_BOAT = boat_spec()
"""The reference boat scene's spec: the layout a table is read with unless another is given."""


def required_columns(env: EnvSpec = _BOAT) -> tuple[str, ...]:
    """The rollout-table columns the analysis reads for ``env``: the registered metrics, the columns of
    its guards, its top-down view's traces and goal, and the AR lists."""
    view = env.view
    return tuple(
        dict.fromkeys(
            (
                *_STRINGS,
                *_INT_METRICS,
                *_FLOAT_METRICS,
                *_BOOL_METRICS,
                *(g.column for g in env.guards),
                *view.target_xy,
                *view.object_xy,
                *(view.effector_xy or ()),
                *_AR_LISTS,
            )
        )
    )


REQUIRED_COLUMNS: tuple[str, ...] = required_columns(_BOAT)
"""The rollout-table columns the analysis reads of the boat scene's tables."""


@dataclass(frozen=True)
class RolloutTable:
    """One rollout table's analysed columns, rows sorted by (seed, draw).

    ``columns`` holds the environment's scalar columns the analysis reads (its guards' columns and the
    goal position), ``traces`` its top-down view's per-tick columns; ``env`` says which they are.
    """

    path: str
    cell: str
    arm: str
    head: str
    seed: NDArray[np.int64]
    draw: NDArray[np.int64]
    progress_final_cm: NDArray[np.float64]
    best_point_cm: NDArray[np.float64]
    contact: NDArray[np.bool_]
    columns: dict[str, NDArray[Any]]
    traces: dict[str, list[NDArray[np.float64]]]
    replan_entropy_mean: list[NDArray[np.float64]] | None
    """Per row, the mean action-token entropy of each replan (AR tables only)."""
    replan_n_tokens: list[NDArray[np.int64]] | None
    """Per row, the tokens generated at each replan (AR tables only)."""
    env: EnvSpec = _BOAT

    @property
    def guards(self) -> tuple[Guard, ...]:
        """The environment's guard channels, in decision.md's order."""
        return self.env.guards

    @property
    def seeds(self) -> NDArray[np.int64]:
        """The distinct seeds, ascending."""
        return np.unique(self.seed)

    def rows_of(self, seed: int) -> NDArray[np.intp]:
        """Row indices of ``seed`` (its group, ordered by draw)."""
        return np.flatnonzero(self.seed == seed)


def _fail(path: str, msg: str) -> ValueError:
    return ValueError(f"{path}: {msg}")


def _where_row(table: pa.Table, i: int) -> str:
    return f"row {i} (seed={table['seed'][i].as_py()}, draw={table['draw'][i].as_py()})"


def _read(path: str | os.PathLike[str], env: EnvSpec) -> tuple[str, pa.Table]:
    name = str(path)
    table = read_table_file(path, "rollout table")
    required = required_columns(env)
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise _fail(
            name,
            f"missing column(s) {', '.join(missing)} "
            f"(environment {env.id!r} requires: {', '.join(required)})",
        )
    if table.num_rows == 0:
        raise _fail(name, "has no rows")
    return name, table.select(list(required))


def _no_nulls(name: str, table: pa.Table, columns: tuple[str, ...]) -> None:
    for col in columns:
        nulls = np.asarray(table[col].is_null().to_numpy(zero_copy_only=False), dtype=bool)
        if nulls.any():
            raise _fail(name, f"column {col} is null at {_where_row(table, int(np.flatnonzero(nulls)[0]))}")


def _check_identity(name: str, table: pa.Table, expected: dict[str, str | None]) -> dict[str, str]:
    """Every row belongs to one cell, arm and head: the expected one where given. Returns what was found."""
    _no_nulls(name, table, tuple(expected))
    identity = {}
    for column, value in expected.items():
        found = sorted(set(table[column].to_pylist()))
        if len(found) != 1 or (value is not None and found != [value]):
            want = f"{value!r}" if value is not None else "one value"
            raise _fail(name, f"column {column} must be {want} in every row, found {found}")
        identity[column] = found[0]
    return identity


def _float_column(name: str, table: pa.Table, column: str) -> NDArray[np.float64]:
    values = np.asarray(table[column].to_numpy(zero_copy_only=False), dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        raise _fail(
            name,
            f"column {column} is {values[bad][0]} at {_where_row(table, int(np.flatnonzero(bad)[0]))}; "
            "metrics must be finite",
        )
    return values


def _list_column(name: str, table: pa.Table, column: str, dtype: Any) -> list[NDArray[Any]]:
    out = []
    for i, value in enumerate(table[column].to_pylist()):
        arr = np.asarray(value, dtype=dtype)
        if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
            raise _fail(name, f"column {column} holds a non-finite value at {_where_row(table, i)}")
        out.append(arr)
    return out


def _scalar_column(name: str, table: pa.Table, column: str) -> NDArray[Any]:
    """A guard's or the goal's column as numpy: floats checked finite, booleans and integers as they are."""
    kind = table.schema.field(column).type
    if pa.types.is_floating(kind):
        return _float_column(name, table, column)
    if pa.types.is_boolean(kind):
        return np.asarray(table[column].to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_integer(kind):
        return np.asarray(table[column].to_numpy(), dtype=np.int64)
    raise _fail(name, f"column {column} has type {kind}; a guard reads a number or a boolean")


def _to_rollout_table(
    name: str, table: pa.Table, cell: str, arm: str, head: str, env: EnvSpec
) -> RolloutTable:
    table = table.sort_by([("seed", "ascending"), ("draw", "ascending")])
    nullable = _AR_LISTS if head != "ar" else ()
    required = required_columns(env)
    _no_nulls(name, table, tuple(c for c in required if c not in nullable))
    traces = (*env.view.object_xy, *(env.view.effector_xy or ()))
    scalars = tuple(dict.fromkeys((*(g.column for g in env.guards), *env.view.target_xy)))
    for col in traces + (_AR_LISTS if head == "ar" else ()):
        if pc.list_flatten(table[col]).null_count:
            raise _fail(name, f"column {col} holds a null element")
    seed = np.asarray(table["seed"].to_numpy(), dtype=np.int64)
    draw = np.asarray(table["draw"].to_numpy(), dtype=np.int64)
    if draw.min() < 0:
        raise _fail(name, f"column draw must be >= 0, found {int(draw.min())}")
    dup = np.flatnonzero((np.diff(seed) == 0) & (np.diff(draw) == 0))
    if dup.size:
        raise _fail(name, f"columns seed, draw: (seed={seed[dup[0]]}, draw={draw[dup[0]]}) appears twice")
    return RolloutTable(
        path=name,
        cell=cell,
        arm=arm,
        head=head,
        seed=seed,
        draw=draw,
        progress_final_cm=_float_column(name, table, "progress_final_cm"),
        best_point_cm=_float_column(name, table, "best_point_cm"),
        contact=np.asarray(table["contact"].to_numpy(zero_copy_only=False), dtype=bool),
        columns={col: _scalar_column(name, table, col) for col in scalars},
        traces={col: _list_column(name, table, col, np.float64) for col in traces},
        replan_entropy_mean=_list_column(name, table, "replan_entropy_mean", np.float64)
        if head == "ar"
        else None,
        replan_n_tokens=_list_column(name, table, "replan_n_tokens", np.int64) if head == "ar" else None,
        env=env,
    )


def read_rollout_table(
    path: str | os.PathLike[str],
    cell: str | None = None,
    arm: str | None = None,
    head: str | None = None,
    *,
    env: EnvSpec = _BOAT,
) -> RolloutTable:
    """Read any rollout table: one cell, arm and head throughout (the given ones where given), required
    columns present, metrics finite, (seed, draw) unique. AR lists are read when the head is ``ar``.
    ``env``: the spec of the environment the table was run in (the boat scene by default)."""
    name, table = _read(path, env)
    identity = _check_identity(name, table, {"cell": cell, "arm": arm, "head": head})
    return _to_rollout_table(name, table, identity["cell"], identity["arm"], identity["head"], env)


def read_probe_table(
    path: str | os.PathLike[str], cell: str, arm: str, head: str, ddof: int, *, env: EnvSpec = _BOAT
) -> RolloutTable:
    """Read a cell's probe table: every row of ``cell`` and ``arm``, the same K > ``ddof`` draws per seed."""
    out = read_rollout_table(path, cell, arm, head, env=env)
    name = out.path
    seeds, counts = np.unique(out.seed, return_counts=True)
    if (counts != counts[0]).any():
        odd = int(np.flatnonzero(counts != counts[0])[0])
        raise _fail(
            name,
            f"cell {cell}: column draw: seed {seeds[odd]} has {counts[odd]} draws but seed {seeds[0]} has "
            f"{counts[0]}; every group must hold the same K draws",
        )
    if counts[0] <= ddof:
        raise _fail(
            name,
            f"cell {cell}: column draw: groups of K={counts[0]} draws have no within-group std at "
            f"ddof={ddof} (need K > ddof)",
        )
    return out


def read_anchor_table(
    path: str | os.PathLike[str], arm: str, head: str, *, env: EnvSpec = _BOAT
) -> RolloutTable:
    """Read an arm's anchor table: cell ``"anchor"``, draw 0, one row per seed."""
    out = read_rollout_table(path, ANCHOR_CELL, arm, head, env=env)
    if (out.draw != 0).any():
        raise _fail(
            out.path, f"column draw must be 0 in anchor rows, found {sorted(set(out.draw.tolist()) - {0})}"
        )
    return out
