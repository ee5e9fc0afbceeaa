"""One results folder per design: a second design with the same ``name:`` is refused, naming both files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grpo_probe.cli import main
from grpo_probe.prereg import PreregError
from grpo_probe.prereg.names import check_one_folder_per_design, designs_named
from grpo_probe.prereg.run_design import load_run_design

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def designs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding the smoke design and its lock, as prereg/ does; the working directory above it."""
    folder = tmp_path / "prereg"
    folder.mkdir()
    for name in ("smoke.yaml", "smoke.yaml.lock"):
        shutil.copy(REPO / "prereg" / name, folder / name)
    monkeypatch.chdir(tmp_path)
    return folder


def test_a_copied_design_is_refused_naming_the_original(designs: Path) -> None:
    shutil.copy(designs / "smoke.yaml", designs / "mine.yaml")
    assert designs_named("smoke", designs) == [designs / "mine.yaml", designs / "smoke.yaml"]
    with pytest.raises(PreregError, match=r"mine\.yaml: name 'smoke' is also the name of .*smoke\.yaml"):
        check_one_folder_per_design(designs / "mine.yaml", "results")
    with pytest.raises(PreregError, match=r"smoke\.yaml: name 'smoke' is also the name of .*mine\.yaml"):
        check_one_folder_per_design(designs / "smoke.yaml", "results")  # the original names the copy


def test_lock_refuses_the_copy_before_writing_a_lock(
    designs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(designs / "smoke.yaml", designs / "mine.yaml")
    assert main(["prereg", "lock", "prereg/mine.yaml"]) == 2
    assert "name 'smoke' is also the name of prereg/smoke.yaml" in capsys.readouterr().err
    assert not (designs / "mine.yaml.lock").exists()


def test_a_renamed_copy_is_its_own_design(designs: Path) -> None:
    text = (designs / "smoke.yaml").read_text().replace("name: smoke\n", "name: mine\n", 1)
    (designs / "mine.yaml").write_text(text)
    check_one_folder_per_design(designs / "mine.yaml", "results")
    check_one_folder_per_design(designs / "smoke.yaml", "results")


def test_results_made_by_another_design_file_are_not_overwritten(designs: Path, tmp_path: Path) -> None:
    """A design elsewhere (another folder) with a name whose results folder another file already made."""
    elsewhere = tmp_path / "lab"
    elsewhere.mkdir()
    shutil.copy(designs / "smoke.yaml", elsewhere / "smoke.yaml")
    root_manifest = tmp_path / "results/smoke/prereg/check.manifest.json"
    root_manifest.parent.mkdir(parents=True)
    root_manifest.write_text(json.dumps({"prereg_path": "prereg/smoke.yaml"}))
    check_one_folder_per_design(designs / "smoke.yaml", "results")  # its own results: fine
    with pytest.raises(PreregError, match=r"results/smoke/ holds the results of prereg/smoke\.yaml"):
        check_one_folder_per_design(elsewhere / "smoke.yaml", "results")


def test_a_copied_and_edited_design_reports_every_problem_at_once(designs: Path) -> None:
    """The copy's name clash, a field the schema refuses and the missing lock, in one message."""
    text = (designs / "smoke.yaml").read_text()
    edited = text.replace("  signal_bar_cm: 0.25", "  signal_bar_cm: abc", 1)
    assert edited != text
    (designs / "mine.yaml").write_text(edited)
    with pytest.raises(PreregError) as raised:
        load_run_design("prereg/mine.yaml", "results")
    lines = str(raised.value).splitlines()
    assert lines[0] == "prereg/mine.yaml: 3 problems, all to fix before anything runs:"
    assert "name 'smoke' is also the name of prereg/smoke.yaml" in lines[1]
    assert lines[2] == "  - prereg/mine.yaml: analysis.signal_bar_cm: 'abc' is not of type 'number'"
    assert lines[3].startswith("  - prereg/mine.yaml: not locked (no prereg/mine.yaml.lock)")


def test_the_run_design_is_the_locked_design(designs: Path) -> None:
    prereg = load_run_design("prereg/smoke.yaml", "results")
    assert prereg.name == "smoke" and prereg.lock_date is not None
    (designs / "smoke.yaml").write_text((designs / "smoke.yaml").read_text() + "\n# a comment\n")
    load_run_design("prereg/smoke.yaml", "results")  # comments are not the design: still its lock
