"""Every registered version rebuilt from the current file: the amendment record, the lock's history, and
the check that an amendment made after results says so."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml

from grpo_probe.cli import main
from grpo_probe.prereg import LockError, load_prereg, lock_path, lock_prereg, prereg_from_mapping
from grpo_probe.prereg.amendments import design_sha256, reconstruct, strip_annotations
from grpo_probe.prereg.canonical import canonical_sha256, read_yaml
from grpo_probe.prereg.lock import LOCK_FORMAT, build_lock, write_lock

REPO = Path(__file__).resolve().parents[2]
DATE = "2030-08-12T00:00:00Z"

ORIGINAL_RANK_BY = [
    {"read": "sampled_engagement_rate", "prefer": "max"},
    {"read": "median_group_std_progress_cm", "prefer": "max"},
]
"""rank_by as the registered designs were first locked, before amendment 1."""

VERSION_0 = {
    "grpo_signal_probe.yaml": "a71becfa2dbadd66b111d3e5adcf5996ee5a382dd3889e4611311abfc62bb9f3",
    "smoke.yaml": "79d013315a46a022158487b1985e10789fb77e5cf0a79a0892035cda412bb952",
}
"""The sha256 each registered design was first locked with (its lock file as of that version)."""

BAR_AMENDMENT = """  - date: "2030-08-13"
    reason: raise the signal bar after the pilot
    after_results: {after}
    replaces:
      analysis.signal_bar_cm: {{was: {was}}}
    fields: [analysis.signal_bar_cm]
