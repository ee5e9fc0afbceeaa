"""prereg/README.md indexes every registered file by purpose; the layout it describes holds.

Why a test: an index that no test reads drifts from the files within a few designs, and a layout by purpose
is only worth having while each file is where its purpose puts it. Every set here comes from the files
themselves (locks, studies' members, calibrations' candidates), not from counts or names.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.moved import MOVES_FILE
from shipped_files import (
    PREREG,
    REPO,
    calibration_files,
    named_designs,
    rule_files,
    shipped_designs,
    study_files,
)

INDEX = PREREG / "README.md"
SECTIONS = {
    "Designs": "design",
    "Studies": "study",
    "Calibrations": "calibration",
    "Shared rules": "rule",
    "The index of moves": "moves",
}
"""The index's headings of files, and the kind of file each lists."""


def _entries() -> dict[str, tuple[str, str]]:
    """Listed path (relative to prereg/) -> (the kind its heading lists, the text of its bullet)."""
    entries: dict[str, tuple[str, str]] = {}
    kind, path = None, None
    for line in INDEX.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            kind, path = SECTIONS.get(line[3:].strip()), None
            continue
        bullet = re.match(r"- `([^`]+)`", line)
        if kind is not None and bullet:
            path = bullet.group(1)
            assert path not in entries, f"{INDEX}: {path} is listed twice"
            entries[path] = (kind, line)
        elif path is not None and line.startswith("  "):
            entries[path] = (entries[path][0], entries[path][1] + " " + line.strip())
        else:
            path = None
    return entries


def _registry_files() -> set[str]:
    """Every file under prereg/ a clone holds (tracked or not ignored), but locks and the index itself."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "prereg"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    files = {Path(name).relative_to("prereg").as_posix() for name in listed if (REPO / name).is_file()}
    return {f for f in files if not f.endswith(".lock") and f != INDEX.name}


def _rel(path: Path) -> str:
    return path.relative_to(PREREG).as_posix()


def _kinds() -> dict[str, str]:
    kinds = {_rel(p): "design" for p in shipped_designs()}
    kinds |= {_rel(p): "study" for p in study_files()}
    kinds |= {_rel(p): "calibration" for p in calibration_files()}
    kinds |= {_rel(p): "rule" for p in rule_files()}
    return kinds | {MOVES_FILE.relative_to("prereg").as_posix(): "moves"}


def _naming() -> dict[str, set[str]]:
    """Design (relative to prereg/) -> the studies and calibrations that name it."""
    naming: dict[str, set[str]] = {}
    for files, field in ((study_files(), "members"), (calibration_files(), "candidates")):
        for path in files:
            for design in named_designs(path, field):
                naming.setdefault(_rel(design), set()).add(_rel(path))
    return naming


def test_the_index_lists_every_file_of_the_registry_and_nothing_else() -> None:
    listed, present = set(_entries()), _registry_files()
    assert not present - listed, f"not in {INDEX}: {sorted(present - listed)}"
    assert not listed - present, f"listed in {INDEX} but absent: {sorted(listed - present)}"


def test_each_file_is_listed_under_the_heading_of_its_kind() -> None:
    kinds = _kinds()
    assert set(kinds) == _registry_files(), "every file of the registry is a design, study, calibration, rule"
    wrong = {path: (kind, kinds[path]) for path, (kind, _) in _entries().items() if kinds[path] != kind}
    assert not wrong, f"listed under the wrong heading (heading's kind, file's kind): {wrong}"


def test_a_design_s_line_names_exactly_the_studies_and_calibrations_that_name_it() -> None:
    entries, naming = _entries(), _naming()
    others = {_rel(p) for p in (*study_files(), *calibration_files())}
    for path, (kind, text) in entries.items():
        if kind != "design":
            continue
        named_on_line = {name for name in re.findall(r"`([^`]+)`", text) if name in others}
        assert named_on_line == naming.get(path, set()), f"{INDEX}: {path}"


def test_the_default_design_is_the_config_s() -> None:
    (default,) = re.findall(r"The \*\*default\*\* design is `([^`]+)`", INDEX.read_text(encoding="utf-8"))
    assert read_yaml(REPO / "config/config.yaml")["prereg"] == f"prereg/{default}"


def test_a_design_lies_beside_the_one_file_that_names_it() -> None:
    """A design that one study names lies in that study's folder, and a study's folder holds its members
    alone; a calibration's candidates lie under calibrations/, and only they; a design that several
    studies share lies in designs/."""
    naming = _naming()
    for design in shipped_designs():
        path, names = _rel(design), naming.get(_rel(design), set())
        studies = {n for n in names if n.startswith("studies/")}
        calibrations = names - studies
        if path.startswith("studies/"):
            assert studies == {f"{design.parent.relative_to(PREREG).as_posix()}.yaml"}, path
        elif path.startswith("calibrations/"):
            assert calibrations and not studies, path
        elif len(studies) == 1 and not calibrations:
            pytest.fail(f"{path}: the one study that names it ({studies.pop()}) has a folder for it")
        assert not calibrations or path.startswith("calibrations/"), path
