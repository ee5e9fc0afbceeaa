"""The join table: one row per seed, the seed's group statistics next to its anchor row.

Why one table between the rollouts and the decision: the per-seed numbers decision.md reports (the
within-group std of the reward, whether the group is non-degenerate, the sampled mean progress, its
difference from the anchor, engagement) are computed once, by the ``join`` rule, and written here; the
decision step reads them back instead of recomputing them, so the number an auditor finds in
``join/<cell>.parquet`` is the number the page shows. The table is checked when read (every column
present with its type, one cell and arm throughout, one row per seed, finite numbers), and every error
names the file and the column.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from grpo_probe.analysis.cells.anchor_join import SeedJoin, check_seeds_match, join_seeds
from grpo_probe.analysis.cells.group_stats import SeedGroup, seed_groups
from grpo_probe.analysis.cells.tables import RolloutTable
from grpo_probe.parquet_io import read_table_file
from grpo_probe.prereg import AnalysisNumbers

__all__ = ["JOIN_SCHEMA", "JoinedCell", "join_cell", "joined_table", "read_joined_table"]

T = TypeVar("T")

JOIN_SCHEMA = pa.schema(
    [
        ("cell", pa.string()),
        ("arm", pa.string()),
        ("seed", pa.int64()),
        ("k", pa.int32()),
        ("std_progress_cm", pa.float64()),
        ("std_best_point_cm", pa.float64()),
        ("nondegenerate", pa.bool_()),
        ("sampled_mean_progress_cm", pa.float64()),
        ("anchor_progress_cm", pa.float64()),
        ("progress_delta_cm", pa.float64()),
        ("sampled_engagement_rate", pa.float64()),
        ("anchor_engaged", pa.bool_()),
    ]
)
"""Columns of ``join/<cell>.parquet``, in order."""


@dataclass(frozen=True)
class JoinedCell:
    """One cell's join: per seed (ascending) its group statistics and its comparison with the anchor."""

    path: str | None
    """The join table it was read from (None when joined in memory)."""
    cell: str
    arm: str
    groups: tuple[SeedGroup, ...]
    joins: tuple[SeedJoin, ...]

    @property
    def seeds(self) -> tuple[int, ...]:
        """The joined seeds, ascending."""
        return tuple(g.seed for g in self.groups)


def join_cell(cell: str, probe: RolloutTable, anchor: RolloutTable, analysis: AnalysisNumbers) -> JoinedCell:
    """Group statistics (:func:`seed_groups`) and the anchor join (:func:`join_seeds`) of one cell."""
    check_seeds_match(probe, anchor, cell)
    return JoinedCell(
        None, cell, probe.arm, tuple(seed_groups(probe, analysis)), tuple(join_seeds(probe, anchor))
    )


def joined_table(joined: JoinedCell) -> pa.Table:
    """The join as a table with :data:`JOIN_SCHEMA`, one row per seed."""
    rows = [
        {
            "cell": joined.cell,
            "arm": joined.arm,
            "seed": g.seed,
            "k": g.k,
            "std_progress_cm": g.std_progress_cm,
            "std_best_point_cm": g.std_best_point_cm,
            "nondegenerate": g.nondegenerate,
            "sampled_mean_progress_cm": j.sampled_mean_progress_cm,
            "anchor_progress_cm": j.anchor_progress_cm,
            "progress_delta_cm": j.progress_delta_cm,
            "sampled_engagement_rate": j.sampled_engagement_rate,
            "anchor_engaged": j.anchor_engaged,
        }
        for g, j in zip(joined.groups, joined.joins, strict=True)
    ]
    return pa.Table.from_pylist(rows, schema=JOIN_SCHEMA)


def _fail(path: str, column: str, msg: str) -> ValueError:
    return ValueError(f"{path}: column {column}: {msg}")


def _column(path: str, table: pa.Table, name: str) -> np.ndarray:
    field = JOIN_SCHEMA.field(name)
    if name not in table.column_names:
        raise _fail(path, name, f"missing (a join table has {', '.join(JOIN_SCHEMA.names)})")
    found = table.schema.field(name).type
    if found != field.type:
        raise _fail(path, name, f"has type {found}, expected {field.type}")
    column = table[name]
    if column.null_count:
        first = int(np.flatnonzero(np.asarray(column.is_null()))[0])
        raise _fail(path, name, f"is null at row {first}")
    values = np.asarray(column.to_numpy(zero_copy_only=False))
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        first = int(np.flatnonzero(~np.isfinite(values))[0])
        raise _fail(path, name, f"is {values[first]} at row {first}; the join's numbers must be finite")
    return values


def _one_value(path: str, values: np.ndarray, name: str, expected: str) -> None:
    found = sorted(set(values.tolist()))
    if found != [expected]:
        raise _fail(path, name, f"must be {expected!r} in every row, found {found}")


def _per_seed(
    record: Callable[..., T],
    seed: NDArray[np.int64],
    columns: Mapping[str, NDArray[Any]],
    fields: Mapping[str, tuple[str, Callable[[Any], Any]]],
) -> tuple[T, ...]:
    """One ``record`` per row, seeds ascending: ``seed=`` the row's seed and each field of ``fields`` read
    from its column as its Python type (``field: (column, type)``)."""
    return tuple(
        record(seed=int(s), **{field: cast(columns[column][i]) for field, (column, cast) in fields.items()})
        for i, s in enumerate(seed)
    )


def read_joined_table(
    path: str | os.PathLike[str], cell: str, arm: str, seeds: Sequence[int] | None = None
) -> JoinedCell:
    """Read ``join/<cell>.parquet`` for ``cell`` of ``arm``; with ``seeds``, it must hold exactly those.

    Raises ``ValueError`` (``FileNotFoundError`` when absent) naming the file and the offending column.
    """
    name = str(path)
    table = read_table_file(path, "join table")
    if table.num_rows == 0:
        raise ValueError(f"{name}: the join table has no rows")
    columns = {c: _column(name, table, c) for c in JOIN_SCHEMA.names}
    _one_value(name, columns["cell"], "cell", cell)
    _one_value(name, columns["arm"], "arm", arm)
    order = np.argsort(columns["seed"], kind="stable")
    columns = {c: v[order] for c, v in columns.items()}
    seed = columns["seed"].astype(np.int64)
    repeated = np.flatnonzero(np.diff(seed) == 0)
    if repeated.size:
        raise _fail(name, "seed", f"seed {seed[repeated[0]]} appears twice; the join has one row per seed")
    expected = None if seeds is None else sorted(int(s) for s in seeds)
    if expected is not None and expected != seed.tolist():
        raise _fail(name, "seed", f"joins seeds {seed.tolist()}, but cell {cell}'s table holds {expected}")
    groups = _per_seed(
        SeedGroup,
        seed,
        columns,
        {
            "k": ("k", int),
            "std_progress_cm": ("std_progress_cm", float),
            "std_best_point_cm": ("std_best_point_cm", float),
            "mean_progress_cm": ("sampled_mean_progress_cm", float),
            "nondegenerate": ("nondegenerate", bool),
        },
    )
    joins = _per_seed(
        SeedJoin,
        seed,
        columns,
        {
            name: (name, float)
            for name in (
                "sampled_mean_progress_cm",
                "anchor_progress_cm",
                "progress_delta_cm",
                "sampled_engagement_rate",
            )
        }
        | {"anchor_engaged": ("anchor_engaged", bool)},
    )
    return JoinedCell(name, cell, arm, groups, joins)