"""


@pytest.fixture
def smoke(tmp_path: Path) -> Path:
    """A copy of the smoke design with a copy of its lock."""
    path = tmp_path / "smoke.yaml"
    shutil.copy(REPO / "prereg/smoke.yaml", path)
    shutil.copy(REPO / "prereg/smoke.yaml.lock", lock_path(path))
    return path


def _amend(path: Path, was: str = "0.25", after: str = "true") -> None:
    text = path.read_text().replace("signal_bar_cm: 0.25", "signal_bar_cm: 0.3")
    path.write_text(text.rstrip("\n") + "\n" + BAR_AMENDMENT.format(was=was, after=after))


def _manifest(folder: Path, prereg_sha256: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "shard-0.manifest.json"
    record = {"format": "grpo-probe-manifest/1", "rule": "probe", "prereg_sha256": prereg_sha256}
    path.write_text(json.dumps(record | {"outputs": [], "inputs": []}))
    return path


@pytest.mark.parametrize("name", sorted(VERSION_0))
def test_registered_designs_rebuild_every_version_to_its_locked_hash(name: str) -> None:
    prereg = load_prereg(REPO / "prereg" / name)
    assert [v.index for v in prereg.versions] == list(range(len(prereg.amendments) + 1))
    assert all(v.verified and v.problem is None for v in prereg.versions)
    original = prereg.versions[0]
    assert original.sha256 == VERSION_0[name]
    assert [(k.read, k.prefer) for k in original.decision_rule.rank_by] == [
        (k["read"], k["prefer"]) for k in ORIGINAL_RANK_BY
    ]
    assert prereg.versions[-1].decision_rule == prereg.decision_rule
    second = prereg.amendments[1]
    assert all(a.after_results is True for a in prereg.amendments)
    assert {c.path for c in second.replaces if c.added} == {f"arms.{arm}.anchor" for arm in prereg.arms}
    lock = json.loads(lock_path(prereg.path).read_text())
    assert lock["format"] == LOCK_FORMAT
    assert [v["sha256"] for v in lock["versions"]] == [v.sha256 for v in prereg.versions]


def test_an_amendment_that_changed_an_undeclared_section_is_shown_as_such() -> None:
    """The registered probe's first amendment also replaced the training budgets; its fields say only
    decision_rule, and fields never change, so the record carries the rest as undeclared."""
    prereg = load_prereg(REPO / "prereg/grpo_signal_probe.yaml")
    assert prereg.amendments[0].undeclared == ("training.arms", "training.demos")
    differs = ("analysis", "arms", "decision_rule", "phase2", "replay", "training")
    assert prereg.versions[0].differs_in == differs


def test_an_amendment_relocks_and_the_new_version_is_recorded(smoke: Path) -> None:
    before = load_prereg(smoke)
    _amend(smoke)
    outcome = lock_prereg(smoke, date=DATE)
    assert outcome.written
    prereg = load_prereg(smoke)
    assert len(prereg.versions) == len(before.versions) + 1
    assert all(v.verified for v in prereg.versions)
    assert prereg.versions[-2].sha256 == before.versions[-1].sha256
    assert prereg.versions[-2].analysis.signal_bar_cm == 0.25
    assert prereg.versions[-1].analysis.signal_bar_cm == 0.3
    assert prereg.versions[-1].date == DATE
    assert prereg.versions[-1].differs_in == () and prereg.versions[-2].differs_in == ("analysis",)


def test_a_replaces_that_does_not_give_back_the_locked_version_is_refused(smoke: Path) -> None:
    _amend(smoke, was="0.2")
    with pytest.raises(LockError, match=r"version 2 rebuilt from the amendments' replaces hashes to"):
        lock_prereg(smoke, date=DATE)


def test_a_new_amendment_must_record_after_results_and_replaces(smoke: Path) -> None:
    text = smoke.read_text().replace("signal_bar_cm: 0.25", "signal_bar_cm: 0.3")
    entry = '  - date: "2030-08-13"\n    reason: raise the bar\n    fields: [analysis.signal_bar_cm]\n'
    smoke.write_text(text.rstrip("\n") + "\n" + entry)
    new = len(read_yaml(smoke)["amendments"]) - 1
    with pytest.raises(
        LockError, match=rf"amendments\[{new}\]: a new amendment must record after_results and replaces"
    ):
        lock_prereg(smoke, date=DATE)


def test_a_replaced_field_outside_the_entry_fields_is_refused(smoke: Path) -> None:
    _amend(smoke)
    smoke.write_text(
        smoke.read_text().replace("fields: [analysis.signal_bar_cm]", "fields: [analysis.away_tail_cm]")
    )
    with pytest.raises(
        LockError, match=r"replaces\.analysis\.signal_bar_cm: not covered by the entry's fields"
    ):
        lock_prereg(smoke, date=DATE)


def test_a_replaces_that_changed_nothing_is_refused(smoke: Path) -> None:
    _amend(smoke)
    smoke.write_text(smoke.read_text().replace("signal_bar_cm: 0.3", "signal_bar_cm: 0.25", 1))
    with pytest.raises(LockError, match="the recorded previous value equals the current one"):
        lock_prereg(smoke, date=DATE)


def test_after_results_false_is_refused_when_results_of_an_earlier_version_exist(
    smoke: Path, tmp_path: Path, capsys
) -> None:
    locked = json.loads(lock_path(smoke).read_text())["sha256"]
    manifest = _manifest(tmp_path / "results" / "smoke" / "probe" / "c1", locked)
    _amend(smoke, after="false")
    assert main(["prereg", "lock", str(smoke), "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    new = len(read_yaml(smoke)["amendments"]) - 1
    assert f"amendments[{new}].after_results is false, but {manifest}" in err
    assert f"(version {new})" in err and "set after_results: true" in err
    assert main(["prereg", "lock", str(smoke), "--results", str(tmp_path / "elsewhere")]) == 0


def test_after_results_false_with_results_of_the_same_design_only_elsewhere_passes(
    smoke: Path, tmp_path: Path
) -> None:
    _manifest(tmp_path / "results" / "another_design", "0" * 64)
    _amend(smoke, after="false")
    assert main(["prereg", "lock", str(smoke), "--results", str(tmp_path / "results")]) == 0
    assert load_prereg(smoke).amendments[-1].after_results is False


def _without_annotations(path: Path) -> dict:
    raw = read_yaml(path)
    raw["amendments"] = [strip_annotations(e) for e in raw["amendments"]]
    return raw


def test_old_entries_may_gain_annotations_once_verified_against_earlier_locks(tmp_path: Path) -> None:
    """A design locked before entries recorded replaces: annotating them is allowed, and an earlier
    lock file of version 1 enters the history once the annotations rebuild it exactly."""
    plain = _without_annotations(REPO / "prereg/smoke.yaml")
    design = tmp_path / "smoke.yaml"
    design.write_text(yaml.safe_dump(plain, sort_keys=False))
    write_lock(lock_path(design), build_lock(plain, design.name, DATE))
    annotated = read_yaml(REPO / "prereg/smoke.yaml")
    old_dir = tmp_path / "version1"
    old_dir.mkdir()
    v1 = reconstruct(annotated, 1, "smoke.yaml")
    write_lock(old_dir / "smoke.yaml.lock", build_lock(v1, "smoke.yaml", "2026-11-29T18:09:44Z"))

    design.write_text(yaml.safe_dump(annotated, sort_keys=False))
    outcome = lock_prereg(design, date=DATE, earlier_locks=[old_dir / "smoke.yaml.lock"])
    assert "amendments[0]: annotated with after_results, replaces" in outcome.message
    versions = load_prereg(design).versions
    # version 1 from its earlier lock, the last from this lock; versions between have no recorded hash
    assert [v.verified for v in versions] == [False, True] + [False] * (len(versions) - 3) + [True]
    assert versions[1].sha256 == design_sha256(v1) and versions[1].date == "2026-11-29T18:09:44Z"
    assert versions[0].problem is None and versions[0].sha256 is None

    tampered = copy.deepcopy(annotated)
    tampered["amendments"][1]["replaces"]["arms.ar.anchor"] = {"was": {"kind": "greedy"}}
    design.write_text(yaml.safe_dump(tampered, sort_keys=False))
    with pytest.raises(LockError, match=r"amendments\[1\] differs from the locked entry"):
        lock_prereg(design, date=DATE)


def test_an_annotation_that_does_not_rebuild_the_recorded_version_is_refused(tmp_path: Path) -> None:
    plain = _without_annotations(REPO / "prereg/smoke.yaml")
    design = tmp_path / "smoke.yaml"
    design.write_text(yaml.safe_dump(plain, sort_keys=False))
    lock = build_lock(plain, design.name, DATE)
    lock["versions"][1] = {"version": 1, "sha256": "f" * 64, "date": "2026-11-29", "file_sha256": ["f" * 64]}
    write_lock(lock_path(design), lock)
    design.write_text((REPO / "prereg/smoke.yaml").read_text())
    with pytest.raises(
        LockError, match=r"version 1 rebuilt from the amendments' replaces hashes to .* recorded ffff"
    ):
        lock_prereg(design, date=DATE)


def test_a_lock_whose_history_the_file_does_not_rebuild_is_refused_on_load(smoke: Path) -> None:
    lock = json.loads(lock_path(smoke).read_text())
    lock["versions"][0]["sha256"] = "e" * 64
    lock_path(smoke).write_text(json.dumps(lock))
    with pytest.raises(LockError, match=rf"{smoke}: version 0 rebuilt .* recorded eeeeeeeeeeee"):
        load_prereg(smoke)


def test_a_format_1_lock_still_loads_knowing_only_its_own_version(tmp_path: Path) -> None:
    """Format 1 had no history and no annotation keys: its file hash is its version's hash."""
    raw = _without_annotations(REPO / "prereg/smoke.yaml")
    design = tmp_path / "smoke.yaml"
    design.write_text(yaml.safe_dump(raw, sort_keys=False))
    lock = build_lock(raw, design.name, DATE)
    old = {k: v for k, v in lock.items() if k != "versions"} | {"format": 1}
    lock_path(design).write_text(json.dumps(old))
    versions = load_prereg(design).versions
    earlier = len(versions) - 1
    assert [v.sha256 for v in versions] == [None] * earlier + [canonical_sha256(raw)]
    assert [v.verified for v in versions] == [False] * earlier + [True]
    assert versions[0].problem is not None  # no entry records replaces, so nothing before is rebuilt


