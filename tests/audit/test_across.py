"""Two decision records from possibly different environments: bytes where they must match, else the
design, the decision and every interval."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from grpo_probe.audit.across import compare_decisions, format_comparison
from grpo_probe.cli import main
from grpo_probe.provenance.environments import NUMERICS_KEYS, same_numerics_environment

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "reference" / "grpo_signal_probe.decision.json"

ENVIRONMENT = {
    "python": "3.11.9",
    "machine": "x86_64",
    "cpu_model": "AMD EPYC 7B13",
    "libc": "glibc 2.36",
    "lock_sha256": "a" * 64,
    "numerics": {"setting": "x86-64-v3", "variables": {"ATEN_CPU_CAPABILITY": "avx2"}},
}


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    record = json.loads(REFERENCE.read_text(encoding="utf-8"))
    record["environment"] = copy.deepcopy(ENVIRONMENT)
    return record


@pytest.fixture
def record(reference: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(reference)


def _cell(record: dict[str, Any], cell_id: str) -> dict[str, Any]:
    return next(cell for cell in record["cells"] if cell["id"] == cell_id)


def _elsewhere(record: dict[str, Any]) -> dict[str, Any]:
    """The record as another lock's run would write it: every table hash different, every read nudged
    by a little of its interval's width (values move, intervals still overlap, the decision holds)."""
    other = copy.deepcopy(record)
    other["environment"]["lock_sha256"] = "b" * 64
    for entry in other["provenance"]:
        entry["sha256"] = entry["sha256"][::-1]
    for cell in other["cells"]:
        reads = cell["reads"]
        for key in [k for k in reads if k.endswith("_ci_low")]:
            base = key.removesuffix("_ci_low")
            high = base + "_ci_high"
            if reads[key] is None or reads[high] is None:
                continue
            shift = 0.1 * (reads[high] - reads[key])
            reads[key] += shift
            reads[high] += shift
            if reads.get(base) is not None:
                reads[base] += shift
    return other


# --- which environments promise the same bytes -------------------------------------------------------


def test_same_numerics_environment_names_the_keys_that_differ_and_ignores_the_rest() -> None:
    manifest_env = {
        "python": "3.11.9",
        "python_implementation": "CPython",
        "system": "Linux",
        "machine": "x86_64",
        "cpu": {"model": "Intel Xeon", "flags": "avx avx2"},
        "packages": {"torch": "2.13.0", "numpy": "2.3.0"},
        "lock_sha256": "a" * 64,
        "numerics": {"setting": "x86-64-v3", "variables": {}},
        "libc": "glibc 2.36",
    }
    assert same_numerics_environment(manifest_env, ENVIRONMENT) == []  # a manifest's and a record's block
    other_cpu = {**manifest_env, "cpu": {"model": "AMD EPYC", "flags": "avx"}, "packages": {"torch": "2.12"}}
    assert same_numerics_environment(manifest_env, other_cpu) == []  # CPU model and packages: not keys
    changed = {**manifest_env, "lock_sha256": "b" * 64, "numerics": {"setting": "native", "variables": {}}}
    assert same_numerics_environment(manifest_env, changed) == ["lock_sha256", "numerics.setting"]
    assert same_numerics_environment(manifest_env, {**manifest_env, "python": "3.11.10"}) == ["python"]


def test_a_missing_or_null_key_is_an_unknown_environment_never_a_promise_of_bytes() -> None:
    older = {"python": "3.11.9", "machine": "x86_64", "cpu": {"model": "X", "flags": ""}}
    assert same_numerics_environment(older, ENVIRONMENT) == ["libc", "lock_sha256", "numerics.setting"]
    assert same_numerics_environment(older, older) == ["libc", "lock_sha256", "numerics.setting"]
    unlocked = {**ENVIRONMENT, "lock_sha256": None}  # a decision record's block: no packages
    assert same_numerics_environment(unlocked, unlocked) == ["lock_sha256"]
    assert same_numerics_environment(None, None) == list(NUMERICS_KEYS)


