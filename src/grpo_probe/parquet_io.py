"""Reading one parquet file: the table as written, without pyarrow's dataset layer.

Why: ``pyarrow.parquet.read_table`` opens even a single file through ``pyarrow.dataset``, which imports
pandas: about half a CPU-second in every job that reads a table, for readers that only ever open one
file. ``ParquetFile.read`` reads the same table (schema, metadata, rows) from the file itself.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["read_parquet", "read_table_file"]


def read_parquet(path: str | os.PathLike[str], columns: Sequence[str] | None = None) -> pa.Table:
    """The table in the parquet file ``path`` (only ``columns``, when given; a name the file lacks is
    left out, for the caller's schema check to name). Unreadable bytes raise ``pyarrow.ArrowInvalid``."""
    with pq.ParquetFile(path) as file:
        return file.read(columns=list(columns) if columns is not None else None)


def read_table_file(
    path: str | os.PathLike[str], what: str, columns: Sequence[str] | None = None
) -> pa.Table:
    """:func:`read_parquet` for a reader that checks what it reads: a missing file is a
    ``FileNotFoundError`` ``<path>: <what> not found`` (``what``: ``rollout table``, ``join table``), and
    bytes that are not parquet a ``ValueError`` ``<path>: not a readable parquet table (<why>)``; the
    caller then names the columns it needs."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: {what} not found")
    try:
        return read_parquet(path, columns)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"{path}: not a readable parquet table ({exc})") from exc
