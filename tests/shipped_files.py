"""The registered files the repository ships under prereg/, found by what they are rather than by where they
lie or what they are called.

Why: prereg/ is sorted by purpose (prereg/README.md), and a file may move to another folder (recorded in
prereg/MOVED.yaml) or a new one may arrive under any name. A test that globbed one folder, or picked
designs by a name prefix, or pinned how many there are, would silently test fewer files after a move, or
fail for a reason that is not a fault. Each kind of file is told by its lock instead: a design's lock
records its file name (:mod:`grpo_probe.prereg.lock`), a study's and a calibration's lock name their
formats; sets of designs come from the files that name them (a study's members, a calibration's
candidates, the designs that extend a shared rule file).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.extends import EXTENDS
from grpo_probe.study.calibration import CALIBRATION_LOCK_FORMAT
from grpo_probe.study.design import LOCK_FORMAT as STUDY_LOCK_FORMAT

REPO = Path(__file__).resolve().parents[1]
PREREG = REPO / "prereg"


def _lock_of(path: Path) -> dict[str, Any] | None:
    lock = path.with_name(path.name + ".lock")
    return json.loads(lock.read_text(encoding="utf-8")) if lock.is_file() else None


def _locked(kind: str) -> list[Path]:
    found = []
    for path in sorted(PREREG.rglob("*.yaml")):
        lock = _lock_of(path)
        if lock is None:
            continue
        if (lock.get("file") == path.name) if kind == "design" else (lock.get("format") == kind):
            found.append(path)
    return found


def shipped_designs() -> list[Path]:
    """Every registered design under prereg/ (a YAML file whose lock records its name), sorted."""
    return _locked("design")


def study_files() -> list[Path]:
    """Every registered study under prereg/ (a YAML file locked as a study), sorted."""
    return _locked(STUDY_LOCK_FORMAT)


def calibration_files() -> list[Path]:
    """Every registered pilot calibration under prereg/ (a YAML file locked as a calibration), sorted."""
    return _locked(CALIBRATION_LOCK_FORMAT)


def rule_files() -> list[Path]:
    """Every shared rule file a shipped design extends, sorted (as found from the repository's root)."""
    named = {read_yaml(p)[EXTENDS] for p in shipped_designs() if EXTENDS in read_yaml(p)}
    return sorted(PREREG / name for name in named)


def named_designs(path: Path, field: str) -> list[Path]:
    """The designs a study (``field``: ``members``) or a calibration (``candidates``) names, in its order
    (their paths are relative to the repository's root)."""
    return [REPO / entry["design"] for entry in read_yaml(path)[field]]


def study_named(name: str) -> Path:
    """The one registered study whose ``name:`` is ``name``."""
    (path,) = [p for p in study_files() if read_yaml(p)["name"] == name]
    return path


def extending(rule: str) -> list[Path]:
    """The shipped designs that extend the shared file ``rule`` (``rules/signal_over_chaos_floor.yaml``)."""
    return [p for p in shipped_designs() if read_yaml(p).get(EXTENDS) == rule]