def test_a_version_before_an_entry_without_replaces_is_listed_with_the_reason() -> None:
    raw = read_yaml(REPO / "prereg/smoke.yaml")
    del raw["amendments"][1]["replaces"]
    versions = prereg_from_mapping(raw, "prereg/edited.yaml").versions
    assert [v.index for v in versions] == list(range(len(raw["amendments"]) + 1))
    for version in versions[:2]:
        assert version.analysis is None
        assert "amendments[1]: records no `replaces`" in version.problem
    assert all(v.problem is None for v in versions[2:])


def test_an_added_field_is_removed_and_a_null_value_is_restored_when_rebuilding() -> None:
    raw = read_yaml(REPO / "prereg/smoke.yaml")
    raw["arms"]["ar"]["checkpoint_sha256"] = "a" * 64
    raw["amendments"].append(
        {
            "date": "2030-01-01",
            "reason": "pin the AR checkpoint and add a gate description",
            "after_results": False,
            "replaces": {
                "arms.ar.checkpoint_sha256": {"was": None},
                "compute_gate.note": {"absent": True},
            },
            "fields": ["arms.ar.checkpoint_sha256", "compute_gate.note"],
        }
    )
    raw["compute_gate"]["note"] = "added"
    before = reconstruct(raw, 2, "edited")
    assert before["arms"]["ar"]["checkpoint_sha256"] is None
    assert "note" not in before["compute_gate"]
    assert canonical_sha256(before["arms"]) == canonical_sha256(read_yaml(REPO / "prereg/smoke.yaml")["arms"])


def test_loading_a_design_parses_it_once_and_rebuilds_no_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job loads the design; only the jobs that report the registered versions rebuild them."""
    from grpo_probe.prereg import design, rule

    built: list[str] = []
    from_dict = rule.DecisionRule.from_dict.__func__
    monkeypatch.setattr(
        rule.DecisionRule,
        "from_dict",
        classmethod(lambda cls, *a, **k: (built.append("rule"), from_dict(cls, *a, **k))[1]),
    )
    prereg = design.load_prereg(REPO / "prereg" / "grpo_signal_probe.yaml")
    assert built == ["rule"]  # the design's own rule, once
    assert len(prereg.versions) == len(prereg.amendments) + 1 and len(built) > 1  # rebuilt when asked
    count = len(built)
    assert prereg.versions is prereg.versions and len(built) == count  # and only once
