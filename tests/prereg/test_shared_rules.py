"""Designs that extend a shared rule file: merged before they are checked, hashed as if written out in full,
and locked with the shared file's hash, so an edit to it is named wherever a lock is checked."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from grpo_probe.cli import main
from grpo_probe.prereg import LockError, load_prereg, lock_path, lock_prereg, prereg_from_mapping
from grpo_probe.prereg.canonical import canonical_sha256, read_yaml
from grpo_probe.prereg.extends import EXTENDS, merge_extends, read_design
from shipped_files import extending, shipped_designs

REPO = Path(__file__).resolve().parents[2]
SHARED = "rules/signal_and_competence.yaml"
CHAOS_FLOOR = "rules/signal_over_chaos_floor.yaml"
"""The shared criteria of the designs whose signal bar is the cell's own chaos std (Pusher, MetaWorld)."""
SHIPPED = [p for p in shipped_designs() if EXTENDS in read_yaml(p)]
DESIGN = "designs/smoke/pusht_smoke.yaml"
"""The copied design of these tests (relative to prereg/): a small one that extends the shared file and
nothing else, in a folder of its purpose, so it names the shared file relative to the registry's top."""
REGISTRY = Path("prereg")
"""The copy's registry, relative to the working directory (``tmp_path``)."""


