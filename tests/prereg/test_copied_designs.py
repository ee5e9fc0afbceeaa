"""A design copied from another starts clean: ``prereg lock`` does not take the original's amendments or
its lock for the copy's history without being told to."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from grpo_probe.cli import main
from grpo_probe.prereg import LockError, load_prereg, lock_prereg
from grpo_probe.prereg.canonical import canonical_sha256, read_yaml
from grpo_probe.provenance.manifest import write_manifest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """prereg/mine.yaml: the smoke design (with its amendments) under a name of its own, unlocked."""
    (tmp_path / "prereg").mkdir()
    raw = read_yaml(REPO / "prereg/smoke.yaml") | {"name": "mine"}
    assert raw["amendments"], "the test needs a design with amendments to copy"
    path = tmp_path / "prereg/mine.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    return path


def _lock(*extra: str) -> int:
    return main(["prereg", "lock", *extra, "prereg/mine.yaml", "--results", "results"])


def test_a_copy_carrying_amendments_is_refused_with_both_ways_on(
    copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = len(read_yaml(copy)["amendments"])
    assert _lock() == 2
    err = capsys.readouterr().err
    assert f"prereg/mine.yaml: lists {n} amendments but has no lock of its own and no results" in err
    assert "`amendments: []`" in err and "--keep-amendments" in err
    assert not (copy.parent / "mine.yaml.lock").exists()


def test_a_copy_started_clean_locks_with_no_history(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = read_yaml(copy) | {"amendments": []}
    copy.write_text(yaml.safe_dump(raw, sort_keys=False))
    assert _lock() == 0
    assert "version 0 rebuilt and matching the lock" in capsys.readouterr().out
    assert len(load_prereg(copy).versions) == 1


def test_kept_amendments_are_reported_as_the_page_reports_them(
    copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = len(read_yaml(copy)["amendments"])
    assert _lock("--keep-amendments") == 0
    out = capsys.readouterr().out
    versions = load_prereg(copy).versions
    assert [v.verified for v in versions] == [False] * n + [True]
    assert all(v.sha256 is None and v.problem is None for v in versions[:n])  # the page's "recorded no hash"
    unverified = ", ".join(str(k) for k in range(n))
    assert f"versions {unverified} not verified: the lock recorded no hash" in out
    assert f"version {n} rebuilt and matching the lock" in out


def test_a_design_with_results_of_its_own_is_not_taken_for_a_copy(copy: Path) -> None:
    Path("results/mine/prereg").mkdir(parents=True)
    write_manifest(
        "results/mine/prereg/check.manifest.json",
        outputs=[copy],
        input_manifests=[],
        prereg_sha256=canonical_sha256(read_yaml(copy)),
        rule="prereg_check",
    )
    assert _lock() == 0


def test_a_lock_copied_with_its_design_is_refused_saying_to_lock_the_copy(copy: Path) -> None:
    shutil.copy(REPO / "prereg/smoke.yaml.lock", copy.parent / "mine.yaml.lock")
    with pytest.raises(
        LockError, match=r"locks 'smoke\.yaml', not 'mine\.yaml'.*delete prereg/mine\.yaml\.lock"
    ):
        lock_prereg("prereg/mine.yaml")


def test_a_renamed_design_keeps_its_lock(copy: Path) -> None:
    """The same design under a new file name: the lock of its old name is taken over, not refused."""
    shutil.copy(REPO / "prereg/smoke.yaml", copy)
    shutil.copy(REPO / "prereg/smoke.yaml.lock", copy.parent / "mine.yaml.lock")
    outcome = lock_prereg("prereg/mine.yaml")
    assert outcome.lock["file"] == "mine.yaml"
    assert outcome.lock["versions"] == read_yaml(REPO / "prereg/smoke.yaml.lock")["versions"]
