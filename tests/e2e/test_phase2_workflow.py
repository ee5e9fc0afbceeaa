"""Phase 2 on the smoke design, through Snakemake: the gate, the pilot, phase2.md, the chain and the audit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RESULTS = Path("results/smoke")
SMOKE = ["--config", "prereg=prereg/smoke.yaml"]


@pytest.fixture(scope="module")
def phase2_run(smoke_run: Path, tmp_path_factory: pytest.TempPathFactory, workflow_tools) -> Path:
    """A copy of the finished smoke run, taken on to the root phase2.md."""
    run = workflow_tools.copy_run(smoke_run, tmp_path_factory.mktemp("phase2") / "run")
    proc = workflow_tools.snakemake(run, "--cores", "2", *SMOKE, "--", "phase2.md", timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return run


def test_phase2_md_follows_the_decision_of_the_smoke_design(phase2_run: Path) -> None:
    outcome = json.loads((phase2_run / RESULTS / "decision.json").read_text())["outcome"]
    # too small to decide, the smoke design's wiring pilot (phase2.pilot: named_arms) trains the rule's arms
    decision = outcome.get("rule", outcome) if outcome["kind"] == "not_decided" else outcome
    record = json.loads((phase2_run / RESULTS / "phase2.json").read_text())
    trained = [stage["arm"] for stage in record["stages"]]
    expected = [arm for arm in (decision["ar_arm"], decision["flow_arm"]) if arm is not None]
    assert trained == expected and record["trained"] == bool(expected)
    for arm in trained:
        assert (phase2_run / RESULTS / "phase2" / arm / "replay_oracle.json").is_file()
    root_page = (phase2_run / "phase2.md").read_text()
    assert root_page.startswith("# Phase 2: the GRPO pilot of smoke")
    assert "**Did the probe's prediction hold?**" in root_page
    assert (phase2_run / RESULTS / "phase2.compute.md").is_file()


def test_verify_walks_the_chain_from_phase2_to_the_prereg(phase2_run: Path, workflow_tools) -> None:
    proc = workflow_tools.grpo_probe(phase2_run, "verify", str(RESULTS / "phase2.manifest.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _produced_by(run: Path, rule: str) -> str:
    for manifest in sorted((run / RESULTS).rglob("*.manifest.json")):
        recorded = json.loads(manifest.read_text())
        if recorded["rule"] == rule and recorded["outputs"]:
            return recorded["outputs"][-1]["path"]
    raise AssertionError(f"no manifest of rule {rule}")


@pytest.mark.parametrize(
    "rule",
    [
        "phase2_plan",
        "phase2_rollouts",
        "phase2_train",
        "phase2_eval",
        "phase2_report",
    ],
)
def test_every_phase2_rule_audits_identical(phase2_run: Path, workflow_tools, rule: str) -> None:
    path = _produced_by(phase2_run, rule)
    proc = workflow_tools.grpo_probe(phase2_run, "audit", path, "--cores", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"(rule {rule})" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("IDENTICAL")
