"""The whole DAG on the smoke design: it runs, it is complete, its chain verifies, and it refuses drift."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from grpo_probe.analysis.rule.glossary import number
from grpo_probe.provenance.environments import environment_value_lines, same_numerics_environment

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RESULTS = Path("results/smoke")
SMOKE = ["--config", "prereg=prereg/smoke.yaml"]


def test_smoke_workflow_writes_decision_md_and_json(smoke_run: Path) -> None:
    md = (smoke_run / RESULTS / "decision.md").read_text()
    decision = json.loads((smoke_run / RESULTS / "decision.json").read_text())
    assert md.startswith("# GRPO signal probe: decision")
    assert decision["outcome"]["kind"] in {"park", "phase2_ar", "phase2_flow", "ar_then_flow", "not_decided"}
    assert (smoke_run / RESULTS / "compute.md").exists()
    for figure in re.findall(r"\(figures/([^)]+\.png)\)", md):
        assert (smoke_run / RESULTS / "figures" / figure).is_file()
    # one screen first (80 columns x 40 lines): the outcome, the rule's figure and a line per cell
    top = md.split("\n---\n", 1)[0]
    assert "**" + " ".join(decision["outcome"]["headline"].split()[:3]) in top
    assert "(figures/rule_all-cells.png)" in top
    assert "validation study, `docs/validation-study.md`" in " ".join(top.split())
    for cell in decision["cells"]:
        assert f"\n- **{cell['id']}** (" in top
    assert len(top.splitlines()) <= 40 and max(len(line) for line in top.splitlines()) <= 80
    assert (smoke_run / RESULTS / decision["figures"]["rule"]).is_file()


def test_a_design_too_small_to_hold_its_target_prints_no_go(smoke_run: Path) -> None:
    """The smoke design (2 seeds x K = 2) goes far more often than its 5 % target at the worst point of
    the null's boundary, so the rule's go reads "not decided at this size", names no arm, and the
    phase-2 plan made from it trains nothing."""
    from grpo_probe.phase2.gate import plan_from_decision
    from grpo_probe.prereg.design import load_prereg

    decision = json.loads((smoke_run / RESULTS / "decision.json").read_text())
    worst = decision["operating"]["worst_point"]
    assert worst["above_target"] and worst["rate"]["rate"] > decision["operating"]["false_go_target"]
    rule_outcome = next(v["outcome"] for v in decision["versions"] if v["current"])
    assert rule_outcome["kind"] != "park"  # the rule itself would go
    outcome = decision["outcome"]
    assert (outcome["kind"], outcome["ar_arm"], outcome["flow_arm"]) == ("not_decided", None, None)
    assert outcome["clauses"][-1].startswith(
        f"not decided at this size: the rule gives {rule_outcome['kind']}"
    )
    top = (smoke_run / RESULTS / "decision.md").read_text().split("\n---\n", 1)[0]
    assert "**Not decided at this size" in top and "`grpo-probe plan` sizes a design" in " ".join(top.split())
    prereg = load_prereg(smoke_run / "prereg/smoke.yaml")
    gated = dataclasses.replace(prereg, phase2=dataclasses.replace(prereg.phase2, pilot="gated"))
    plan = plan_from_decision(gated, decision)
    assert plan.stages == () and "too small to hold its false-go target" in plan.reason
    # the smoke design's own pilot checks the machinery (phase2.pilot: named_arms): the rule's arm(s)
    wiring = plan_from_decision(prereg, decision)
    named = [arm for arm in (rule_outcome["ar_arm"], rule_outcome["flow_arm"]) if arm]
    assert [s.arm for s in wiring.stages] == named and "phase2.pilot: named_arms" in wiring.reason


def test_the_smoke_decision_separates_choice_from_chaos(smoke_run: Path) -> None:
    """Every cell carries the replay reads with their intervals, the outcome section says the split in
    words, the signal criterion reads the choice std, and each cell's unperturbed replay oracle passed."""
    decision = json.loads((smoke_run / RESULTS / "decision.json").read_text())
    md = (smoke_run / RESULTS / "decision.md").read_text()
    assert decision["replay"]["perturbations"] == [
        {"kind": "action", "std": 0.001},
        {"kind": "state", "scale_m": 0.0001},
    ]
    assert [c["read"] for c in decision["decision_rule"]["criteria"][0]["all_of"]] == [
        "choice_std_cm.lower",
        "chaos_share.upper",
    ]
    for cell in decision["cells"]:
        reads = cell["reads"]
        for name in (
            "choice_std_cm",
            "chaos_std_cm",
            "chaos_share",
            "median_choice_std_cm",
            "rank_stability",
        ):
            assert (
                reads[name] is not None and reads[f"{name}_ci_low"] <= reads[name] <= reads[f"{name}_ci_high"]
            )
        assert 0.0 <= reads["chaos_share"] <= 1.0
        assert cell["replay"]["replayed_seeds"] == 2 and cell["replay"]["replays"] == 2
        assert [p["kind"] for p in cell["replay"]["perturbations"]] == ["action", "state"]
        # the sentence states pooled quantities only, so they add up: T^2 = B^2 + W^2
        total, choice, chaos = cell["replay"]["total_std_cm"], reads["choice_std_cm"], reads["chaos_std_cm"]
        assert total == pytest.approx((choice**2 + chaos**2) ** 0.5, rel=1e-12)
        sentence = (
            f"cell {cell['id']}: pooled over its 2 replayed seeds, a reward's spread of {number(total)} cm "
            f"splits into {number(choice)} cm ["
        )
        assert sentence in md
        assert (smoke_run / RESULTS / cell["figures"]["chaos"]).is_file()
        oracle = json.loads((smoke_run / RESULTS / "oracles" / "replay" / f"{cell['id']}.json").read_text())
        assert oracle["pass"] is True and oracle["counts"]["episodes"] > 0
        assert [c["replay"]["kind"] for c in oracle["cases"]] == ["action", "state"]
        assert all(c["replay"].get("std", c["replay"].get("scale_m")) == 0.0 for c in oracle["cases"])
    parallel = json.loads((smoke_run / RESULTS / "oracles" / "parallel.json").read_text())
    assert parallel["pass"] is True
    assert {c["replay"]["kind"] for c in parallel["cases"] if "replay" in c} == {"action", "state"}
    versions = decision["versions"]
    assert versions[-1]["current"] and versions[-2]["outcome"] is not None  # the version before intervals
    # the page states the rule's error rates beside the outcome, from the registered simulation
    operating = decision["operating"]
    assert operating["registered"] and operating["simulations"] == 1000
    assert operating["design"]["false_go"]["rate"] <= operating["false_go_target"]
    assert "**How often this rule is wrong**" in md.split("\n---\n", 1)[0]


