"""What a failed run leaves standing on the files it removed (grpo_probe.provenance.stale), on plain files.

The workflow's error handler hands it Snakemake's records; here the records are a dict, so every rule is
read in milliseconds (tests/faults/test_failed_forced_rerun.py runs the handler in Snakemake).
"""

from __future__ import annotations

from pathlib import Path

from grpo_probe.provenance.stale import remove_stale, stale_files

# A chain as the workflow's: a replay table -> the decision page -> compute.md -> the root page; a join
# table the decision also read; a figure folder.
BUILT_FROM = {
    "decision.md": ["prereg.yaml", "join.parquet", "replay.parquet"],
    "compute.md": ["decision.md"],
    "root.md": ["decision.json", "compute.md"],
    "decision.json": ["join.parquet", "replay.parquet"],
    "join.parquet": ["prereg.yaml"],
    "figures": ["decision.json"],
}


def _files(root: Path, names: list[str]) -> list[str]:
    for name in names:
        path = root / name
        if name == "figures":
            path.mkdir()
            (path / "a.png").write_bytes(b"png")
        else:
            path.write_text(name)
    return [str(root / name) for name in names]


def _recorded(root: Path):
    return lambda path: [str(root / i) for i in BUILT_FROM.get(Path(path).name, [])]


def test_everything_built_on_a_removed_file_is_stale_in_the_order_it_was_built(tmp_path: Path) -> None:
    candidates = _files(tmp_path, ["root.md", "compute.md", "decision.md", "decision.json", "join.parquet"])
    removed = [str(tmp_path / "replay.parquet")]
    stale = stale_files(removed, candidates, _recorded(tmp_path))
    name = {str(tmp_path / n): n for n in [*BUILT_FROM, "replay.parquet", "prereg.yaml"]}
    assert {name[k]: name[v] for k, v in stale.items()} == {
        "decision.md": "replay.parquet",
        "decision.json": "replay.parquet",
        "compute.md": "decision.md",
        "root.md": "decision.json",  # its first recorded input that is stale
    }
    order = list(stale)  # a file after the stale one it was built from
    assert all(order.index(cause) < order.index(path) for path, cause in stale.items() if cause in stale)


def test_nothing_is_stale_when_nothing_was_removed_or_nothing_records_its_inputs(tmp_path: Path) -> None:
    candidates = _files(tmp_path, ["decision.md", "compute.md"])
    assert stale_files([], candidates, _recorded(tmp_path)) == {}
    removed = [str(tmp_path / "replay.parquet")]
    assert stale_files(removed, candidates, lambda path: None) == {}  # no record: never called stale


def test_a_file_that_does_not_exist_is_not_listed_nor_what_was_built_from_it(tmp_path: Path) -> None:
    """Only files that exist are removed (the missing ones are what a rerun builds anyway), and a file
    missing that the run did not remove is not the run's doing: what was built from it stays."""
    candidates = _files(tmp_path, ["compute.md"])
    removed = [str(tmp_path / "replay.parquet")]
    listed = [*candidates, str(tmp_path / "decision.md")]  # decision.md does not exist
    assert stale_files(removed, listed, _recorded(tmp_path)) == {}
    removed.append(str(tmp_path / "decision.md"))
    assert list(stale_files(removed, listed, _recorded(tmp_path))) == [str(tmp_path / "compute.md")]


def test_removing_deletes_files_and_folders_and_says_which_and_why(tmp_path: Path) -> None:
    candidates = _files(tmp_path, ["decision.json", "figures", "join.parquet"])
    removed = [str(tmp_path / "replay.parquet")]
    stale = stale_files(removed, candidates, _recorded(tmp_path))
    lines = remove_stale(stale, removed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["join.parquet"]
    assert lines[1:] == [
        f"  removed {tmp_path / 'decision.json'} (built from {tmp_path / 'replay.parquet'}, which the failed "
        "run removed)",
        f"  removed {tmp_path / 'figures'} (built from {tmp_path / 'decision.json'}, removed here)",
    ]
    assert remove_stale({}, removed) == []
