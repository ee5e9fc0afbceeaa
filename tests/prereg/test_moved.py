"""A registered file that moved (prereg/MOVED.yaml) is found where it lies now by everything that recorded
its old path, and nothing registered is hashed again.

Why: prereg/ was sorted by purpose after results existed. A design moves byte for byte with its lock, so
its sha256 stands; what must keep working is what named the old path: a results folder's manifests
(``grpo-probe verify``, the one-folder-per-design check), an old command line, and the studies and
calibrations whose hashed content names their members by path.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grpo_probe.cli import main
from grpo_probe.prereg import load_prereg, lock_prereg
from grpo_probe.prereg.canonical import canonical_sha256, read_yaml
from grpo_probe.prereg.lock import read_lock
from grpo_probe.prereg.moved import MOVES_FILE, Moves, MovesError, read_moves, registered_members
from grpo_probe.prereg.names import folder_problems
from grpo_probe.provenance import BrokenLinkError, verify_chain, write_manifest
from grpo_probe.study.design import load_study, registered_sha256
from shipped_files import REPO, shipped_designs, study_named

OLD, NEW = "prereg/smoke.yaml", "prereg/designs/smoke/smoke.yaml"


# -- the index --------------------------------------------------------------------------------------------
def test_a_path_is_followed_through_every_move_and_back() -> None:
    moves = Moves({"prereg/a.yaml": "prereg/b/a.yaml", "prereg/b/a.yaml": "prereg/c/a.yaml"})
    assert moves.current("prereg/a.yaml") == moves.current("./prereg/a.yaml") == "prereg/c/a.yaml"
    assert moves.current("prereg/a.yaml.lock") == "prereg/c/a.yaml.lock"  # a lock goes with its design
    assert moves.registered("prereg/c/a.yaml") == moves.registered("prereg/b/a.yaml") == "prereg/a.yaml"
    assert moves.registered("prereg/c/a.yaml.lock") == "prereg/a.yaml.lock"
    # a file that never moved is returned as written, so a study naming it hashes as it always did
    assert (
        moves.current("./prereg/other.yaml")
        == moves.registered("./prereg/other.yaml")
        == "./prereg/other.yaml"
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("moved: {prereg/a.yaml: prereg/b.yaml, prereg/b.yaml: prereg/a.yaml}", "moves in a cycle"),
        ("moved: {prereg/a.yaml: prereg/c.yaml, prereg/b.yaml: prereg/c.yaml}", "both move to prereg/c.yaml"),
        ("moved: {/prereg/a.yaml: prereg/c.yaml}", "not a relative POSIX path"),
        ("moved: {prereg/a.yaml: prereg/a.yaml}", "moves to itself"),
        ("moved: {prereg/a.yaml.lock: prereg/c/a.yaml.lock}", "its lock moves with it"),
        ("moved: {./prereg/a.yaml: prereg/c/a.yaml}", "without ./ or .."),
        ("prereg/a.yaml: prereg/c/a.yaml", "one field, moved"),
    ],
)
def test_a_malformed_index_is_refused_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / MOVES_FILE).parent.mkdir()
    (tmp_path / MOVES_FILE).write_text(text + "\n")
    with pytest.raises(MovesError, match=problem) as info:
        read_moves(tmp_path)
    assert str(info.value).startswith(str(tmp_path / MOVES_FILE))


def test_no_index_is_no_move(tmp_path: Path) -> None:
    assert read_moves(tmp_path) == Moves()


def test_every_shipped_move_kept_the_file_its_lock_records_and_left_nothing_behind() -> None:
    """Each old path is gone, and its design lies at the last place with its lock, whose ``file`` is still
    the design's name: a move that renamed the file would break the lock, so it is a new registration."""
    moves = read_moves(REPO)
    assert moves.moved, "the index lists the moves of prereg/ by purpose"
    designs = set(shipped_designs())
    for old in moves.moved:
        new = REPO / moves.current(old)
        assert not (REPO / old).exists() and not (REPO / f"{old}.lock").exists(), old
        assert new in designs, f"{old} -> {new}: not a locked design"
        assert read_lock(f"{new}.lock")["file"] == Path(old).name == new.name