def test_a_second_run_has_nothing_to_do(smoke_run: Path, snakemake) -> None:
    proc = snakemake(smoke_run, "-n", *SMOKE)
    assert proc.returncode == 0, proc.stderr
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_verify_walks_the_chain_from_decision_to_prereg(smoke_run: Path, grpo_probe) -> None:
    proc = grpo_probe(smoke_run, "verify", str(RESULTS / "decision.manifest.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_verify_names_a_tampered_anchor_table(smoke_run: Path, tmp_path: Path, grpo_probe) -> None:
    copy = tmp_path / "tampered"
    shutil.copytree(smoke_run, copy, symlinks=True)
    anchor = copy / RESULTS / "anchors" / "ar.parquet"
    data = bytearray(anchor.read_bytes())
    data[len(data) // 2] ^= 0x01
    anchor.write_bytes(bytes(data))
    proc = grpo_probe(copy, "verify", str(RESULTS / "decision.manifest.json"))
    assert proc.returncode == 1
    assert "anchors/ar.parquet" in proc.stdout + proc.stderr


def test_editing_a_registered_threshold_after_lock_is_refused(fresh_copy: Path, snakemake) -> None:
    prereg = fresh_copy / "prereg" / "smoke.yaml"
    text = prereg.read_text()
    assert "signal_bar_cm: 0.25" in text
    prereg.write_text(text.replace("signal_bar_cm: 0.25", "signal_bar_cm: 0.10"))
    proc = snakemake(fresh_copy, "-n", *SMOKE)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "prereg/smoke.yaml" in out and "smoke.yaml.lock" in out
    assert not (fresh_copy / "results").exists()


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("group_size: 2", "group_size: 0", "group_size"),
        ("    arm: ar\n", "    arm: nope\n", "cells[c1_ar_t1_0].arm"),
    ],
)
def test_a_schema_violation_names_file_and_field(
    fresh_copy: Path, old: str, new: str, field: str, snakemake
) -> None:
    prereg = fresh_copy / "prereg" / "smoke.yaml"
    text = prereg.read_text()
    assert old in text
    prereg.write_text(text.replace(old, new, 1))
    proc = snakemake(fresh_copy, "-n", *SMOKE)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "prereg/smoke.yaml" in out and field in out


def test_dry_run_lists_the_registered_order(fresh_copy: Path, snakemake) -> None:
    proc = snakemake(fresh_copy, "-n", *SMOKE)
    assert proc.returncode == 0, proc.stderr
    rules = re.findall(r"^(?:local)?rule (\w+):", proc.stdout, flags=re.M)
    first = {name: rules.index(name) for name in ("parallel_oracle", "anchors", "probe", "join", "decision")}
    last = {name: len(rules) - 1 - rules[::-1].index(name) for name in first}
    assert last["parallel_oracle"] < first["anchors"]
    assert last["anchors"] < first["probe"]
    assert last["probe"] < first["join"]
    assert last["join"] < first["decision"]


def test_the_smoke_tables_are_the_pinned_bytes(smoke_run: Path) -> None:
    """A registered run's bytes change only on purpose: every table of the smoke run (rollouts, replays,
    anchors, joins) has the sha256 pinned in tests/golden/smoke_tables.json. A commit that changes them
    updates the pin with tools/pin_smoke_tables.py and says why in docs/changelog.md."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "pin", Path(__file__).parents[2] / "tools/pin_smoke_tables.py"
    )
    assert spec is not None and spec.loader is not None
    pin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pin)
    pinned_file = json.loads(pin.PIN.read_text(encoding="utf-8"))
    pinned = pinned_file["tables"]
    here = pin.run_environment(smoke_run / RESULTS)
    pinned_env = pinned_file.get("environment")
    differing = same_numerics_environment(pinned_env, here)
    assert not differing, (
        "this run's environment is not the one the smoke tables were pinned in, so their bytes are not "
        "promised here (the tables were not compared): "
        + "; ".join(environment_value_lines(pinned_env, here, ("pinned", "here"), differing))
        + ". Install from the committed requirements.lock (bin/bootstrap) on an x86-64 CPU with AVX2 and "
        "FMA; a pin made in another environment is regenerated with tools/pin_smoke_tables.py."
    )
    found = pin.table_hashes(smoke_run / RESULTS)
    changed = sorted(k for k in pinned.keys() & found.keys() if pinned[k] != found[k])
    assert not changed and found.keys() == pinned.keys(), (
        f"the smoke design's tables differ from tests/golden/smoke_tables.json: changed {changed}, "
        f"new {sorted(found.keys() - pinned.keys())}, gone {sorted(pinned.keys() - found.keys())}. If the "
        "change is meant, rerun the smoke design, run tools/pin_smoke_tables.py results/smoke and give the "
        "reason in docs/changelog.md in the same commit."
    )
