"""The rollout table: episode columns plus the cell, the sampling mode and per-replan policy diagnostics.

Why a fixed schema and sorted rows: anchors and probe cells are joined by (arm, seed), oracles compare
tables byte for byte, and an auditor's rerun must produce the same file. Rows are sorted by (seed, draw)
before writing, so the bytes never depend on which worker finished first; parquet is written with fixed
options and no pandas metadata.
"""

from __future__ import annotations

import io
import itertools
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from grpo_probe.atomic_io import atomic_path
from grpo_probe.envs.episode_table import EPISODE_SCHEMA, read_episode_table
from grpo_probe.envs.protocol import METRIC_COLUMNS
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.rollout.results import EpisodeResult
from grpo_probe.sampling import mode_params

__all__ = [
    "ANCHOR_CELL",
    "ROLLOUT_COLUMNS",
    "ROLLOUT_SCHEMA",
    "read_rollout_table",
    "result_row",
    "rollout_schema",
    "rollout_table",
    "table_bytes",
    "write_rollout_table",
]

ANCHOR_CELL = "anchor"
"""The ``cell`` value of anchor rows (the deterministic rerun each probe cell is joined against)."""

ROLLOUT_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("cell", pa.string(), nullable=False),
    pa.field("arm", pa.string(), nullable=False),
    pa.field("head", pa.string(), nullable=False),
    pa.field("mode", pa.string(), nullable=False),
    pa.field("temperature", pa.float64()),
    pa.field("sde_a", pa.float64()),
    pa.field("sampler_steps", pa.int32()),
    pa.field("draw", pa.int32(), nullable=False),
    pa.field("replan_logprob", pa.list_(pa.float64())),
    pa.field("replan_entropy_mean", pa.list_(pa.float64())),
    pa.field("replan_n_tokens", pa.list_(pa.int32())),
    pa.field("replan_token_ids", pa.list_(pa.list_(pa.int32()))),
    pa.field("replan_frame_sha256", pa.list_(pa.string())),
)
"""Columns a rollout row adds to the episode table's columns, in order."""


def rollout_schema(episode_schema: pa.Schema = EPISODE_SCHEMA) -> pa.Schema:
    """An environment's episode columns, then :data:`ROLLOUT_COLUMNS`: the rollout table of that env."""
    return pa.schema(list(episode_schema) + list(ROLLOUT_COLUMNS))


ROLLOUT_SCHEMA: pa.Schema = rollout_schema(EPISODE_SCHEMA)
"""The boat scene's rollout table (its episode table's columns are the boat's record)."""

_PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_statistics": False}
"""The episode table's writer options (``grpo_probe.envs.episode_table``), so both tables read alike."""


def _mean_or_none(values: np.ndarray | None) -> float | None:
    if values is None or len(values) == 0:
        return None
    return float(np.mean(np.asarray(values, dtype=np.float64)))


def result_row(result: EpisodeResult, *, cell: str, arm: str, mode: SamplingMode) -> dict[str, Any]:
    """The table row of one episode: its record, its labels and its per-replan diagnostics.

    AR columns (entropy, token counts, token ids) are null for a row whose policy returned no tokens,
    ``replan_frame_sha256`` (one digest per replan of the frames the policy saw, or under LeRobot's keys of
    every array it saw) for one that read no camera under packed keys;
    ``replan_logprob`` always has one entry per replan, null where the sampler defines no log-prob.
    """
    row = result.record.to_row()
    diagnostics = result.diagnostics
    has_tokens = any(d.token_ids is not None for d in diagnostics)
    row.update(
        cell=cell,
        arm=arm,
        head=result.head,
        mode=mode.kind,
        temperature=mode.temperature,
        sde_a=mode.sde_a,
        sampler_steps=mode_params(mode).get("steps"),  # null for a kind that takes no steps
        draw=result.spec.draw,
        replan_logprob=[None if d.logprob is None else float(d.logprob) for d in diagnostics],
        replan_entropy_mean=[_mean_or_none(d.entropy) for d in diagnostics] if has_tokens else None,
        replan_n_tokens=(
            [None if d.token_ids is None else len(d.token_ids) for d in diagnostics] if has_tokens else None
        ),
        replan_token_ids=(
            [None if d.token_ids is None else [int(t) for t in d.token_ids] for d in diagnostics]
            if has_tokens
            else None
        ),
        replan_frame_sha256=None if result.frame_sha256 is None else list(result.frame_sha256),
    )
    return row