def test_without_a_lock_every_installed_version_stands_in_for_it() -> None:
    """A venv installed without the lock records lock_sha256 null: the versions it lists decide."""
    unlocked = {**ENVIRONMENT, "lock_sha256": None, "packages": {"numpy": "2.3.0", "torch": "2.13.0"}}
    assert same_numerics_environment(unlocked, copy.deepcopy(unlocked)) == []
    other_torch = {**unlocked, "packages": {"numpy": "2.3.0", "torch": "2.12.1"}}
    assert same_numerics_environment(unlocked, other_torch) == ["lock_sha256"]
    locked = {**unlocked, "lock_sha256": "a" * 64}
    assert same_numerics_environment(unlocked, locked) == ["lock_sha256"]
    absent = {key: value for key, value in unlocked.items() if key != "lock_sha256"}
    assert same_numerics_environment(absent, absent) == ["lock_sha256"]  # never recorded: unknown


# --- the same environment: bytes must match ----------------------------------------------------------


def test_same_environment_and_equal_records_are_identical(record: dict[str, Any]) -> None:
    other = copy.deepcopy(record)
    other["environment"]["cpu_model"] = "Intel Xeon Platinum"  # another CPU of the same class
    result = compare_decisions(record, other)
    assert result.headline == "same environment: identical"
    assert result.identical and result.passed
    assert format_comparison(result).splitlines()[0] == "same environment: identical"


def test_same_environment_and_one_changed_table_hash_is_named(record: dict[str, Any]) -> None:
    other = copy.deepcopy(record)
    table = next(entry for entry in other["provenance"] if entry["path"] == "join/c2_ar_t1_6.parquet")
    table["sha256"] = "0" * 64
    result = compare_decisions(record, other)
    assert not result.passed
    assert result.headline == "same environment: different: provenance[join/c2_ar_t1_6.parquet].sha256"
    assert len(result.differences) == 1
    assert "0" * 64 in format_comparison(result)


def test_same_environment_a_nudged_read_is_a_difference_though_its_interval_overlaps(
    record: dict[str, Any],
) -> None:
    other = copy.deepcopy(record)
    _cell(other, "c1_ar_t1_0")["reads"]["rank_stability"] += 1e-12
    result = compare_decisions(record, other)
    assert not result.passed and not result.disjoint  # overlapping intervals excuse nothing here
    assert result.headline.startswith("same environment: different: cells[c1_ar_t1_0].reads.rank_stability")


# --- another environment: what holds across machines ------------------------------------------------


def test_another_lock_with_other_bytes_and_the_same_decision_passes(record: dict[str, Any]) -> None:
    other = _elsewhere(record)
    result = compare_decisions(record, other)
    assert result.environment_differs == ("lock_sha256",)
    assert result.differences  # the bytes do differ ...
    assert result.passed  # ... and that is no finding in another environment
    assert result.headline == "another environment: same decision, every interval overlaps"
    report = format_comparison(result).splitlines()
    assert report[0] == "another environment: same decision, every interval overlaps"
    assert report[1] == "another environment (differs in: lock_sha256)"
    assert "tamper" not in "\n".join(report).lower() and "different bytes" not in "\n".join(report)
    assert len(result.intervals) == 55  # 11 reads with an interval in each of the 5 cells


def test_another_environment_with_a_flipped_outcome_names_it(record: dict[str, Any]) -> None:
    other = _elsewhere(record)
    other["outcome"]["kind"] = "phase2_flow"
    other["outcome"]["flow_arm"] = "flow_short"
    other["outcome"]["qualifying"]["flow"] = ["c4_short_ode"]
    result = compare_decisions(record, other)
    assert not result.passed
    assert result.headline == (
        "another environment: different decision: outcome.flow_arm, outcome.kind, outcome.qualifying.flow"
    )
    assert "outcome.kind: this 'park', other 'phase2_flow'" in result.outcome_differences


def test_the_order_qualifying_cells_are_listed_in_is_not_a_decision(record: dict[str, Any]) -> None:
    record["outcome"]["qualifying"]["flow"] = ["c3_teacher_ode", "c4_short_ode"]
    other = _elsewhere(record)
    other["outcome"]["qualifying"]["flow"] = ["c4_short_ode", "c3_teacher_ode"]
    assert compare_decisions(record, other).outcome_differences == ()
    other["outcome"]["qualifying"]["flow"] = ["c4_short_ode"]
    assert compare_decisions(record, other).outcome_differences != ()


