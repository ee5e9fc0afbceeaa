"""Compare a rerun's outputs with the sha256 and size its manifest recorded, and say where bytes differ.

Why more than the hash: "sha256 differs" tells an auditor that something changed, not what. When the
recorded bytes are still at hand (the file in the results tree still hashes to the manifest's sha256),
the first difference is located: for a parquet table the first column and row whose values differ (or
the schema or row count), for text the first differing line, otherwise the first differing byte.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_probe.parquet_io import read_parquet
from grpo_probe.provenance.manifest import file_sha256

__all__ = ["OutputComparison", "compare_output", "first_difference"]

_TEXT_SUFFIXES = {".json", ".md", ".txt", ".yaml", ".yml", ".tsv", ".csv", ".lock"}
_SHOWN = 80


@dataclass(frozen=True)
class OutputComparison:
    """One recorded output against its rerun; ``found_sha256`` is None when the rerun did not write it."""

    path: str
    expected_sha256: str
    expected_size: int | None
    found_sha256: str | None
    found_size: int | None
    detail: str | None = None

    @property
    def identical(self) -> bool:
        return self.found_sha256 == self.expected_sha256


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _same_value(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to NaN and recurses into lists (trace columns)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _parquet_difference(expected: Path, found: Path) -> str:
    try:
        old = read_parquet(expected)
        new = read_parquet(found)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... on unreadable bytes
        return f"not comparable as parquet tables ({type(exc).__name__}: {exc})"
    if old.schema != new.schema:
        old_fields = {f.name: str(f.type) for f in old.schema}
        new_fields = {f.name: str(f.type) for f in new.schema}
        changed = [
            name
            for name in dict.fromkeys([*old_fields, *new_fields])
            if old_fields.get(name) != new_fields.get(name)
        ]
        if not changed:
            return "schema metadata differs (same columns and types)"
        name = changed[0]
        return (
            f"schema differs at column {name!r}: expected {old_fields.get(name, 'absent')}, "
            f"found {new_fields.get(name, 'absent')}"
        )
    if old.num_rows != new.num_rows:
        return f"row count differs: expected {old.num_rows}, found {new.num_rows}"
    for name in old.column_names:
        old_values = old.column(name).to_pylist()
        new_values = new.column(name).to_pylist()
        for row, (a, b) in enumerate(zip(old_values, new_values, strict=True)):
            if not _same_value(a, b):
                return (
                    f"first difference: column {name!r}, row {row}: expected {_short(a)}, found {_short(b)}"
                )
    return "same schema and values; the files differ in encoding or metadata"


def _text_difference(old: bytes, new: bytes) -> str:
    old_lines = old.decode("utf-8", errors="replace").splitlines()
    new_lines = new.decode("utf-8", errors="replace").splitlines()
    for number, (a, b) in enumerate(zip(old_lines, new_lines, strict=False), start=1):
        if a != b:
            return f"first difference: line {number}: expected {_short(a)}, found {_short(b)}"
    if len(old_lines) != len(new_lines):
        return f"line count differs: expected {len(old_lines)}, found {len(new_lines)}"
    return "same lines; the files differ in line endings or a final newline"


def _byte_difference(old: bytes, new: bytes) -> str:
    for offset, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            return f"first difference at byte {offset}: expected 0x{a:02x}, found 0x{b:02x}"
    return f"one file is a prefix of the other (expected {len(old)} bytes, found {len(new)})"


def first_difference(expected: str | os.PathLike[str], found: str | os.PathLike[str]) -> str | None:
    """Where ``found`` first differs from ``expected``; None when their bytes are equal."""
    expected, found = Path(expected), Path(found)
    old, new = expected.read_bytes(), found.read_bytes()
    if old == new:
        return None
    if expected.suffix == ".parquet":
        return _parquet_difference(expected, found)
    if expected.suffix in _TEXT_SUFFIXES:
        return _text_difference(old, new)
    return _byte_difference(old, new)


def compare_output(
    entry: dict[str, Any], rerun_file: str | os.PathLike[str], recorded_file: str | os.PathLike[str] | None
) -> OutputComparison:
    """Compare a manifest ``entry`` (path, sha256, size) with the rerun's file.

    ``recorded_file`` is the file in the audited results tree; it is used to locate the difference only
    when it still holds the recorded bytes (its sha256 equals the manifest's).
    """
    rerun = Path(rerun_file)
    expected_sha, expected_size = entry["sha256"], entry.get("size")
    if not rerun.is_file():
        return OutputComparison(
            entry["path"], expected_sha, expected_size, None, None, "the rerun did not write this file"
        )
    found_sha, found_size = file_sha256(rerun), rerun.stat().st_size
    detail = None
    if found_sha != expected_sha:
        recorded = Path(recorded_file) if recorded_file is not None else None
        if recorded is not None and recorded.is_file() and file_sha256(recorded) == expected_sha:
            detail = first_difference(recorded, rerun)
        else:
            detail = "the recorded bytes are not at hand (the file in the results tree no longer matches)"
    return OutputComparison(entry["path"], expected_sha, expected_size, found_sha, found_size, detail)
