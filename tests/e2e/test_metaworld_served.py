"""MetaWorld's reach-v3, served from its own environment, runs the whole chain to decision.md.

Why: MetaWorld 3.1.1 pins ``mujoco==3.3.0`` and cannot live in the probe's environment (mujoco 4.0.0).
This test builds its venv with the script a lab runs (``tools/make_sim_venv.sh metaworld``, cached under
.venvs/), starts ``python -m grpo_probe.serve env grpo_probe.serve.metaworld_env:make`` from it at the
design's address, and runs ``prereg/designs/served/metaworld_reach_smoke.yaml`` in a fresh copy of the
repository: demonstrations from MetaWorld's shipped scripted expert, both arms cloned, every oracle passing,
and every manifest recording the served simulator's packages and sha256. A new task's design
(drawer-open-v3) is made by ``grpo-probe design new`` from the push design, under a name of its own, runs
the same way, and is the design shipped for that task, its name apart.

Opt-in (``GRPO_PROBE_SIM_VENV=1``, which `.ci/run` sets): the first build downloads MetaWorld, MuJoCo
3.3.0 and Gymnasium from the package index (about two minutes); it skips, with the reason, when not asked.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from grpo_probe.prereg.canonical import read_yaml
from serve_processes import env_server_process, sim_venv_python

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DESIGN = "metaworld_reach_smoke"
DESIGN_FILE = f"prereg/designs/served/{DESIGN}.yaml"
PORT = 18766
"""The design's env.address port."""


@pytest.fixture(scope="module")
def sim_python() -> str:
    return sim_venv_python("metaworld")


@pytest.fixture(scope="module")
def clean_run(sim_python: str, tmp_path_factory: pytest.TempPathFactory, workflow_tools) -> Path:
    """A fresh copy of the repository in which the design ran to decision.md, the server up throughout."""
    folder = tmp_path_factory.mktemp("metaworld")
    repo = workflow_tools.copy_repo(folder / "repo")
    with env_server_process(
        sim_python,
        "grpo_probe.serve.metaworld_env:make",
        folder / "server.log",
        scene="grpo_probe.serve.metaworld_env:scene",
        port=PORT,
    ):
        return workflow_tools.run_design(repo, DESIGN_FILE, timeout=1500)


def test_metaworld_reach_served_runs_to_decision_with_every_oracle_passing(
    clean_run: Path, workflow_tools, grpo_probe
):
    run = clean_run
    repo = run.parents[1]
    decision = json.loads((run / "decision.json").read_text())
    version = decision["env"]["version"]
    assert decision["env"]["id"] == "reach-v3"
    assert version.startswith("reach-v3/1 (served: metaworld.envs.sawyer_reach_v3:SawyerReachEnvV3")
    assert "metaworld 3.1.1, mujoco 3.3.0" in version and "sha256 " in version
    reports = workflow_tools.oracle_reports(run)
    assert len(reports) == 3
    for report in reports:
        assert json.loads(report.read_text())["pass"] is True, report
    for manifest in ("prereg/check.manifest.json", "demos/demos.manifest.json", "anchors/ar.manifest.json"):
        assert json.loads((run / manifest).read_text())["env"]["version"] == version
    demos = json.loads((run / "demos/demos.manifest.json").read_text())
    assert demos["env"]["id"] == "grpo_probe.envs.served:served_env"
    verify = grpo_probe(repo, "verify", f"results/{DESIGN}/decision.manifest.json")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_a_server_killed_mid_run_is_named_and_the_rerun_gives_the_same_decision(
    sim_python: str, clean_run: Path, tmp_path: Path, workflow_tools
):
    """The server dies once the first rollouts ran: the run stops naming its address, and once it is
    back the rerun finishes with the decision.json of a run the server never left."""
    repo = workflow_tools.copy_repo(tmp_path / "repo")
    results = repo / "results" / DESIGN
    server = {
        "scene": "grpo_probe.serve.metaworld_env:scene",
        "port": PORT,
    }
    with env_server_process(
        sim_python, "grpo_probe.serve.metaworld_env:make", tmp_path / "server1.log", **server
    ) as (_, proc):
        run = workflow_tools.start_snakemake(
            repo, f"results/{DESIGN}/decision.md", "--cores", "2", "--config", f"prereg={DESIGN_FILE}"
        )
        deadline = time.monotonic() + 900
        while not (results / "anchors/ar.parquet").exists() and run.poll() is None:
            assert time.monotonic() < deadline, "the anchors never came"
            time.sleep(0.5)
        proc.kill()
        proc.wait()
        output, _ = run.communicate(timeout=900)
    assert run.returncode != 0, output[-3000:]
    assert f"environment server ws://127.0.0.1:{PORT}" in output, output[-3000:]
    assert not (results / "decision.json").exists()
    with env_server_process(
        sim_python, "grpo_probe.serve.metaworld_env:make", tmp_path / "server2.log", **server
    ):
        rerun = workflow_tools.run_design(repo, DESIGN_FILE, timeout=1500)
    for report in workflow_tools.oracle_reports(rerun):
        assert json.loads(report.read_text())["pass"] is True, report
    assert (rerun / "decision.json").read_bytes() == (clean_run / "decision.json").read_bytes()