@pytest.fixture
def prereg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of ``prereg/DESIGN``, its lock and the shared rules folder, at the same places under
    ``tmp_path/prereg``, the working directory being ``tmp_path`` (so nothing is found in the repository's
    prereg/)."""
    folder = tmp_path / REGISTRY
    shutil.copytree(REPO / "prereg" / "rules", folder / "rules")
    (folder / DESIGN).parent.mkdir(parents=True)
    for name in (DESIGN, f"{DESIGN}.lock"):
        shutil.copy(REPO / "prereg" / name, folder / name)
    monkeypatch.chdir(tmp_path)
    return REGISTRY / DESIGN


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path} has no {old!r}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _lock(path: Path) -> dict:
    return json.loads(lock_path(path).read_text(encoding="utf-8"))


# -- the shipped designs ----------------------------------------------------------------------------------
def test_every_shipped_design_but_the_smoke_shares_its_signal_criterion_through_a_rules_file() -> None:
    """Each shared file is extended by some design, and each design that extends one gets its bar: the
    chaos floor's designs compare the choice std with the cell's own chaos std, the others with the
    registered centimetre bar."""
    written_out = sorted(p.name for p in shipped_designs() if p not in SHIPPED)
    assert written_out == ["smoke.yaml"], "the tests copy and edit the smoke design's criteria"
    assert {read_yaml(p)[EXTENDS] for p in SHIPPED} == {SHARED, CHAOS_FLOOR}
    assert not any("signal" in read_yaml(p)["decision_rule"].get("criteria", {}) for p in SHIPPED)
    bars = {SHARED: {"analysis": "signal_bar_cm"}, CHAOS_FLOOR: {"read": "chaos_std_cm"}}
    for rule, bar in bars.items():
        for path in extending(rule):
            signal = read_design(path)["decision_rule"]["criteria"]["signal"]["all_of"]
            assert signal[0]["threshold"] == bar, path


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_a_converted_design_hashes_as_it_did_written_out_and_its_lock_records_the_shared_file(
    path: Path,
) -> None:
    """The lock's sha256 was taken of the design with both criteria written out (its date is older than
    the shared file), so the merged design is the registered one; the criteria keep their order."""
    lock = _lock(path)
    shared = read_yaml(path)[EXTENDS]
    merged = read_design(path)
    assert canonical_sha256(merged) == lock["sha256"]
    assert EXTENDS not in merged
    assert list(merged["decision_rule"]["criteria"])[:2] == ["signal", "competence"]
    assert next(iter(merged["decision_rule"])) == "criteria"
    assert lock["extends_sha256"] == {shared: canonical_sha256(read_yaml(REPO / "prereg" / shared))}
    design = load_prereg(path)
    assert [e.named for e in design.extends] == [shared]
    assert [c.name for c in design.decision_rule.criteria][:2] == ["signal", "competence"]


def test_a_design_written_out_in_full_is_the_design_that_extends(tmp_path: Path) -> None:
    """Writing the shared criteria into the design and dropping ``extends`` changes nothing registered."""
    path = REPO / "prereg" / DESIGN
    written_out = read_design(path)
    assert json.dumps(written_out) == json.dumps(merge_extends(read_yaml(path), path)[0])
    full = prereg_from_mapping(written_out, tmp_path / DESIGN)
    assert full.sha256 == load_prereg(path).sha256 == _lock(path)["sha256"]
    assert full.decision_rule == load_prereg(path).decision_rule


# -- the lock ---------------------------------------------------------------------------------------------
def test_an_edit_to_the_shared_file_is_caught_and_named_by_the_lock_check(prereg: Path, capsys) -> None:
    assert main(["prereg", "check", str(prereg)]) == 0
    _edit(REGISTRY / SHARED, "threshold: 0.5}", "threshold: 0.6}")
    with pytest.raises(LockError) as info:
        load_prereg(prereg)
    message = str(info.value)
    assert f"{prereg}: does not match its lock" in message and "changed sections: decision_rule" in message
    assert f"prereg/{SHARED}, which it extends, changed since the lock" in message
    assert main(["prereg", "check", str(prereg)]) == 2
    assert f"prereg/{SHARED}, which it extends, changed since the lock" in capsys.readouterr().err


def test_verify_names_the_shared_file_that_moved_under_a_manifest_chain(prereg: Path, capsys) -> None:
    manifest = "results/pusht_smoke/prereg/check.manifest.json"
    assert main(["prereg", "check", str(prereg), "--manifest", manifest]) == 0
    assert main(["verify", manifest]) == 0
    _edit(REGISTRY / SHARED, "threshold: 0.5}", "threshold: 0.6}")
    capsys.readouterr()
    assert main(["verify", manifest]) == 1
    err = capsys.readouterr().err
    assert (
        "prereg content changed" in err
        and f"prereg/{SHARED}, which it extends, changed since the lock" in err
    )


def test_a_comment_in_the_shared_file_is_no_change(prereg: Path) -> None:
    _edit(REGISTRY / SHARED, "decision_rule:", "# reworded nothing\ndecision_rule:")
    assert load_prereg(prereg).sha256 == _lock(prereg)["sha256"]


def test_a_shared_file_rewritten_without_moving_the_design_is_named_and_recorded_by_a_relock(
    prereg: Path,
) -> None:
    """Moving ``qualifies`` from the design into the shared file leaves the merged design as it was, but
    not the shared file: the lock check names it, and ``prereg lock`` records it keeping the date."""
    date = _lock(prereg)["date"]
    _edit(prereg, "  qualifies:\n    ar: [signal, competence]\n    flow: [signal]\n", "")
    _edit(
        REGISTRY / SHARED,
        "decision_rule:\n",
        "decision_rule:\n  qualifies: {ar: [signal, competence], flow: [signal]}\n",
    )
    with pytest.raises(
        LockError,
        match=rf"prereg/{SHARED}, which it extends, changed since the lock.*"
        r"merged design still matches its lock",
    ):
        load_prereg(prereg)
    outcome = lock_prereg(prereg)
    assert (
        outcome.written and "the design is unchanged; recorded the shared files it extends" in outcome.message
    )
    assert _lock(prereg)["date"] == date
    assert load_prereg(prereg).sha256 == _lock(prereg)["sha256"]


def test_a_lock_taken_before_extends_sha256_still_verifies_and_a_relock_adds_it(prereg: Path) -> None:
    lock = _lock(prereg)
    recorded = lock.pop("extends_sha256")
    lock_path(prereg).write_text(json.dumps(lock, sort_keys=True, indent=2) + "\n")
    assert load_prereg(prereg).sha256 == lock["sha256"]  # the merged design's hash alone is checked
    assert main(["prereg", "check", str(prereg)]) == 0
    outcome = lock_prereg(prereg)
    assert outcome.written and _lock(prereg) == lock | {"extends_sha256": recorded}
    assert not lock_prereg(prereg).written  # recorded now: nothing more to write


def test_an_old_lock_names_the_shared_file_of_a_changed_section(prereg: Path) -> None:
    lock = _lock(prereg)
    del lock["extends_sha256"]
    lock_path(prereg).write_text(json.dumps(lock, sort_keys=True, indent=2) + "\n")
    _edit(REGISTRY / SHARED, "threshold: 0.5}", "threshold: 0.6}")
    with pytest.raises(LockError, match=rf"decision_rule is partly set in prereg/{SHARED}, which it extends"):
        load_prereg(prereg)


def test_a_design_that_stops_extending_is_named(prereg: Path) -> None:
    """Written out in full, the design registers the same numbers, but its lock still records the file."""
    raw = read_design(prereg)
    prereg.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    with pytest.raises(LockError, match=rf"it no longer extends {SHARED}"):
        load_prereg(prereg)
    lock_prereg(prereg)
    assert "extends_sha256" not in _lock(prereg)
    assert load_prereg(prereg).sha256 == _lock(prereg)["sha256"]


# -- a missing or invalid shared file ---------------------------------------------------------------------
def _load_error(path: Path) -> str:
    with pytest.raises(ValueError) as info:
        load_prereg(path, require_lock=False)
    return str(info.value)


def test_a_missing_shared_file_is_named_with_the_field(prereg: Path) -> None:
    _edit(prereg, f"extends: {SHARED}", "extends: rules/signal.yaml")
    message = _load_error(prereg)
    assert f"{prereg}: extends: 'rules/signal.yaml': no such file" in message
    assert "prereg/rules/signal.yaml" in message


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("decision_rule:", "decision_rule: [", rf"extends: '{SHARED}': prereg/{SHARED}: not valid YAML"),
        (
            "decision_rule:",
            "name: shared\ndecision_rule:",
            rf"prereg/{SHARED}: name: a shared file may not set",
        ),
        (
            "decision_rule:",
            "extends: other.yaml\ndecision_rule:",
            rf"prereg/{SHARED}: extends: a shared file",
        ),
        (
            "decision_rule:",
            "descision: 1\ndecision_rule:",
            rf"prereg/{SHARED}: descision: not a design field",
        ),
        (
            'op: "<="',
            'op: "=<"',
            rf"decision_rule.criteria.signal.all_of\[1\].op: .*\(set in prereg/{SHARED}",
        ),
    ],
    ids=["yaml", "name", "chained", "unknown-field", "schema"],
)
def test_an_invalid_shared_file_is_named_with_the_field(
    prereg: Path, old: str, new: str, expected: str
) -> None:
    _edit(REGISTRY / SHARED, old, new)
    with pytest.raises(ValueError, match=expected):
        load_prereg(prereg, require_lock=False)


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        ("extends: 7", "extends: a shared file's path relative to the design"),
        ("extends: []", "extends: a shared file's path relative to the design"),
        (f"extends: [{SHARED}, {SHARED}]", rf"extends\[1\]: '{SHARED}' is listed twice"),
        ("extends: /etc/rules.yaml", "extends: '/etc/rules.yaml' is absolute"),
    ],
)
def test_an_invalid_extends_field_is_named(prereg: Path, new: str, expected: str) -> None:
    _edit(prereg, f"extends: {SHARED}", new)
    message = _load_error(prereg)
    assert message.startswith(f"{prereg}: extends") and re.search(expected, message), message


def test_a_field_set_in_both_files_is_refused_not_overridden(prereg: Path) -> None:
    _edit(
        prereg,
        "decision_rule:\n",
        "decision_rule:\n  criteria:\n    signal:\n      description: mine\n"
        "      all_of: [{read: chaos_share.upper, op: '<=', threshold: 0.9}]\n",
    )
    message = _load_error(prereg)
    assert (
        f"{prereg}: decision_rule.criteria.signal.description: also set in prereg/{SHARED}, which it extends"
        in message
    )


def test_two_shared_files_merge_in_order(prereg: Path) -> None:
    """A second file may hold another part of the rule; the merged design is still the registered one."""
    _edit(prereg, "  arm_choice:\n", "  arm_choice_moved:\n")
    text = prereg.read_text(encoding="utf-8")
    start = text.index("  arm_choice_moved:\n")
    end = text.index("\n\n", start) + 1
    block = text[start:end].replace("arm_choice_moved", "arm_choice")
    prereg.write_text(text[:start] + text[end:], encoding="utf-8")
    (REGISTRY / "rules" / "choice.yaml").write_text(f"decision_rule:\n{block}", encoding="utf-8")
    _edit(prereg, f"extends: {SHARED}", f"extends: [{SHARED}, rules/choice.yaml]")
    design = load_prereg(prereg, require_lock=False)
    assert design.sha256 == _lock(prereg)["sha256"]
    assert [e.named for e in design.extends] == [SHARED, "rules/choice.yaml"]


# -- where a shared file is found -------------------------------------------------------------------------
def test_a_design_in_a_folder_of_its_purpose_finds_the_shared_file_at_the_registry_s_top(
    tmp_path: Path,
) -> None:
    """The fixture's design lies in prereg/designs/smoke/ of a folder that is not the working directory, so
    neither the folder beside it nor the working directory's prereg/ holds rules/: it is found by walking
    up to the registry's folder, and its lock (which records the name as written) still matches."""
    folder = tmp_path / "elsewhere" / "prereg"
    shutil.copytree(REPO / "prereg" / "rules", folder / "rules")
    (folder / DESIGN).parent.mkdir(parents=True)
    for name in (DESIGN, f"{DESIGN}.lock"):
        shutil.copy(REPO / "prereg" / name, folder / name)
    design = load_prereg(folder / DESIGN)
    assert [e.path for e in design.extends] == [folder / SHARED]
    assert design.sha256 == _lock(folder / DESIGN)["sha256"]


def test_the_search_for_a_shared_file_stops_at_the_registry_s_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rules/ folder above the registry's is not the registry's: a design does not pick it up."""
    monkeypatch.chdir(tmp_path)  # no prereg/ here: the working directory's fallback finds nothing either
    shutil.copytree(REPO / "prereg" / "rules", tmp_path / "rules")
    design = tmp_path / "project" / "prereg" / DESIGN
    design.parent.mkdir(parents=True)
    shutil.copy(REPO / "prereg" / DESIGN, design)
    message = _load_error(design)
    assert f"{design}: extends: '{SHARED}': no such file" in message
    assert (tmp_path / SHARED).as_posix() not in message
