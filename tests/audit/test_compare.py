"""Locating where a rerun's bytes first differ from the recorded ones."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from grpo_probe.audit.compare import compare_output, first_difference
from grpo_probe.provenance import file_sha256


def _table(values: list[float], traces: list[list[float]] | None = None) -> pa.Table:
    traces = traces if traces is not None else [[0.0, v] for v in values]
    return pa.table({"seed": list(range(len(values))), "progress_cm": values, "trace": traces})


def _entry(path: Path) -> dict:
    return {"path": path.name, "sha256": file_sha256(path), "size": path.stat().st_size}


def test_parquet_difference_names_first_differing_column_and_row(tmp_path: Path) -> None:
    pq.write_table(_table([1.0, 2.0, 3.0]), tmp_path / "a.parquet")
    pq.write_table(_table([1.0, 2.5, 3.0]), tmp_path / "b.parquet")
    detail = first_difference(tmp_path / "a.parquet", tmp_path / "b.parquet")
    assert detail == "first difference: column 'progress_cm', row 1: expected 2.0, found 2.5"


def test_parquet_difference_looks_inside_list_columns(tmp_path: Path) -> None:
    pq.write_table(_table([1.0, 2.0], [[0.0, 1.0], [0.0, 2.0]]), tmp_path / "a.parquet")
    pq.write_table(_table([1.0, 2.0], [[0.0, 1.0], [0.0, 2.0, 3.0]]), tmp_path / "b.parquet")
    detail = first_difference(tmp_path / "a.parquet", tmp_path / "b.parquet")
    assert detail is not None and "column 'trace', row 1" in detail


def test_parquet_nan_equals_nan_so_only_real_changes_are_reported(tmp_path: Path) -> None:
    pq.write_table(_table([float("nan"), 2.0]), tmp_path / "a.parquet")
    pq.write_table(_table([float("nan"), 2.0]), tmp_path / "b.parquet", compression="none")
    detail = first_difference(tmp_path / "a.parquet", tmp_path / "b.parquet")
    assert detail == "same schema and values; the files differ in encoding or metadata"


def test_parquet_row_count_and_schema_changes_are_named(tmp_path: Path) -> None:
    pq.write_table(_table([1.0, 2.0]), tmp_path / "a.parquet")
    pq.write_table(_table([1.0]), tmp_path / "short.parquet")
    pq.write_table(_table([1.0, 2.0]).drop_columns(["trace"]), tmp_path / "narrow.parquet")
    assert first_difference(tmp_path / "a.parquet", tmp_path / "short.parquet") == (
        "row count differs: expected 2, found 1"
    )
    assert "schema differs at column 'trace'" in str(
        first_difference(tmp_path / "a.parquet", tmp_path / "narrow.parquet")
    )


def test_text_and_binary_differences_are_located(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{\n  "x": 1\n}\n')
    (tmp_path / "b.json").write_text('{\n  "x": 2\n}\n')
    (tmp_path / "a.pt").write_bytes(b"\x00\x01\x02")
    (tmp_path / "b.pt").write_bytes(b"\x00\x01\x03")
    assert first_difference(tmp_path / "a.json", tmp_path / "b.json") == (
        "first difference: line 2: expected '  \"x\": 1', found '  \"x\": 2'"
    )
    assert first_difference(tmp_path / "a.pt", tmp_path / "b.pt") == (
        "first difference at byte 2: expected 0x02, found 0x03"
    )
    assert first_difference(tmp_path / "a.pt", tmp_path / "a.pt") is None


def test_comparison_locates_a_difference_only_against_the_recorded_bytes(tmp_path: Path) -> None:
    """A tree file that no longer hashes as recorded is not what the manifest vouched for: no detail."""
    recorded, rerun = tmp_path / "recorded.json", tmp_path / "rerun.json"
    recorded.write_text("a\n")
    rerun.write_text("b\n")
    entry = _entry(recorded)
    located = compare_output(entry, rerun, recorded)
    assert not located.identical
    assert located.found_sha256 == file_sha256(rerun) and located.found_size == 2
    assert located.detail == "first difference: line 1: expected 'a', found 'b'"
    recorded.write_text("tampered\n")
    assert "not at hand" in str(compare_output(entry, rerun, recorded).detail)
    missing = compare_output(entry, tmp_path / "absent.json", recorded)
    assert missing.found_sha256 is None and not missing.identical
