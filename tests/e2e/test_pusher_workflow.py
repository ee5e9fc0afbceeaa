"""The whole DAG on Gymnasium's Pusher-v5 (prereg/designs/smoke/pusher_smoke.yaml), from a fresh copy of the
repository.

Why: the probe must prove itself on an environment no one here wrote. The pusher design runs every
stage through the environment protocol: scripted-expert demos, both heads trained, both oracles passing
(Pusher-v5 bit-identical across processes), and a decision.md; every manifest names the environment.
Then phase 2, gated by that decision: the flow arm's cell qualifies, so the pilot trains it under
Flow-GRPO with the SDE sampler, its replay oracle passes before the first update, and phase2.md counts
the Pusher's own guards.

It runs when asked (``GRPO_PROBE_LONG_RUNS=1``, which `.ci/run` sets): the run and its pilot take three to
four minutes on 2 cores, which a newcomer's ``bin/test`` leaves to CI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asked_tools import long_run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, long_run]

RESULTS = Path("results/pusher_smoke")


@pytest.fixture(scope="module")
def pusher_run(tmp_path_factory: pytest.TempPathFactory, workflow_tools) -> Path:
    """A fresh copy of the repository in which the pusher design ran to its decision.md."""
    repo = workflow_tools.copy_repo(tmp_path_factory.mktemp("pusher") / "repo")
    workflow_tools.run_design(repo, "prereg/designs/smoke/pusher_smoke.yaml")
    return repo


@pytest.fixture(scope="module")
def pusher_phase2(pusher_run: Path, workflow_tools) -> Path:
    """The same copy, taken on to the root phase2.md (the command a fresh clone runs)."""
    proc = workflow_tools.snakemake(
        pusher_run,
        "phase2.md",
        "--cores",
        "2",
        "--config",
        "prereg=prereg/designs/smoke/pusher_smoke.yaml",
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return pusher_run


def test_the_pusher_design_runs_end_to_end_and_passes_both_oracles(
    pusher_run: Path, workflow_tools, grpo_probe
):
    run = pusher_run / RESULTS
    decision = json.loads((run / "decision.json").read_text())
    assert (run / "decision.md").read_text().startswith("# GRPO signal probe: decision")
    assert decision["env"]["id"] == "pusher" and "Pusher-v5" in decision["env"]["version"]
    assert [g["guard"] for g in decision["cells"][0]["guards"]] == [
        "joint_limit",
        "off_table",
        "away_tail",
        "swat",
    ]
    reports = workflow_tools.oracle_reports(run)
    assert len(reports) == 3
    for report in reports:
        assert json.loads(report.read_text())["pass"] is True, report
    for manifest in ("prereg/check.manifest.json", "demos/demos.manifest.json", "anchors/ar.manifest.json"):
        env = json.loads((run / manifest).read_text())["env"]
        assert env == {"id": "pusher", "version": decision["env"]["version"]}
    verify = grpo_probe(pusher_run, "verify", str(RESULTS / "decision.manifest.json"))
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_the_pusher_pilot_trains_the_flow_arm_and_passes_its_replay_oracle(pusher_phase2: Path, grpo_probe):
    run = pusher_phase2 / RESULTS
    outcome = json.loads((run / "decision.json").read_text())["outcome"]
    # two seeds cannot hold the false-go target: not decided, and the wiring pilot trains the rule's arm
    assert outcome["kind"] == "not_decided" and outcome["flow_arm"] is None
    assert outcome["rule"] == {"kind": "phase2_flow", "ar_arm": None, "flow_arm": "flow_teacher"}
    record = json.loads((run / "phase2.json").read_text())
    assert record["trained"] is True and [s["arm"] for s in record["stages"]] == ["flow_teacher"]
    oracle = json.loads((run / "phase2/flow_teacher/replay_oracle.json").read_text())
    assert oracle["passed"] is True and oracle["head"] == "flow"
    assert oracle["entries"] == oracle["replans"] * 10 > 0  # every SDE step of every replan compared
    for iteration in range(3):  # theta_1 and theta_2 written, iteration 1's rollouts recorded
        assert (run / f"phase2/flow_teacher/iter-{iteration}").is_dir()
    page = (pusher_phase2 / "phase2.md").read_text()
    assert page.startswith("# Phase 2: the GRPO pilot of pusher_smoke")
    assert "**Replay oracle** (before the first update)" in page and ": passed." in page
    for guard in ("joint_limit", "off_table", "away_tail", "swat"):
        assert guard in page
    verify = grpo_probe(pusher_phase2, "verify", str(RESULTS / "phase2.manifest.json"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
