"""Atomic writes: all or nothing, with the mode a plain open() would give."""

from __future__ import annotations

import os

import pytest

from grpo_probe.atomic_io import atomic_path, atomic_write_json, atomic_write_text


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path) -> None:
    dest = tmp_path / "table.parquet"
    dest.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(dest) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert dest.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.parquet"]


def test_a_written_file_gets_the_umask_mode(tmp_path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644


def test_json_is_written_strictly_and_the_same_value_gives_the_same_bytes(tmp_path) -> None:
    path = tmp_path / "report.json"
    atomic_write_json(path, {"b": [1.5, None], "a": "x"})
    assert path.read_text() == '{\n  "a": "x",\n  "b": [\n    1.5,\n    null\n  ]\n}\n'
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        atomic_write_json(path, {"a": float("nan")})
    assert path.read_text().startswith('{\n  "a": "x"')  # the refused write left the file as it was