def test_another_environment_with_a_disjoint_interval_names_the_cell_and_read(record: dict[str, Any]) -> None:
    other = _elsewhere(record)
    reads = _cell(other, "c2_ar_t1_6")["reads"]
    width = reads["choice_std_cm_ci_high"] - reads["choice_std_cm_ci_low"]
    for key in ("choice_std_cm", "choice_std_cm_ci_low", "choice_std_cm_ci_high"):
        reads[key] += 1.5 * width
    result = compare_decisions(record, other)
    assert not result.passed
    assert [(check.cell, check.read) for check in result.disjoint] == [("c2_ar_t1_6", "choice_std_cm")]
    assert result.headline == "another environment: 1 intervals do not overlap: c2_ar_t1_6 choice_std_cm"
    assert "intervals that do not overlap (1 of 55):" in format_comparison(result)


def test_a_read_defined_in_one_record_only_does_not_overlap(record: dict[str, Any]) -> None:
    other = _elsewhere(record)
    reads = _cell(other, "c1_ar_t1_0")["reads"]
    reads["rank_stability_ci_low"] = reads["rank_stability_ci_high"] = None
    result = compare_decisions(record, other)
    assert [(check.cell, check.read) for check in result.disjoint] == [("c1_ar_t1_0", "rank_stability")]


@pytest.mark.parametrize("elsewhere", [False, True], ids=["same-environment", "another-environment"])
def test_a_prereg_mismatch_is_a_real_difference_in_any_environment(
    record: dict[str, Any], elsewhere: bool
) -> None:
    other = _elsewhere(record) if elsewhere else copy.deepcopy(record)
    other["prereg"]["sha256"] = "f" * 64
    result = compare_decisions(record, other)
    assert not result.passed
    assert any(line.startswith("prereg.sha256:") for line in result.design_differences)
    if elsewhere:
        assert result.headline == "another environment: different design or code: prereg.sha256"
        assert "design or code differs (a real difference in any environment):" in format_comparison(result)
    else:
        assert "prereg.sha256" in result.headline


def test_a_design_file_or_code_mismatch_is_a_real_difference_across_environments(
    record: dict[str, Any],
) -> None:
    other = _elsewhere(record)
    other["design_files"][1]["sha256"] = "e" * 64
    result = compare_decisions(record, other)
    assert result.headline == (
        "another environment: different design or code: "
        "design_files[prereg/grpo_signal_probe.yaml.lock].sha256"
    )
    record["code"] = {"version": "0.1.0", "sources_sha256": "1" * 64}
    other = _elsewhere(record)
    other["code"]["sources_sha256"] = "2" * 64
    assert compare_decisions(record, other).headline == (
        "another environment: different design or code: code.sources_sha256"
    )


def test_a_record_without_an_environment_is_compared_as_from_another_one(record: dict[str, Any]) -> None:
    older = json.loads(REFERENCE.read_text(encoding="utf-8"))
    del older["environment"]  # as a record written before the block was recorded
    result = compare_decisions(record, older)
    assert result.environment_differs == NUMERICS_KEYS
    assert result.headline == "another environment: same decision, every interval overlaps"
    assert "  lock_sha256: this 'aaaa" in format_comparison(result)
    assert "other unknown" in format_comparison(result)


# --- clauses near their threshold -------------------------------------------------------------------


