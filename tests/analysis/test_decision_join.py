"""The decision reports the per-seed statistics the join table holds, and checks that table at the edge."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_probe.analysis.cells.joined import JOIN_SCHEMA, join_cell, joined_table, read_joined_table
from grpo_probe.analysis.cells.tables import read_anchor_table, read_probe_table
from grpo_probe.analysis.page.report import build_decision

from .versions_case import SEEDS, versioned_design, write_tables


def _joins(root: Path, prereg, probes, anchors) -> dict[str, Path]:
    """The join tables the join rule writes, one per cell."""
    out = {}
    for c in prereg.enabled_cells:
        probe = read_probe_table(probes[c.id], c.id, c.arm, c.head, 1)
        anchor = read_anchor_table(anchors[c.arm], c.arm, c.head)
        out[c.id] = root / f"join_{c.id}.parquet"
        pq.write_table(joined_table(join_cell(c.id, probe, anchor, prereg.analysis)), out[c.id])
    return out


def _build(out: Path, prereg, probes, anchors, joins=None) -> dict:
    return build_decision(
        probes,
        anchors,
        prereg,
        out / "decision.md",
        out / "decision.json",
        out / "figures",
        [(str(p), "0" * 64) for p in (*probes.values(), *anchors.values())],
        join_tables=joins,
    )


@pytest.fixture
def case(tmp_path: Path):
    prereg = versioned_design()
    probes, anchors = write_tables(tmp_path / "tables", short_strike_seeds=SEEDS[:2])
    return prereg, probes, anchors, _joins(tmp_path / "tables", prereg, probes, anchors)


def test_reading_the_join_gives_the_same_page_as_joining_in_memory(tmp_path: Path, case) -> None:
    prereg, probes, anchors, joins = case
    read = _build(tmp_path / "read", prereg, probes, anchors, joins)
    joined = _build(tmp_path / "memory", prereg, probes, anchors)
    assert (tmp_path / "read/decision.md").read_bytes() == (tmp_path / "memory/decision.md").read_bytes()
    for a, b in zip(read["cells"], joined["cells"], strict=True):
        assert a["join_table"] == str(joins[a["id"]]) and b["join_table"] is None
        assert {k: v for k, v in a.items() if k != "join_table"} == {
            k: v for k, v in b.items() if k != "join_table"
        }


def test_the_reported_per_seed_numbers_are_the_join_tables(tmp_path: Path, case) -> None:
    """Change one number in a join table: the page reports the changed number, so it is read, not
    recomputed from the cell table."""
    prereg, probes, anchors, joins = case
    table = pq.read_table(joins["c3_teacher_ode"])
    stds = table["std_progress_cm"].to_pylist()
    stds[0] = 9.0
    table = table.set_column(
        table.schema.get_field_index("std_progress_cm"), "std_progress_cm", pa.array(stds)
    )
    pq.write_table(table, joins["c3_teacher_ode"])
    decision = _build(tmp_path / "out", prereg, probes, anchors, joins)
    cell = next(c for c in decision["cells"] if c["id"] == "c3_teacher_ode")
    assert cell["seeds"][0]["std_progress_cm"] == 9.0
    assert (
        json.loads((tmp_path / "out/decision.json").read_text())["cells"][1]["seeds"][0]["std_progress_cm"]
        == 9.0
    )


def test_join_table_round_trips(case) -> None:
    prereg, probes, anchors, joins = case
    c = prereg.cell("c4_short_ode")
    probe = read_probe_table(probes[c.id], c.id, c.arm, c.head, 1)
    expected = join_cell(c.id, probe, read_anchor_table(anchors[c.arm], c.arm, c.head), prereg.analysis)
    found = read_joined_table(joins[c.id], c.id, c.arm, SEEDS)
    assert found.groups == expected.groups and found.joins == expected.joins
    assert found.path == str(joins[c.id])


def _rewrite(path: Path, table: pa.Table) -> None:
    pq.write_table(table, path)


def test_a_join_table_without_a_column_names_the_file_and_the_column(case) -> None:
    joins = case[3]
    path = joins["c1_ar_t1_0"]
    _rewrite(path, pq.read_table(path).drop_columns(["nondegenerate"]))
    with pytest.raises(ValueError, match=rf"{path}: column nondegenerate: missing"):
        read_joined_table(path, "c1_ar_t1_0", "ar")


def test_a_join_table_of_another_cell_is_refused(tmp_path: Path, case) -> None:
    prereg, probes, anchors, joins = case
    swapped = dict(joins, c1_ar_t1_0=joins["c3_teacher_ode"])
    with pytest.raises(ValueError, match=rf"{joins['c3_teacher_ode']}: column cell: must be 'c1_ar_t1_0'"):
        _build(tmp_path / "out", prereg, probes, anchors, swapped)


def test_a_join_table_of_other_seeds_is_refused(case) -> None:
    joins = case[3]
    path = joins["c3_teacher_ode"]
    _rewrite(path, pq.read_table(path).slice(1))
    with pytest.raises(ValueError, match=rf"{path}: column seed: joins seeds \[1001, .*holds \[1000, "):
        read_joined_table(path, "c3_teacher_ode", "flow_teacher", SEEDS)


def test_a_join_table_with_a_wrong_type_or_null_is_refused(case) -> None:
    joins = case[3]
    path = joins["c3_teacher_ode"]
    table = pq.read_table(path)
    as_text = table.set_column(
        table.schema.get_field_index("progress_delta_cm"),
        "progress_delta_cm",
        pa.array([str(v) for v in table["progress_delta_cm"].to_pylist()]),
    )
    _rewrite(path, as_text)
    with pytest.raises(
        ValueError, match=rf"{path}: column progress_delta_cm: has type string, expected double"
    ):
        read_joined_table(path, "c3_teacher_ode", "flow_teacher")
    nulls = table.set_column(
        table.schema.get_field_index("k"),
        pa.field("k", pa.int32()),
        pa.array([None] * table.num_rows, pa.int32()),
    )
    _rewrite(path, nulls)
    with pytest.raises(ValueError, match=rf"{path}: column k: is null at row 0"):
        read_joined_table(path, "c3_teacher_ode", "flow_teacher")


def test_a_join_whose_k_differs_from_the_cell_table_is_refused(tmp_path: Path, case) -> None:
    prereg, probes, anchors, joins = case
    path = joins["c1_ar_t1_0"]
    table = pq.read_table(path)
    k = table.schema.get_field_index("k")
    _rewrite(path, table.set_column(k, JOIN_SCHEMA.field("k"), pa.array([3] * table.num_rows, pa.int32())))
    with pytest.raises(
        ValueError, match=rf"{path}: column k: seed 1000 has k=3, but cell c1_ar_t1_0's table"
    ):
        _build(tmp_path / "out", prereg, probes, anchors, joins)


def test_join_tables_must_cover_the_enabled_cells(tmp_path: Path, case) -> None:
    prereg, probes, anchors, joins = case
    del joins["c4_short_ode"]
    with pytest.raises(ValueError, match=r"enabled cells without a join table \['c4_short_ode'\]"):
        _build(tmp_path / "out", prereg, probes, anchors, joins)
