"""The episode table: one parquet row per episode, the schema every later stage reads.

Why parquet with an explicit pyarrow schema: pandas (``pd.read_parquet``) and DuckDB
(``SELECT * FROM 'episodes.parquet'``) read it directly, the column types never depend on what the first
row happened to hold (a null ``first_contact_tick`` stays int32), and the file bytes are a pure function
of the rows, so the determinism tests can compare sha256s. Traces are list columns (one list per row,
index 0 = spawn), which DuckDB unnests with ``UNNEST`` and pandas holds as arrays.

| column | type | meaning |
|--------|------|---------|
| seed | int64 | spawn seed |
| n_ticks | int32 | control ticks executed |
| d0_cm, d_final_cm | float64 | boat-to-disk distance at spawn / after the last tick |
| progress_final_cm | float64 | 100 (d0 - d_final) in m: movement toward the disk |
| best_point_cm | float64 | max over executed ticks of 100 (d0 - d_t) |
| distance_trace_cm | list<float64> | d_t, t = 0..n_ticks |
| boat_x_trace_m, boat_y_trace_m | list<float64> | boat centre per tick |
| pusher_x_trace_m, pusher_y_trace_m | list<float64> | pusher tip per tick |
| disk_x_m, disk_y_m | float64 | disk centre |
| contact | bool | any pusher-boat contact |
| first_contact_tick | int32, null | tick of the first contact |
| reset_strikes | int32 | safety-monitor strikes |
| ended_by_strike_cap | bool | the strike cap ended the episode |
| final_upright | bool | boat within the upright angle at the end |
| final_tilt_deg | float64 | boat up-axis angle from vertical at the end |
| final_z_mm | float64 | boat centre height above the table top at the end |
| knocked_off | bool | boat fell off the table |
| max_boat_speed_m_s | float64 | largest boat speed at a tick boundary |
| success | bool | boat centre within the disk radius at the end, on the table |
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from grpo_probe.atomic_io import atomic_path
from grpo_probe.envs.protocol import METRIC_COLUMNS
from grpo_probe.parquet_io import read_parquet

__all__ = [
    "EPISODE_SCHEMA",
    "EpisodeMetrics",
    "EpisodeRow",
    "canonical_row_bytes",
    "read_episode_table",
    "records_to_table",
    "write_episode_table",
]


class EpisodeRow(Protocol):
    """An episode's record, whatever the environment: it gives its table row as named columns."""

    def to_row(self) -> dict[str, Any]: ...


_F64_LIST = pa.list_(pa.float64())
_METRIC = {f.name: f for f in METRIC_COLUMNS}


@dataclass(frozen=True)
class EpisodeMetrics:
    """The leading columns of every environment's record: the spawn seed, the ticks, and the distance
    columns :func:`grpo_probe.envs.progress.progress_of` fills (:class:`grpo_probe.envs.progress.Progress`
    says what each means). A record subclasses it and adds its own columns after these.

    Why one declaration: the boat's record and the push record both start with these seven columns in
    this order, and a record's row (dict order) and canonical bytes are built from its fields.
    """

    seed: int
    n_ticks: int
    d0_cm: float
    d_final_cm: float
    progress_final_cm: float
    best_point_cm: float
    distance_trace_cm: tuple[float, ...]

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


EPISODE_SCHEMA = pa.schema(
    [
        *(_METRIC[f.name] for f in dataclasses.fields(EpisodeMetrics)),
        *(
            pa.field(name, _F64_LIST, nullable=False)
            for name in ("boat_x_trace_m", "boat_y_trace_m", "pusher_x_trace_m", "pusher_y_trace_m")
        ),
        pa.field("disk_x_m", pa.float64(), nullable=False),
        pa.field("disk_y_m", pa.float64(), nullable=False),
        _METRIC["contact"],
        _METRIC["first_contact_tick"],
        pa.field("reset_strikes", pa.int32(), nullable=False),
        pa.field("ended_by_strike_cap", pa.bool_(), nullable=False),
        pa.field("final_upright", pa.bool_(), nullable=False),
        pa.field("final_tilt_deg", pa.float64(), nullable=False),
        pa.field("final_z_mm", pa.float64(), nullable=False),
        pa.field("knocked_off", pa.bool_(), nullable=False),
        pa.field("max_boat_speed_m_s", pa.float64(), nullable=False),
        _METRIC["success"],
    ]
)
"""The boat's episode schema: the protocol's metric columns (:data:`grpo_probe.envs.protocol.METRIC_COLUMNS`,
with their types) in the boat's order, around its own traces and guard channels."""


def records_to_table(
    rows: Iterable[EpisodeRow | Mapping[str, Any]], schema: pa.Schema = EPISODE_SCHEMA
) -> pa.Table:
    """Rows (records or column mappings) -> a table with exactly ``schema``'s columns and types."""
    dicts = [dict(r) if isinstance(r, Mapping) else r.to_row() for r in rows]
    for i, row in enumerate(dicts):
        missing = [name for name in schema.names if name not in row]
        if missing:
            raise ValueError(f"row {i} lacks column(s) {', '.join(missing)}")
    columns = {name: [row[name] for row in dicts] for name in schema.names}
    return pa.Table.from_pydict(columns, schema=schema)


def write_episode_table(
    path: str | os.PathLike[str],
    rows: Iterable[EpisodeRow | Mapping[str, Any]] | pa.Table,
    schema: pa.Schema = EPISODE_SCHEMA,
) -> None:
    """Write rows as parquet, atomically; the bytes depend only on the rows and the schema."""
    table = rows if isinstance(rows, pa.Table) else records_to_table(rows, schema)
    if not table.schema.equals(schema):
        raise ValueError(f"{path}: table schema differs from the expected one")
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", write_statistics=False)


def read_episode_table(
    path: str | os.PathLike[str], schema: pa.Schema = EPISODE_SCHEMA, columns: Sequence[str] | None = None
) -> pa.Table:
    """Read and check a table: a truncated file or a missing/mistyped column is an error naming the file."""
    try:
        table = read_parquet(path, columns)
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"{path}: not a readable parquet table ({exc})") from exc
    wanted = schema if columns is None else pa.schema([schema.field(c) for c in columns])
    for field in wanted:
        if field.name not in table.schema.names:
            raise ValueError(f"{path}: missing column {field.name!r}")
        found = table.schema.field(field.name).type
        if not found.equals(field.type):
            raise ValueError(f"{path}: column {field.name!r} has type {found}, expected {field.type}")
    return table.select(wanted.names)


def canonical_row_bytes(row: dict[str, Any]) -> bytes:
    """An episode row's exact byte form: JSON with sorted keys and floats as ``float.hex`` (no rounding
    anywhere), so two records compare equal exactly when every value is bit-identical."""

    def encode(value: Any) -> Any:
        if isinstance(value, float):
            return value.hex()
        if isinstance(value, (list, tuple)):
            return [encode(v) for v in value]
        return value

    encoded = {k: encode(v) for k, v in row.items()}
    return json.dumps(encoded, sort_keys=True, separators=(",", ":")).encode("utf-8")