def rollout_table(rows: Iterable[dict[str, Any]], schema: pa.Schema = ROLLOUT_SCHEMA) -> pa.Table:
    """Build the table with ``schema`` (the boat's by default), rows sorted by (seed, draw); duplicates
    are an error."""
    ordered = sorted(rows, key=lambda r: (r["seed"], r["draw"]))
    for prev, cur in itertools.pairwise(ordered):
        if (prev["seed"], prev["draw"]) == (cur["seed"], cur["draw"]):
            raise ValueError(f"rollout rows: (seed={cur['seed']}, draw={cur['draw']}) appears twice")
    return pa.Table.from_pylist(ordered, schema=schema)


def _check_rollout_schema(schema: pa.Schema, where: str) -> None:
    """Any environment's rollout table: the registered metrics first, the rollout columns last."""
    n = len(ROLLOUT_COLUMNS)
    tail = pa.schema(list(schema)[-n:]) if len(schema) >= n else None
    if tail is None or not tail.equals(pa.schema(list(ROLLOUT_COLUMNS))):
        raise ValueError(f"{where}: table schema does not end with the rollout columns")
    for field in METRIC_COLUMNS:
        if field.name not in schema.names:
            raise ValueError(f"{where}: missing column {field.name!r}")
        found = schema.field(field.name).type
        if not found.equals(field.type):
            raise ValueError(f"{where}: column {field.name!r} has type {found}, expected {field.type}")


def table_bytes(table: pa.Table) -> bytes:
    """The exact parquet bytes :func:`write_rollout_table` writes (hashed by oracles and manifests)."""
    sink = io.BytesIO()
    pq.write_table(table, sink, **_PARQUET_OPTIONS)
    return sink.getvalue()


def write_rollout_table(table: pa.Table, path: str | os.PathLike[str]) -> bytes:
    """Write the table atomically; returns the bytes written so callers can hash them without rereading."""
    _check_rollout_schema(table.schema, str(path))
    data = table_bytes(table)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return data


def read_rollout_table(
    path: str | os.PathLike[str], *, columns: Sequence[str] | None = None, schema: pa.Schema | None = None
) -> pa.Table:
    """Read a rollout table; a missing file, a truncated file or a mistyped column is an error naming it.

    ``schema``: the environment's rollout schema when known; without it, the file's own schema is
    checked for the registered metrics and the rollout columns (any environment's table reads).
    """
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: rollout table not found")
    if schema is None:
        try:
            found = pq.read_schema(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ValueError(f"{path}: not a readable parquet table ({exc})") from exc
        canonical = pa.schema([_canonical_field(f) for f in found])
        _check_rollout_schema(canonical, str(path))
        table = read_episode_table(path, canonical, columns)
        return table.cast(canonical if columns is None else pa.schema([canonical.field(c) for c in columns]))
    return read_episode_table(path, schema, columns)


def _canonical_type(kind: pa.DataType) -> pa.DataType:
    """Parquet names a list's child ``element``; written tables name it ``item`` (``pa.list_``), and the
    name is part of the bytes written, so a table read back is rebuilt with the writer's names."""
    if pa.types.is_list(kind):
        return pa.list_(_canonical_type(kind.value_type))
    return kind


def _canonical_field(field: pa.Field) -> pa.Field:
    return pa.field(field.name, _canonical_type(field.type), nullable=field.nullable)