NEW_TASK = "drawer_open_made"
"""The name given to the design `grpo-probe design new` makes from the push design for drawer-open-v3 (the
shipped one, metaworld_drawer_open_smoke, was made by the same command)."""
SHIPPED = "prereg/designs/served/metaworld_drawer_open_smoke.yaml"


def test_a_new_task_is_one_command_from_decision_with_a_meaningful_engagement(
    sim_python: str, tmp_path: Path, workflow_tools, grpo_probe
):
    """drawer-open-v3: `design new` measures its expert (it needs longer than push-v3's 80 ticks), writes
    and locks the design; it runs to decision.md with every oracle passing, and engagement is the arm's
    contact with the drawer, which no arm makes at tick 1 (it was "the distance changed", true at tick 1
    for every arm, when the spawn was read where the previous drawer stood)."""
    repo = workflow_tools.copy_repo(tmp_path / "repo")
    design = f"prereg/designs/served/{NEW_TASK}.yaml"
    with env_server_process(
        sim_python,
        "grpo_probe.serve.metaworld_env:make",
        tmp_path / "server.log",
        scene="grpo_probe.serve.metaworld_env:scene",
        port=PORT,
    ):
        made = grpo_probe(
            repo,
            "design",
            "new",
            "--from",
            "prereg/designs/served/metaworld_push_smoke.yaml",
            "--task",
            "drawer-open-v3",
            "--json",
            "expert.json",
            NEW_TASK,
        )
        assert made.returncode == 0, made.stdout + made.stderr
        run = workflow_tools.run_design(repo, design, timeout=1500)
    expert = json.loads((repo / "expert.json").read_text())
    assert expert["registered"]["success"] < 0.5 and expert["suggested"]["success"] >= 0.9
    assert expert["suggested"]["replans"] > 16 and expert["ticks"]["first_contact"]["median"] > 1
    written = read_yaml(repo / design)
    assert written["amendments"] == [] and written["env"]["params"]["gym_id"] == "drawer-open-v3"
    shipped = read_yaml(repo / SHIPPED)
    assert {**written, "name": None} == {**shipped, "name": None}, "not the design shipped for the task"
    assert written["env"]["params"]["replans"] == expert["suggested"]["replans"]
    decision = json.loads((run / "decision.json").read_text())
    assert decision["env"]["id"] == "drawer-open-v3"
    assert decision["env"]["engagement"].startswith("a link of the Sawyer arm (its gripper included) touches")
    for report in workflow_tools.oracle_reports(run):
        assert json.loads(report.read_text())["pass"] is True, report
    for table in ("anchors/ar.parquet", "cells/c1_ar_t1_0.parquet", "cells/c3_teacher_ode.parquet"):
        ticks = pq.read_table(run / table, columns=["first_contact_tick"]).column(0).to_pylist()
        assert all(tick is None or tick > 1 for tick in ticks), (table, ticks)
    verify = grpo_probe(repo, "verify", f"results/{NEW_TASK}/decision.manifest.json")
    assert verify.returncode == 0, verify.stdout + verify.stderr
