"""Fixtures of the phase-2 tests: a locked small design with a phase2 section, tiny trained heads.

The design is the smoke design with two-replan episodes and a phase2 section of two iterations of two
seeds x K = 2, so a whole stage runs in seconds. The heads are trained for a few steps on synthetic demos:
the replay oracle and the trainer need real networks, not skill.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from grpo_probe.phase2 import pilot_jobs as steps
from grpo_probe.phase2.paths import StagePaths, stage_paths
from grpo_probe.policies.synthetic_demos import synthetic_demos
from grpo_probe.policies.train import train_arm
from grpo_probe.prereg import Prereg, load_prereg, lock_prereg
from grpo_probe.prereg.canonical import read_yaml

REPO = Path(__file__).resolve().parents[2]

PHASE2_SECTION: dict[str, Any] = yaml.safe_load(
    """
description: a two-iteration pilot for the tests
train_seeds: {first: 2000, count: 4}
eval_seeds: {first: 3000, count: 3}
iterations: 2
seeds_per_iteration: 2
rollouts_per_seed: 2
reward:
  penalties: {reset_strike: 2.0, knocked_off: 10.0, not_upright: 10.0, swat: 0.0}
advantage_epsilon: 1.0e-6
min_group_std: 0.0
epochs: 1
minibatches: 2
heads:
  ar:
    mode: {kind: temperature, temperature: 1.0}
    lr: 1.0e-4
    clip_ratio_low: 0.2
    clip_ratio_high: 0.28
    kl_beta: 0.01
    grad_clip: 1.0
    replay_atol: 1.0e-4
  flow:
    mode: {kind: flow_sde, sde_a: 0.5, steps: 4}
    lr: 1.0e-4
    clip_ratio_low: 0.03
    clip_ratio_high: 0.03
    kl_beta: 1.0e-3
    grad_clip: 1.0
    replay_atol: 1.0e-2
compute_gate: {cpu_hours: 0.01}
"""
)
TINY = {
    "ar": {
        "steps": 3,
        "warmup_steps": 1,
        "vocab_size": 300,
        "d_model": 32,
        "n_layers": 1,
        "n_heads": 2,
        "batch_size": 8,
    },
    "flow": {
        "steps": 3,
        "warmup_steps": 1,
        "hidden": 64,
        "n_layers": 2,
        "obs_embed": 16,
        "time_embed": 16,
        "batch_size": 8,
    },
}


def write_design(path: Path, *, with_phase2: bool = True, **phase2_changes: Any) -> Path:
    """The test design (smoke with two replans and the phase2 section above, changed as asked), locked."""
    raw = read_yaml(REPO / "prereg" / "smoke.yaml")
    raw["sim"]["replans"] = 2
    raw["phase2"] = {**PHASE2_SECTION, **phase2_changes}
    if not with_phase2:
        del raw["phase2"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    lock_prereg(path)
    return path


@pytest.fixture(scope="session")
def design_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_design(tmp_path_factory.mktemp("design") / "pilot.yaml")


@pytest.fixture(scope="session")
def design(design_path: Path) -> Prereg:
    return load_prereg(design_path)


@pytest.fixture(scope="session")
def heads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny AR and flow checkpoints (three optimizer steps on synthetic demos)."""
    root = tmp_path_factory.mktemp("heads")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for head in ("ar", "flow"):
            train_arm(head, synthetic_demos(64), root / f"{head}.pt", TINY[head])
    finally:
        torch.set_num_threads(threads)
    return {"ar": root / "ar.pt", "flow": root / "flow.pt"}


def write_source(path: Path, arm: str, checkpoint: Path, factory: str | None = None) -> Path:
    path.write_text(json.dumps({"arm": arm, "checkpoint": str(checkpoint), "factory": factory}))
    return path


def write_decision(path: Path, kind: str, ar_arm: str | None = None, flow_arm: str | None = None) -> Path:
    outcome = {"kind": kind, "ar_arm": ar_arm, "flow_arm": flow_arm, "headline": f"outcome {kind}"}
    path.write_text(json.dumps({"outcome": outcome}))
    return path


@dataclass(frozen=True)
class PilotRun:
    """What :func:`run_pilot` leaves behind: the design, the arm's source, the plan and the stage's paths."""

    prereg: Prereg
    decision: Path
    source: Path
    plan: Path
    plan_manifest: Path
    paths: StagePaths


def run_pilot(design: Path, arm: str, checkpoint: Path, root: Path) -> PilotRun:
    """Run the stage's own pilot of ``arm`` through its jobs (plan, iteration 0's rollouts, training) under
    ``root``, the working directory, as the workflow runs them, for the tests that set a replicate or a
    stage function beside it."""
    prereg = load_prereg(design)
    assert prereg.phase2 is not None
    decision = write_decision(root / "decision.json", f"phase2_{arm}", ar_arm=arm)
    source = write_source(root / "source.json", arm, checkpoint)
    paths = stage_paths(prereg.phase2, root / "phase2", arm)
    plan, plan_manifest = root / "phase2" / "plan.json", root / "phase2" / "plan.manifest.json"
    steps.phase2_plan(design, decision, [], plan, plan_manifest)
    steps.phase2_rollouts(
        design, plan, arm, source, checkpoint, [plan_manifest], paths.rollouts(0), paths.oracle_report,
        paths.first_rollouts_manifest, 0,
    )  # fmt: skip
    steps.phase2_train(
        design, plan, arm, source, checkpoint, paths.rollouts(0),
        [paths.first_rollouts_manifest], paths.metrics, paths.train_manifest, 0,
    )  # fmt: skip
    return PilotRun(prereg, decision, source, plan, plan_manifest, paths)
