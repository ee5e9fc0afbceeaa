"""Locks: a registered design changes only by an appended amendment, and a drifted one runs nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grpo_probe.cli import main
from grpo_probe.prereg import LockError, load_prereg, lock_path, lock_prereg
from grpo_probe.prereg.canonical import read_yaml

REPO = Path(__file__).resolve().parents[2]
DATE = "2026-08-12T00:00:00Z"
AMENDMENT = """  - date: "2030-08-13"
    reason: raise the signal bar after the pilot
    after_results: true
    replaces:
      analysis.signal_bar_cm: {was: 0.25}
    fields: [analysis.signal_bar_cm]
"""
"""A new entry, appended to the shipped design's amendments (its last section)."""


@pytest.fixture
def smoke(tmp_path: Path) -> Path:
    """A locked copy of the smoke design."""
    path = tmp_path / "smoke.yaml"
    shutil.copy(REPO / "prereg/smoke.yaml", path)
    lock_prereg(path, date=DATE)
    return path


def _amend(path: Path) -> int:
    """Append AMENDMENT to the design's amendments; returns how many entries it had before."""
    before = len(load_prereg(path, require_lock=False).amendments)
    text = path.read_text()
    assert text.rstrip().splitlines()[-1].startswith("    fields:"), "amendments must be the last section"
    path.write_text(text.rstrip("\n") + "\n" + AMENDMENT)
    return before


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_editing_a_registered_threshold_after_lock_is_refused_naming_prereg_and_lock(smoke: Path) -> None:
    _edit(smoke, "signal_bar_cm: 0.25", "signal_bar_cm: 0.3")
    with pytest.raises(LockError) as info:
        load_prereg(smoke)
    message = str(info.value)
    assert f"{smoke}: does not match its lock {lock_path(smoke)}" in message
    assert "changed sections: analysis." in message
    assert f"grpo-probe prereg lock {smoke}" in message and "amendments" in message


def test_check_command_refuses_a_drifted_prereg_before_any_work(smoke: Path, capsys) -> None:
    assert main(["prereg", "check", str(smoke)]) == 0
    _edit(smoke, "group_size: 2", "group_size: 3")
    assert main(["prereg", "check", str(smoke)]) == 2
    assert f"{smoke}: does not match its lock" in capsys.readouterr().err


def test_comments_and_layout_do_not_change_the_registered_hash(smoke: Path) -> None:
    before = load_prereg(smoke).sha256
    _edit(smoke, "group_size: 2", "# K, rollouts per group\ngroup_size:    2   # two")
    assert load_prereg(smoke).sha256 == before


def test_relock_of_a_change_without_amendment_is_refused(smoke: Path) -> None:
    _edit(smoke, "signal_bar_cm: 0.25", "signal_bar_cm: 0.3")
    with pytest.raises(LockError, match="changed sections analysis without a new amendment entry"):
        lock_prereg(smoke)
    assert read_yaml(lock_path(smoke))["date"] == DATE


def test_amendment_entry_and_relock_pass(smoke: Path, capsys) -> None:
    _edit(smoke, "signal_bar_cm: 0.25", "signal_bar_cm: 0.3")
    before = _amend(smoke)
    assert main(["prereg", "lock", str(smoke)]) == 0
    assert "re-locked" in capsys.readouterr().out
    prereg = load_prereg(smoke)
    assert prereg.analysis.signal_bar_cm == 0.3
    assert prereg.amendments[-1].fields == ("analysis.signal_bar_cm",)
    assert read_yaml(lock_path(smoke))["amendments"] == before + 1


def test_amendment_that_does_not_name_the_changed_section_is_refused(smoke: Path) -> None:
    _edit(smoke, "signal_bar_cm: 0.25", "signal_bar_cm: 0.3")
    _edit(smoke, "group_size: 2", "group_size: 3")
    _amend(smoke)
    with pytest.raises(LockError, match="changed sections group_size are not named in the new amendments"):
        lock_prereg(smoke)


def test_removing_an_old_amendment_is_refused(smoke: Path) -> None:
    _edit(smoke, "signal_bar_cm: 0.25", "signal_bar_cm: 0.3")
    before = _amend(smoke)
    lock_prereg(smoke)
    _edit(smoke, AMENDMENT, "")
    match = rf"amendments are append-only: the lock covers {before + 1}, the file has {before}"
    with pytest.raises(LockError, match=match):
        lock_prereg(smoke)


def test_rewriting_an_old_amendment_is_refused(smoke: Path) -> None:
    _edit(smoke, "signal_bar_cm: 0.25", "signal_bar_cm: 0.3")
    before = _amend(smoke)
    lock_prereg(smoke)
    _edit(smoke, "raise the signal bar after the pilot", "a different story")
    with pytest.raises(LockError, match=rf"amendments\[{before}\] differs from the locked entry"):
        lock_prereg(smoke)


def test_locking_an_unchanged_design_keeps_the_lock_bytes(smoke: Path) -> None:
    before = lock_path(smoke).read_bytes()
    outcome = lock_prereg(smoke, date="2030-01-01T00:00:00Z")
    assert not outcome.written
    assert lock_path(smoke).read_bytes() == before


def test_unlocked_prereg_is_refused_with_the_command_that_locks_it(tmp_path: Path) -> None:
    path = tmp_path / "smoke.yaml"
    shutil.copy(REPO / "prereg/smoke.yaml", path)
    with pytest.raises(LockError, match=rf"not locked \(no {lock_path(path)}\); run `grpo-probe prereg lock"):
        load_prereg(path)
    assert load_prereg(path, require_lock=False).lock_date is None


def test_invalid_design_cannot_be_locked(tmp_path: Path) -> None:
    path = tmp_path / "smoke.yaml"
    shutil.copy(REPO / "prereg/smoke.yaml", path)
    _edit(path, "group_size: 2", "group_size: 0")
    with pytest.raises(ValueError, match="group_size: 0 is less than the minimum of 1"):
        lock_prereg(path)
    assert not lock_path(path).exists()


def _pure_python_read(path: Path):
    """``read_yaml`` with PyYAML's pure-Python parser in place of libyaml's: the same strict loader."""
    import yaml

    from grpo_probe.prereg.canonical import strict_loader

    return yaml.load(path.read_text(encoding="utf-8"), Loader=strict_loader(yaml.SafeLoader))


@pytest.mark.parametrize(
    "path",
    sorted(REPO.glob("prereg/**/*.yaml")) + sorted(REPO.glob("src/grpo_probe/**/*.schema.yaml")),
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_libyaml_and_pure_python_parsers_read_the_same_design(path: Path) -> None:
    # A lock is the sha256 of the parsed design: it must not depend on which parser PyYAML was built with.
    from grpo_probe.prereg.canonical import SafeLoader, canonical_sha256

    assert SafeLoader.__name__ == "CSafeLoader"  # PyYAML's wheels bundle libyaml: the fast path is taken
    fast, pure = read_yaml(path), _pure_python_read(path)
    assert fast == pure and canonical_sha256(fast) == canonical_sha256(pure)
