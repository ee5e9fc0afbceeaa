"""The whole DAG on a goal-conditioned Gymnasium environment (prereg/designs/smoke/pointmaze_smoke.yaml), from
a fresh copy.

Why: a goal-conditioned environment reaches the probe only through the Gymnasium adapter's params (a
Dict observation, the goal from ``desired_goal``, a wrapper's ``info`` key as a guard channel, a scripted
expert named by ``module:callable``). The design runs every stage on Gymnasium-Robotics'
PointMaze_UMaze-v3 with the fewest seeds and draws the schema allows: demos from the maze expert, the
flow arm trained, both oracles passing, decision.md with the wrapper's guard, every manifest naming the
environment and its wrapper chain. 55-65 s on the 2-core machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

pytest.importorskip(
    "gymnasium_robotics",
    reason="Gymnasium-Robotics is not installed (pip install -e '.[robotics]'): no PointMaze to bind",
)

RESULTS = Path("results/pointmaze_smoke")


def test_the_point_maze_design_runs_end_to_end_and_passes_both_oracles(
    fresh_copy: Path, workflow_tools, grpo_probe
) -> None:
    run = workflow_tools.run_design(fresh_copy, "prereg/designs/smoke/pointmaze_smoke.yaml")
    decision = json.loads((run / "decision.json").read_text())
    assert (run / "decision.md").read_text().startswith("# GRPO signal probe: decision")
    version = decision["env"]["version"]
    assert decision["env"]["id"] == "gymnasium_robotics:PointMaze_UMaze-v3"
    assert "gymnasium-robotics 1.4.2" in version and "wrappers WallContactInfo > TimeLimit" in version
    assert [g["guard"] for g in decision["cells"][0]["guards"]] == ["away_tail", "wall_hit"]
    reports = workflow_tools.oracle_reports(run)
    assert len(reports) == 2
    for report in reports:
        assert json.loads(report.read_text())["pass"] is True, report
    for manifest in (
        "prereg/check.manifest.json",
        "demos/demos.manifest.json",
        "anchors/flow_teacher.manifest.json",
    ):
        env = json.loads((run / manifest).read_text())["env"]
        assert env["id"] == "grpo_probe.envs.gym_adapter:make_gymnasium_env" and env["version"] == version
    verify = grpo_probe(fresh_copy, "verify", str(RESULTS / "decision.manifest.json"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
