"""What each registered version decides on the same tables, and how often that holds over seed resamples."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from grpo_probe.analysis.cells.joined import join_cell
from grpo_probe.analysis.cells.reads import compute_reads
from grpo_probe.analysis.cells.seed_columns import seed_columns
from grpo_probe.analysis.cells.tables import read_anchor_table, read_probe_table
from grpo_probe.analysis.page.report import build_decision
from grpo_probe.analysis.rule.decision_rule import evaluate_rule
from grpo_probe.analysis.rule.stability import KINDS, resampled_outcomes
from grpo_probe.prereg.canonical import read_yaml

from .versions_case import REPO, SEEDS, before_replays, versioned_design, write_tables


def _build(out: Path, prereg, probes, anchors):
    return build_decision(
        probes,
        anchors,
        prereg,
        out / "decision.md",
        out / "decision.json",
        out / "figures",
        [(str(p), "0" * 64) for p in (*probes.values(), *anchors.values())],
    )


def test_the_original_rule_and_the_amended_rule_are_both_shown_with_their_outcomes(tmp_path: Path) -> None:
    prereg = versioned_design()
    probes, anchors = write_tables(tmp_path / "tables")
    decision = _build(tmp_path / "out", prereg, probes, anchors)
    versions = decision["versions"]
    last = len(versions) - 1
    assert last >= 2  # the original, the rank_by amendment, and later amendments of the smoke design
    assert [v["version"] for v in versions] == list(range(last + 1))
    assert [v["current"] for v in versions] == [False] * last + [True]
    original, amended, current = versions[0], versions[1], versions[-1]
    assert original["outcome"]["flow_arm"] == "flow_short"  # ranked by spread
    assert amended["outcome"]["flow_arm"] == current["outcome"]["flow_arm"] == "flow_teacher"  # by strikes
    assert current["outcome"] == decision["outcome"]
    assert original["rule"]["rank_by"][1] == {"read": "median_group_std_progress_cm", "prefer": "max"}
    assert amended["amendment"]["after_results"] is True
    assert amended["amendment"]["replaces"] == [
        {"path": "decision_rule.arm_choice.rank_by", "change": "replaced"}
    ]
    for v in versions:
        assert v["stability"]["same_outcome_fraction"] == 1.0  # every seed tells the same story
    md = (tmp_path / "out" / "decision.md").read_text()
    section = md.split("## What each registered version decides", 1)[1].split("## Registered design", 1)[0]
    assert (
        "| 0: original registration | not recorded | n/a | As first registered. | phase2_flow: flow "
        "`flow_short` | 200/200 |" in section
    )
    assert f"| {last}: amendment {last} (this run's design) |" in section
    (row,) = [line for line in section.splitlines() if line.startswith("| 1: amendment 1 |")]
    assert "Changes `decision_rule.arm_choice.rank_by` (replaced)." in row
    assert (
        "Rule: arms ranked by `sampled_engagement_rate` (max), then `sampled_reset_strike_rate` (min), then "
        "`mean_progress_delta_cm` (max) (was `sampled_engagement_rate` (max), then "
        "`median_group_std_progress_cm` (max))." in row
    )
    # only the differences: the rule is stated where it changed, not once per version
    assert section.count("`median_group_std_progress_cm` (max)") == 1
    assert (
        "Not every registered version agrees: version 0 (original registration) gives phase2_flow with flow "
        "`flow_short`" in section
    )
    assert "earlier registered version" in " ".join(md.split("\n---\n", 1)[0].split())
    hashes = md.split("## Hashes", 1)[1]
    for v in versions:
        assert f"version {v['version']}: {v['label']}" in hashes


def test_stability_counts_resamples_that_flip_the_named_arm(tmp_path: Path) -> None:
    """The short arm trips a strike on one seed only and keeps more competence: a resample without that
    seed ties the two arms on strikes, and competence then names the short arm."""
    prereg = versioned_design()
    probes, anchors = write_tables(tmp_path / "tables", short_strike_seeds=(SEEDS[0],), short_delta_cm=1.2)
    decision = _build(tmp_path / "out", prereg, probes, anchors)
    current = decision["versions"][-1]
    assert current["outcome"]["flow_arm"] == "flow_teacher"
    stability = current["stability"]
    b = stability["resamples"]
    missing_seed = (1 - 1 / len(SEEDS)) ** len(SEEDS)  # chance a resample leaves the striking seed out
    assert stability["same_outcome"] / b == pytest.approx(1 - missing_seed, abs=0.08)
    assert stability["same_kind_fraction"] == 1.0
    flips = {(o["flow_arm"], o["count"]) for o in stability["outcomes"]}
    assert flips == {
        ("flow_teacher", stability["same_outcome"]),
        ("flow_short", b - stability["same_outcome"]),
    }


def test_vectorised_resamples_agree_with_the_scalar_rule_on_every_resample(tmp_path: Path) -> None:
    prereg = versioned_design()
    probes, anchors = write_tables(tmp_path / "tables", short_strike_seeds=SEEDS[:2], short_delta_cm=1.2)
    cells = prereg.enabled_cells
    spec = prereg.analysis
    tables = {c.id: read_probe_table(probes[c.id], c.id, c.arm, c.head, 1) for c in cells}
    anchored = {c.arm: read_anchor_table(anchors[c.arm], c.arm, c.head) for c in cells}
    columns = {}
    for c in cells:
        joined = join_cell(c.id, tables[c.id], anchored[c.arm], spec)
        columns[c.id] = seed_columns(c, joined.groups, joined.joins, tables[c.id], anchored[c.arm], spec)
    index = np.random.default_rng(3).integers(0, len(SEEDS), size=(120, len(SEEDS)))
    reads = {c.id: compute_reads(columns[c.id], index) for c in cells}
    for version in prereg.versions:
        found = resampled_outcomes(version.decision_rule, cells, reads, index.shape[0])
        for b in range(index.shape[0]):
            scalar = {c.id: {name: float(v[b]) for name, v in reads[c.id].items()} for c in cells}
            outcome = evaluate_rule(version.decision_rule, cells, scalar)[1]
            assert (KINDS[found.kind[b]], found.arms["ar"][b], found.arms["flow"][b]) == (
                outcome.kind,
                outcome.ar_arm,
                outcome.flow_arm,
            )


def test_vectorised_rule_matches_the_scalar_rule_on_ties_and_undefined_reads() -> None:
    """Random reads from a few values (many ties), undefined reads included, AR and flow cells routed."""
    prereg = versioned_design()
    cells = prereg.enabled_cells
    rng = np.random.default_rng(7)
    resamples = 400
    values = np.array([np.nan, -1.0, -0.5, 0.0, 0.25, 0.5, 1.0])
    names = ["median_group_std_progress_cm", "mean_progress_delta_cm", "sampled_engagement_rate"]
    names += ["sampled_reset_strike_rate"]
    reads = {c.id: {n: rng.choice(values, size=resamples) for n in names} for c in cells}
    for version in prereg.versions:
        found = resampled_outcomes(version.decision_rule, cells, reads, resamples)
        for b in range(resamples):
            scalar = {
                c.id: {n: None if np.isnan(v[b]) else float(v[b]) for n, v in reads[c.id].items()}
                for c in cells
            }
            outcome = evaluate_rule(version.decision_rule, cells, scalar)[1]
            assert (KINDS[found.kind[b]], found.arms["ar"][b], found.arms["flow"][b]) == (
                outcome.kind,
                outcome.ar_arm,
                outcome.flow_arm,
            ), b


def test_an_identity_resample_gives_the_reported_reads(tmp_path: Path) -> None:
    prereg = versioned_design()
    probes, anchors = write_tables(tmp_path / "tables", short_strike_seeds=SEEDS[:3])
    decision = _build(tmp_path / "out", prereg, probes, anchors)
    spec = prereg.analysis
    for c, record in zip(prereg.enabled_cells, decision["cells"], strict=True):
        probe = read_probe_table(probes[c.id], c.id, c.arm, c.head, 1)
        anchor = read_anchor_table(anchors[c.arm], c.arm, c.head)
        joined = join_cell(c.id, probe, anchor, spec)
        columns = seed_columns(c, joined.groups, joined.joins, probe, anchor, spec)
        reads = compute_reads(columns, np.arange(len(SEEDS))[None, :])
        for name, value in reads.items():
            resampled = float(value[0]) if np.isfinite(value[0]) else None  # undefined: null in the record
            assert resampled == record["reads"][name], (c.id, name)


def test_same_inputs_give_the_same_bytes_with_the_versions_section(tmp_path: Path) -> None:
    prereg = versioned_design()
    probes, anchors = write_tables(tmp_path / "tables", short_strike_seeds=(SEEDS[0],), short_delta_cm=1.2)
    _build(tmp_path / "a", prereg, probes, anchors)
    _build(tmp_path / "b", prereg, probes, anchors)
    for name in ("decision.md", "decision.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_version_that_cannot_be_rebuilt_is_shown_not_skipped(tmp_path: Path) -> None:
    raw = before_replays(read_yaml(REPO / "prereg/smoke.yaml"))
    amendments = raw["amendments"]
    del amendments[1]["replaces"]
    prereg = versioned_design(amendments=amendments)
    probes, anchors = write_tables(tmp_path / "tables")
    decision = _build(tmp_path / "out", prereg, probes, anchors)
    evaluated = [v["outcome"] is not None for v in decision["versions"]]
    assert evaluated == [False, False] + [True] * (len(evaluated) - 2)  # before amendment 2 cannot be rebuilt
    assert "records no `replaces`" in decision["versions"][0]["problem"]
    md = (tmp_path / "out" / "decision.md").read_text()
    assert (
        "| 0: original registration | not recorded | n/a | As first registered. | cannot be evaluated: "
        "prereg/versions_case.yaml: amendments[1]: records no `replaces`" in md
    )
    assert "| cannot be evaluated (as version 0) | n/a |" in md
    assert "Versions 0 and 1 of the design cannot be evaluated" in " ".join(md.split())


def test_a_rule_that_reads_a_bootstrap_interval_is_resampled_with_its_interval(tmp_path: Path) -> None:
    """A condition on the lower end of an interval is evaluated, inside each resample of the seeds, on the
    interval recomputed there (a nested bootstrap): the outcome is resampled, and a lower end cannot
    pass where the point would fail."""
    raw = before_replays(read_yaml(REPO / "prereg/smoke.yaml"))
    rule = raw["decision_rule"]
    rule["criteria"]["signal"]["all_of"][0]["read"] = "median_group_std_progress_cm.lower"
    prereg = versioned_design(decision_rule=rule, amendments=[])
    probes, anchors = write_tables(tmp_path / "tables")
    decision = _build(tmp_path / "out", prereg, probes, anchors)
    (only,) = decision["versions"]
    assert only["stability"]["not_resampled"] is None
    assert sum(o["count"] for o in only["stability"]["outcomes"]) == only["stability"]["resamples"]
    assert only["outcome"]["kind"] == decision["outcome"]["kind"]
    (text,) = [
        x["text"]
        for c in decision["cells"][:1]
        for x in c["verdict"]["criteria"]["signal"]["conditions"]
        if x["read"] == "median_group_std_progress_cm.lower"
    ]
    assert text.startswith("median group std ") and ": its lower end " in text


@pytest.mark.parametrize("strikes", [(), SEEDS[:1], SEEDS])
def test_resampled_outcome_shares_add_up(tmp_path: Path, strikes) -> None:
    prereg = versioned_design()
    probes, anchors = write_tables(tmp_path / "tables", short_strike_seeds=strikes, short_delta_cm=0.1)
    for version in _build(tmp_path / "out", prereg, probes, anchors)["versions"]:
        outcomes = version["stability"]["outcomes"]
        assert sum(o["count"] for o in outcomes) == version["stability"]["resamples"]
        counts = [o["count"] for o in outcomes]
        assert counts == sorted(counts, reverse=True)
        assert all(
            a != b for a, b in itertools.combinations([(o["kind"], o["flow_arm"]) for o in outcomes], 2)
        )
