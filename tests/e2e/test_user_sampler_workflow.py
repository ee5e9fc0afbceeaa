"""A sampling kind of the lab's own, registered from its package without editing grpo_probe, runs the
probe to decision.md: the design names ``labpolicies.ddim`` (examples/labpolicies) in ``samplers:``, and
every process that reads it knows the kind: Snakemake, each job, the parallel oracle's two worker
processes (which receive the mode pickled) and ``grpo-probe check-policy``.

The design is the smoke design on its flow arm, bound to a tiny checkpoint trained here, with a DDIM cell
(eta 0.5) as its one cell and in the parallel oracle beside the ODE sampler. Both oracles must pass: the
2-worker parallel path equal to the sequential one byte for byte, and the DDIM cell's draw 0 at eta = 0
equal to the Euler sampler (the noise-off equivalence the kind declares). An edit to the lab's sampler
plans every job again and ``grpo-probe verify`` names the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

import workflow_copies
from grpo_probe.policies.synthetic_demos import synthetic_demos
from grpo_probe.policies.train import train_arm
from lab_samplers import ddim_design

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DESIGN = "prereg/lab_ddim.yaml"
R = Path("results/lab_ddim")
LAB_FILES = {
    "examples/labpolicies/__init__.py",
    "examples/labpolicies/ddim.py",
    "examples/labpolicies/ddim_flow.py",
}
STEPS = {"prereg", "arms", "oracles", "anchors", "probe", "replay", "join", "decision.manifest.json"}
"""The folders (and the file) of every step's manifest: the check, the binding, the parallel oracle, the
anchors with the draw-0 oracle, the probe, the replays, the join and the decision."""
TINY_FLOW = {"steps": 3, "warmup_steps": 1, "hidden": 64, "n_layers": 2, "obs_embed": 16, "time_embed": 16}


def _env(workdir: Path) -> dict[str, str]:
    """The lab's package importable, as its README would say: PYTHONPATH=examples."""
    return {**os.environ, "PYTHONPATH": str(workdir / "examples")}


def _command(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=workdir,
        env=_env(workdir),
        capture_output=True,
        text=True,
        timeout=600,
    )


OPTIONS = ("--cores", "2", "--configfile", "lab.yaml", "--config", f"prereg={DESIGN}")
PAGE = str(R / "decision.md")
"""The target of every run here: the design's page (the compute page and the root copy of the page after
it add nothing this test checks)."""


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean copy of the repository where the lab's DDIM design ran to decision.md."""
    workdir = workflow_copies.copy_repo(tmp_path_factory.mktemp("lab_sampler") / "repo")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        (workdir / "checkpoints").mkdir()
        train_arm(
            "flow", synthetic_demos(64), workdir / "checkpoints/flow.ckpt", {**TINY_FLOW, "batch_size": 8}
        )
    finally:
        torch.set_num_threads(threads)
    binding = {
        "source": "checkpoint",
        "path": "checkpoints/flow.ckpt",
        "adapter": "grpo_probe.policies.checkpoint:load_policy",
    }
    (workdir / "lab.yaml").write_text(yaml.safe_dump({"arms": {"flow_teacher": binding}}))
    ddim_design(workdir / DESIGN)
    lock = _command(workdir, "grpo_probe.cli", "prereg", "lock", DESIGN)
    assert lock.returncode == 0, lock.stderr
    run = workflow_copies.snakemake(workdir, PAGE, *OPTIONS, env=_env(workdir))
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return workdir


def test_the_labs_kind_passes_both_oracles_and_reaches_the_decision(lab_run: Path) -> None:
    parallel = json.loads((lab_run / R / "oracles/parallel.json").read_text())
    assert parallel["pass"] is True and parallel["workers"] == 2
    cases = [(case["mode"]["kind"], case["mode"]["sde_a"]) for case in parallel["cases"]]
    assert ("ddim", 0.5) in cases and {kind for kind, _ in cases} == {"flow_ode", "ddim"}
    assert parallel["sequential"] == parallel["parallel"]  # the tables' and actions' sha256

    draw0 = json.loads((lab_run / R / "oracles/draw0/flow_teacher/c5_teacher_ddim.json").read_text())
    assert draw0["pass"] is True and draw0["first_divergence"] is None
    assert draw0["cell_mode"]["kind"] == "ddim" and draw0["cell_mode"]["sde_a"] == 0.5
    assert (draw0["probe"]["mode"]["kind"], draw0["probe"]["mode"]["sde_a"]) == ("ddim", 0.0)
    assert draw0["reference"]["kind"] == "euler" and draw0["counts"]["actions"] > 0
    assert draw0["skipped_columns"] == ["mode", "sde_a"]

    decision = json.loads((lab_run / R / "decision.json").read_text())
    cell = next(c for c in decision["cells"] if c["id"] == "c5_teacher_ddim")
    assert cell["mode"] == {"kind": "ddim", "sde_a": 0.5, "steps": 10} and cell["verdict"]
    assert "ddim (sde_a=0.5, steps=10)" in (lab_run / PAGE).read_text()

    # the bound policy was checked under the lab's kind and its draw-0 twin before any episode
    bind_log = (lab_run / R / "logs/bind_checkpoint/flow_teacher.log").read_text()
    assert "ok    ddim(a=0.0, steps=10) equals flow_euler(steps=10)" in bind_log

    # every step loaded the design, so every manifest records the lab's sampler code
    manifests = sorted((lab_run / R).rglob("*.manifest.json"))
    assert {m.relative_to(lab_run / R).parts[0] for m in manifests} >= STEPS
    for manifest in manifests:
        sources = {entry["path"] for entry in json.loads(manifest.read_text())["sources"]}
        assert sources >= LAB_FILES, manifest


def test_check_policy_knows_the_labs_kind(lab_run: Path) -> None:
    check = _command(
        lab_run,
        "grpo_probe.cli",
        "check-policy",
        "--prereg",
        DESIGN,
        "--arm",
        "flow_teacher",
        "--configfile",
        "lab.yaml",
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "ok    ddim(a=0.5, steps=10): draws differ by key" in check.stdout
    assert "ok    ddim(a=0.0, steps=10) equals flow_euler(steps=10)" in check.stdout


def test_an_edit_to_the_labs_sampler_plans_every_step_again_and_fails_verify(lab_run: Path) -> None:
    planned = workflow_copies.snakemake(lab_run, "-n", PAGE, *OPTIONS, env=_env(lab_run))
    assert planned.returncode == 0 and "Nothing to be done" in planned.stdout + planned.stderr

    math_module = lab_run / "examples/labpolicies/ddim_flow.py"
    math_module.write_text(math_module.read_text() + "\n# eta's schedule retuned\n")
    planned = workflow_copies.snakemake(lab_run, "-n", PAGE, *OPTIONS, env=_env(lab_run))
    assert planned.returncode == 0, planned.stderr
    for rule in ("prereg_check", "bind_checkpoint", "parallel_oracle", "anchors", "probe", "decision"):
        assert f"rule {rule}:" in planned.stdout, planned.stdout
    verify = _command(lab_run, "grpo_probe.cli", "verify", str(R / "decision.manifest.json"))
    assert verify.returncode == 1
    assert "examples/labpolicies/ddim_flow.py" in verify.stderr and "source changed" in verify.stderr
