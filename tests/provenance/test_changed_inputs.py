"""A job refuses an input whose bytes differ from what the manifest of the job that wrote it recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.provenance.inputs import ChangedInputError, refuse_changed_inputs, vouched_inputs
from grpo_probe.provenance.manifest import write_manifest

SHA = "0" * 64


@pytest.fixture
def chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Two jobs: ``anchors`` writes a.parquet; ``join`` reads it and writes b.parquet, listing the
    anchors' manifest as its input."""
    monkeypatch.chdir(tmp_path)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    a.write_bytes(b"anchors table")
    write_manifest(tmp_path / "a.manifest.json", [a], [], SHA, "anchors")
    b.write_bytes(b"joined table")
    write_manifest(tmp_path / "b.manifest.json", [b], [tmp_path / "a.manifest.json"], SHA, "join")
    return {
        "a": a,
        "b": b,
        "a_manifest": tmp_path / "a.manifest.json",
        "b_manifest": tmp_path / "b.manifest.json",
    }


def test_unchanged_inputs_pass_and_are_counted(chain: dict[str, Path]) -> None:
    assert refuse_changed_inputs([chain["b"], chain["b_manifest"]]) == 1


def test_a_table_vouched_for_further_up_the_chain_is_checked(chain: dict[str, Path]) -> None:
    """The reading job declares only the join's manifest; the anchors' hash is reached through it."""
    assert set(vouched_inputs([chain["b_manifest"]])) == {"a.parquet", "b.parquet"}
    assert refuse_changed_inputs([chain["a"], chain["b"], chain["b_manifest"]]) == 2


@pytest.mark.parametrize("table", ["a", "b"])
def test_a_flipped_byte_is_refused_naming_the_file_and_the_manifest(
    chain: dict[str, Path], table: str
) -> None:
    data = bytearray(chain[table].read_bytes())
    data[3] ^= 0x01
    chain[table].write_bytes(bytes(data))
    with pytest.raises(ChangedInputError, match=rf"{table}\.parquet: its bytes changed") as info:
        refuse_changed_inputs([chain["a"], chain["b"], chain["b_manifest"]])
    assert f"{table}.manifest.json recorded" in str(info.value)


def test_inputs_no_manifest_vouches_for_are_not_checked(chain: dict[str, Path], tmp_path: Path) -> None:
    design = tmp_path / "design.yaml"
    design.write_text("name: x\n")
    assert refuse_changed_inputs([design, chain["b"]]) == 0  # no manifest among the inputs
