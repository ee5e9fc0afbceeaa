"""Atomic writes: all or nothing, with the mode a plain open() would give."""

from __future__ import annotations

import os

import pytest

from grpo_probe.atomic_io import atomic_path, atomic_write_text


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