# -- what recorded the old path ---------------------------------------------------------------------------
@pytest.fixture
def moved_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The smoke design checked and chained under its old path (as the workflow chains a results folder),
    then moved with ``git mv``'s effect (bytes unchanged) and the move recorded in the index."""
    monkeypatch.chdir(tmp_path)
    Path("prereg").mkdir()
    shutil.copy(REPO / OLD, OLD)
    lock_prereg(OLD, date="2026-08-12T00:00:00Z")
    root = "results/smoke/prereg/check.manifest.json"
    assert main(["prereg", "check", OLD, "--manifest", root]) == 0
    Path("results/smoke/decision.md").write_text("# decision\n")
    write_manifest(
        "results/smoke/decision.manifest.json",
        ["results/smoke/decision.md"],
        [root],
        load_prereg(OLD).sha256,
        "decision",
    )
    Path(NEW).parent.mkdir(parents=True)
    for suffix in ("", ".lock"):
        Path(OLD + suffix).rename(NEW + suffix)
    MOVES_FILE.write_text(f"moved:\n  {OLD}: {NEW}\n")
    return tmp_path


def test_verify_finds_a_moved_design_where_it_lies_now(moved_run: Path, capsys) -> None:
    report = verify_chain("results/smoke/decision.manifest.json")
    assert report.prereg_path == OLD  # as the manifest recorded it
    assert report.artifacts == 3  # decision.md, the design and its lock at their new place
    assert main(["verify", "results/smoke/decision.manifest.json"]) == 0
    capsys.readouterr()
    MOVES_FILE.unlink()  # the move unrecorded: the old path is simply missing
    with pytest.raises(BrokenLinkError, match=rf"{OLD} .*: output is missing"):
        verify_chain("results/smoke/decision.manifest.json")


def test_verify_still_catches_a_moved_design_that_changed(moved_run: Path) -> None:
    text = Path(NEW).read_text()
    Path(NEW).write_text(text.replace("group_size: 2", "group_size: 3", 1))
    with pytest.raises(BrokenLinkError, match=rf"{OLD} .*: output changed"):
        verify_chain("results/smoke/decision.manifest.json")


def test_the_results_folder_of_a_moved_design_is_still_its_own(moved_run: Path) -> None:
    assert folder_problems(NEW, "results") == []
    MOVES_FILE.unlink()
    (problem,) = folder_problems(NEW, "results")
    assert f"results/smoke/ holds the results of {OLD}" in problem


def test_an_old_path_on_the_command_line_says_where_the_design_went(moved_run: Path, capsys) -> None:
    assert main(["prereg", "check", OLD]) == 2
    assert (
        f"{OLD}: no such design file; it moved to {NEW} ({MOVES_FILE.as_posix()})" in capsys.readouterr().err
    )


# -- studies and calibrations -----------------------------------------------------------------------------
def test_a_study_naming_its_moved_members_at_their_new_place_keeps_its_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shipped study names its members where they lie now; its lock was taken when they lay at the
    top of prereg/. Hashed with the registered paths it matches; hashed as written it would not."""
    monkeypatch.chdir(REPO)  # members are named relative to the workflow's folder
    path = study_named("calibrated_validation").relative_to(REPO)
    raw = read_yaml(path)
    moves = read_moves()
    assert all(moves.registered(m["design"]) != m["design"] for m in raw["members"]), "every member moved"
    locked = json.loads(Path(f"{path}.lock").read_text())["sha256"]
    assert registered_sha256(raw, "members") == locked == load_study(path).sha256
    assert canonical_sha256(raw) != locked
    assert canonical_sha256(registered_members(raw, "members", moves)) == locked


def test_a_copy_of_a_moved_study_without_the_index_is_refused_by_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index is part of what the study's hash reads: without it the members' new paths are new
    content, and the lock says so rather than passing a study it cannot place."""
    monkeypatch.chdir(REPO)
    study = study_named("validation_smoke").relative_to(REPO)
    members = [m["design"] for m in read_yaml(study)["members"]]
    for name in [study.as_posix(), f"{study}.lock", *members, *(f"{m}.lock" for m in members)]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(name, tmp_path / name)
    shutil.copytree("prereg/rules", tmp_path / "prereg/rules")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="differs from the one locked"):
        load_study(study)
    shutil.copy(REPO / MOVES_FILE, MOVES_FILE)
    assert load_study(study).sha256 == json.loads(Path(f"{study}.lock").read_text())["sha256"]