def test_a_clause_within_half_an_interval_of_its_threshold_is_flagged_machine_sensitive(
    record: dict[str, Any],
) -> None:
    """c3's chaos share in the reference reaches 0.556 [0.3, 0.556] against the 0.5 maximum: 0.056 from
    it, with half an interval of 0.128. c3 is a flow cell, so its competence clause does not decide its
    head, and is not flagged whatever its distance from the tolerance."""
    result = compare_decisions(record, _elsewhere(record))
    flagged = {(clause.cell, clause.criterion, clause.read) for clause in result.sensitive}
    assert ("c3_teacher_ode", "signal", "chaos_share.upper") in flagged
    assert not any(cell == "c3_teacher_ode" and criterion == "competence" for cell, criterion, _ in flagged)
    assert not any(criterion == "guards" for _, criterion, _ in flagged)  # rates carry no interval
    c3 = next(clause for clause in result.sensitive if clause.cell == "c3_teacher_ode")
    reads = _cell(record, "c3_teacher_ode")["reads"]
    low, high = reads["chaos_share_ci_low"], reads["chaos_share_ci_high"]
    assert abs(high - 0.5) <= (high - low) / 2  # the premise: within half an interval of the bar
    assert c3.values[0] == pytest.approx(high)
    assert c3.half_widths[0] == pytest.approx((high - low) / 2, abs=1e-3)
    assert "c3_teacher_ode signal: chaos_share.upper <= 0.5" in format_comparison(result)


def test_a_clause_far_from_its_threshold_is_not_flagged_and_one_side_near_is(record: dict[str, Any]) -> None:
    """Move c3's chaos share interval to [0.8, 0.9]: 0.4 from the threshold, half width 0.05."""
    far = copy.deepcopy(record)
    reads = _cell(far, "c3_teacher_ode")["reads"]
    reads["chaos_share_ci_low"], reads["chaos_share_ci_high"] = 0.8, 0.9
    condition = _cell(far, "c3_teacher_ode")["verdict"]["criteria"]["signal"]["conditions"][1]
    assert condition["read"] == "chaos_share.upper"
    condition["value"] = 0.9

    def flagged(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[float | None, float | None]]:
        return [
            clause.values for clause in compare_decisions(a, b).sensitive if clause.cell == "c3_teacher_ode"
        ]

    assert flagged(far, far) == []
    # [0.44, 0.70]: 0.2 from the threshold, beyond half the width (0.13) though within the whole of it
    reads["chaos_share_ci_low"], reads["chaos_share_ci_high"] = 0.44, 0.70
    condition["value"] = 0.70
    assert flagged(far, far) == []
    reads["chaos_share_ci_low"] = 0.26  # half width 0.22: now within reach
    assert flagged(far, far) == [(0.70, 0.70)]
    reads["chaos_share_ci_low"], reads["chaos_share_ci_high"] = 0.8, 0.9
    condition["value"] = 0.9
    near_in_one = flagged(far, record)
    assert len(near_in_one) == 1 and near_in_one[0][0] is None
    assert near_in_one[0][1] == pytest.approx(_cell(record, "c3_teacher_ode")["reads"]["chaos_share_ci_high"])


def test_machine_sensitive_clauses_are_listed_only_where_bytes_may_differ(record: dict[str, Any]) -> None:
    same = format_comparison(compare_decisions(record, copy.deepcopy(record)))
    elsewhere = format_comparison(compare_decisions(record, _elsewhere(record)))
    assert "machine-sensitive" not in same
    assert "machine-sensitive" in elsewhere


# --- the command line ----------------------------------------------------------------------------


