"""docs/lerobot.md end to end: a policy of LeRobot's keys, served from its own Python, probed on PushT.

Why: the page walks a lab from its LeRobot policy to decision.md; LeRobot itself cannot be installed
beside the suite's torch, so the page's tested stand-in (examples/lerobot_stand_in.py: the adapter the
page shows, around a small random-init numpy policy reading ``observation.state`` and
``observation.environment_state``) does every step the page says. It is served with ``python -m
grpo_probe.serve`` from a virtual environment of another Python holding grpo-probe-serve alone (this
interpreter where none is found: the interpreter test alone then skips, with the reason), bound to the
arm of the design the page saves whole (prereg/designs/smoke/pusht_smoke.yaml with gym-pusht's split
observation in LeRobot's key convention), and the workflow runs to decision.md with the parallel, draw-0
and replay oracles passing over the wire. The page's code must be the file's, and its design the one this
test runs.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

import workflow_copies
from lerobot_page import (
    DESIGN,
    REPO,
    RESULTS,
    bind_served_arm,
    page_blocks,
    page_design,
    run_to_decision,
    write_design,
)
from serve_processes import lab_environment, policy_server

pytest.importorskip(
    "gym_pusht", reason="gym-pusht is not installed (pip install -e '.[pusht]'): no PushT to probe"
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def lerobot_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The page's run in a fresh copy: the stand-in served, the design locked, Snakemake to decision.md."""
    root = tmp_path_factory.mktemp("lerobot")
    workdir = workflow_copies.copy_repo(root / "repo")
    lab, found = lab_environment(root / "lab")
    python = str(lab) if lab is not None else sys.executable
    write_design(workdir)
    lock = workflow_copies.grpo_probe(workdir, "prereg", "lock", DESIGN)
    assert lock.returncode == 0, lock.stdout + lock.stderr
    env = {**os.environ, "PYTHONPATH": str(workdir / "examples")}  # the lab's module, as its own package
    command = [
        python,
        "-m",
        "grpo_probe.serve",
        "lerobot_stand_in:make_policy",
        "--address",
        "ws://127.0.0.1:0",
    ]
    with policy_server(command, root / "server.log", cwd=root, env=env) as address:
        bind_served_arm(workdir, address, 60)
        proc = run_to_decision(workdir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"run": workdir / RESULTS, "address": address, "lab": lab, "found": found, "log": proc.stderr}


def test_the_served_lerobot_style_policy_reaches_the_decision_with_every_oracle_passing(
    lerobot_run: dict[str, Any],
) -> None:
    run = lerobot_run["run"]
    assert "rule bind_server:" in lerobot_run["log"] and "rule train:" not in lerobot_run["log"]
    assert (run / "decision.md").read_text().startswith("# GRPO signal probe: decision")
    source = json.loads((run / "arms/flow_teacher/source.json").read_text())
    assert source["address"] == lerobot_run["address"]
    assert source["policy"] == "lerobot_stand_in:LeRobotAdapter" and source["head"] == "flow"
    assert source["capabilities"]["kinds"] == ["flow_ode"]
    for report in workflow_copies.oracle_reports(run):
        assert json.loads(report.read_text())["pass"] is True, report
    parallel = json.loads((run / "oracles/parallel.json").read_text())
    assert parallel["counts"]["frames"] > 0  # the digests of both state parts, compared over the wire
    replay = json.loads((run / "oracles/replay/c1_teacher_ode.json").read_text())
    assert replay["pass"] is True


def test_the_policy_was_served_from_another_python_without_torch(lerobot_run: dict[str, Any]) -> None:
    if lerobot_run["lab"] is None:
        pytest.skip(f"served from this interpreter instead: {lerobot_run['found']}")
    assert lerobot_run["found"] != str(sys.version_info[:2])
    venv = lerobot_run["lab"].parent.parent
    assert not list(venv.glob("lib/python3.*/site-packages/torch")), "torch came into the lab's environment"


def test_the_pages_code_is_the_stand_ins_and_its_design_the_one_run() -> None:
    """Text no test reads drifts: the page's Python block of the stand-in is examples/lerobot_stand_in.py
    past its docstring, verbatim; the design block is the one the run above writes."""
    source = (REPO / "examples" / "lerobot_stand_in.py").read_text().split('"""', 2)[2].lstrip("\n")
    assert source in page_blocks("python"), "docs/lerobot.md no longer shows examples/lerobot_stand_in.py"
    page = page_design()
    assert page["observation"]["convention"] == "lerobot"
    assert page["arms"]["flow_teacher"]["inputs"] == ["observation.state", "observation.environment_state"]
    commands = "".join(page_blocks("bash"))
    assert "python -m grpo_probe.serve lerobot_stand_in:make_policy" in commands
