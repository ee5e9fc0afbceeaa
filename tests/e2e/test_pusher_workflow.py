"""The whole DAG on Gymnasium's Pusher-v5 (prereg/pusher_smoke.yaml), from a fresh copy of the repository.

Why: the probe must prove itself on an environment no one here wrote. The pusher design runs every
stage through the environment protocol: scripted-expert demos, both heads trained, both oracles passing
(Pusher-v5 bit-identical across processes), and a decision.md; every manifest names the environment.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RESULTS = Path("results/pusher_smoke")


def test_the_pusher_design_runs_end_to_end_and_passes_both_oracles(
    fresh_copy: Path, workflow_tools, grpo_probe
):
    run = workflow_tools.run_design(fresh_copy, "pusher_smoke")
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
    verify = grpo_probe(fresh_copy, "verify", str(RESULTS / "decision.manifest.json"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