def test_audit_against_exits_0_for_the_same_decision_elsewhere_and_1_for_a_different_one(
    record: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    this, other = tmp_path / "this.json", tmp_path / "other.json"
    this.write_text(json.dumps(record))
    other.write_text(json.dumps(_elsewhere(record)))
    assert main(["audit", "--against", str(other), str(this)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2] == "another environment: same decision, every interval overlaps"
    flipped = _elsewhere(record)
    flipped["outcome"]["kind"] = "phase2_ar"
    other.write_text(json.dumps(flipped))
    assert main(["audit", "--against", str(other), str(this)]) == 1
    assert "different decision: outcome.kind" in capsys.readouterr().out


def test_audit_against_reads_this_workflows_record_of_the_same_design_by_default(
    record: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = tmp_path / "results" / "grpo_signal_probe" / "decision.json"
    ours.parent.mkdir(parents=True)
    ours.write_text(json.dumps(record))
    other = tmp_path / "other.json"
    other.write_text(json.dumps(record))
    assert main(["audit", "--against", str(other), "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"this:  {ours}"
    assert out[2] == "same environment: identical"
    ours.unlink()
    assert main(["audit", "--against", str(other), "--root", str(tmp_path)]) == 2
    assert "no such decision record" in capsys.readouterr().err


def test_audit_without_path_or_against_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit"]) == 2
    assert "give PATH" in capsys.readouterr().err


# --- the job rerun: another environment is said before any DIFFERS line ------------------------------


def _audit_of_decision(tmp_path: Path, recorded: dict[str, Any], rerun: dict[str, Any]) -> list[Any]:
    """The recorded decision.json in the tree and the rerun's in the scratch directory, compared."""
    from grpo_probe.audit.compare import compare_output
    from grpo_probe.provenance import file_sha256

    rel = "results/grpo_signal_probe/decision.json"
    tree, scratch = tmp_path / "tree", tmp_path / "scratch"
    for root, data in ((tree, recorded), (scratch, rerun)):
        (root / rel).parent.mkdir(parents=True)
        (root / rel).write_text(json.dumps(data, indent=2))
    entry = {"path": rel, "sha256": file_sha256(tree / rel), "size": (tree / rel).stat().st_size}
    return [compare_output(entry, scratch / rel, tree / rel), tree, scratch]


def test_an_audit_in_another_environment_says_so_first_and_compares_the_decisions(
    record: dict[str, Any], tmp_path: Path
) -> None:
    from grpo_probe.audit.audit_command import format_result
    from grpo_probe.audit.rerun import AuditResult, decision_across

    here = {**ENVIRONMENT, "lock_sha256": "b" * 64}
    rerun = _elsewhere(record)
    rerun["environment"] = here
    output, tree, scratch = _audit_of_decision(tmp_path, record, rerun)
    environments = (ENVIRONMENT, here)
    across, notes = decision_across([output], tree, scratch, environments)
    assert notes == [] and across is not None
    assert across.labels == ("rerun", "recorded") and across.passed
    result = AuditResult(
        target=output.path,
        manifest="results/grpo_signal_probe/decision.manifest.json",
        rule="decision",
        outputs=[output],
        command=["python", "-m", "snakemake", "--cores", "2"],
        seconds=1.0,
        environment_differs=same_numerics_environment(*environments),
        environments=environments,
        across=across,
    )
    lines = format_result(result).splitlines()
    said = lines.index("another environment (differs in: lock_sha256)")
    assert said < next(i for i, line in enumerate(lines) if "DIFFERS" in line)
    assert "  lock_sha256: recorded 'aaaa" in "\n".join(lines)
    assert "decision: another environment: same decision, every interval overlaps" in lines
    assert lines[-1] == (
        "DIFFERS: 1 of 1 outputs, in another environment (differs in: lock_sha256); "
        "the decision record: another environment: same decision, every interval overlaps"
    )


def test_an_audit_in_the_same_environment_keeps_its_report(record: dict[str, Any], tmp_path: Path) -> None:
    from grpo_probe.audit.audit_command import format_result
    from grpo_probe.audit.rerun import AuditResult

    output, _, _ = _audit_of_decision(tmp_path, record, _elsewhere(record))
    result = AuditResult(
        target=output.path,
        manifest="results/grpo_signal_probe/decision.manifest.json",
        rule="decision",
        outputs=[output],
        command=["python", "-m", "snakemake"],
        seconds=1.0,
        environment_differs=[],
        environments=(ENVIRONMENT, ENVIRONMENT),
    )
    report = format_result(result)
    assert "environment" not in report
    assert report.splitlines()[-1] == "DIFFERS: 1 of 1 outputs"


def test_a_decision_record_no_longer_at_hand_is_not_compared(record: dict[str, Any], tmp_path: Path) -> None:
    from grpo_probe.audit.rerun import decision_across

    output, tree, scratch = _audit_of_decision(tmp_path, record, _elsewhere(record))
    (tree / output.path).write_text("{}\n")  # changed after the run: not the bytes the manifest vouched for
    across, notes = decision_across([output], tree, scratch, (ENVIRONMENT, None))
    assert across is None
    assert notes == [f"{output.path}: the recorded bytes are not at hand; the decisions were not compared"]
