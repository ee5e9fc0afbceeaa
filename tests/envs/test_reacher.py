"""Reacher-v5 as the probe's positive control: the scripted expert reaches, deterministically, and the tiny
design (prereg/designs/smoke/reacher_smoke.yaml) runs end to end.

Why: the workflow trains the reference arms on the expert's demos, so an expert that misses the target or
whose chunks depend on anything but (observation, key) would make the control's arms weak or its demos
irreproducible; and the control is only a control if the whole chain (replays with a state perturbation
of the arm's hinges included) runs on it.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from grpo_probe.envs.gym_adapter import GymnasiumAdapter, GymnasiumParams
from grpo_probe.envs.reacher import ReacherExpert
from grpo_probe.envs.registry import env_config, make_env, make_expert

REPO = Path(__file__).resolve().parents[2]
FACTORY = "grpo_probe.envs.gym_adapter:make_gymnasium_env"
_DESIGN: dict[str, Any] = yaml.safe_load((REPO / "prereg/designs/probes/reacher_probe.yaml").read_text())
PROBE_ENV: dict[str, Any] = _DESIGN["env"]
"""The env section of the registered design: the expert is tested on the episode it records demos in."""
DEMO_NOISE = float(_DESIGN["training"]["demos"]["noise"])

_EPISODE = """
import hashlib, sys
from grpo_probe.envs.registry import env_config, make_env, make_expert
config = env_config({factory!r}, {params!r})
env, expert = make_env(config), make_expert(config, 0.03)
obs = env.reset(7)
while not env.done:
    obs = env.execute(expert.act(obs, (3, 7, env.replan_index)), env.spec.executed_actions)
sys.stdout.write(hashlib.sha256(env.record().canonical_bytes()).hexdigest())
"""


def _config(**overrides: Any) -> Any:
    return env_config(PROBE_ENV["id"], {**PROBE_ENV["params"], **overrides})


def _episode(env: Any, expert: Any, seed: int, run_key: int = 3) -> Any:
    obs = env.reset(seed)
    while not env.done:
        obs = env.execute(expert.act(obs, (run_key, seed, env.replan_index)), env.spec.executed_actions)
    return env.record()


def test_the_registered_design_binds_reacher_with_its_expert() -> None:
    env = make_env(_config())
    assert PROBE_ENV["id"] == FACTORY
    assert (env.spec.obs_dim, env.spec.action_dims, env.spec.chunk_length) == (10, 2, 20)
    assert env.spec.tick_s == pytest.approx(0.02)
    assert env.spec.replans * env.spec.executed_actions == 50  # Reacher-v5's own one-second episode
    assert isinstance(make_expert(_config(), 0.0), ReacherExpert)


def test_the_noiseless_expert_puts_the_fingertip_on_the_target() -> None:
    """Over 50 seeds (docs/positive-control.md) the noiseless expert ends 0.000 cm from the target; here
    five seeds of the registered episode must all end within 1 mm."""
    config = _config()
    env, expert = make_env(config), make_expert(config, 0.0)
    records = [_episode(env, expert, seed) for seed in range(1000, 1005)]
    assert all(r.success for r in records)
    assert max(r.d_final_cm for r in records) < 0.1, [r.d_final_cm for r in records]
    assert min(r.progress_final_cm for r in records) > 5.0


def test_at_the_demo_noise_the_expert_still_reaches() -> None:
    """At the demos' noise (0.03) the mean final distance over 50 seeds is 1.0 cm; here over five seeds it
    stays below 2 cm, and the noise does move the fingertip off the noiseless end point."""
    config = _config()
    env, expert = make_env(config), make_expert(config, DEMO_NOISE)
    finals = [_episode(env, expert, seed).d_final_cm for seed in range(1000, 1005)]
    assert np.mean(finals) < 2.0, finals
    assert max(finals) > 0.01


def test_the_expert_is_deterministic_given_its_key() -> None:
    config = _config()
    env = make_env(config)
    obs = env.reset(1000)
    noisy, again = make_expert(config, 0.1), make_expert(config, 0.1)
    chunk = noisy.act(obs, (1, 1000, 0))
    assert chunk.dtype == np.float32 and chunk.shape == (20, 2) and np.abs(chunk).max() <= 1.0
    assert chunk.tobytes() == noisy.act(obs, (1, 1000, 0)).tobytes() == again.act(obs, (1, 1000, 0)).tobytes()
    assert chunk.tobytes() != noisy.act(obs, (1, 1000, 1)).tobytes()
    quiet = make_expert(config, 0.0)
    assert quiet.act(obs, (1, 1000, 0)).tobytes() == quiet.act(obs, (9, 9, 9)).tobytes()


def test_an_expert_episode_is_bit_identical_in_fresh_processes() -> None:
    code = _EPISODE.format(factory=FACTORY, params=PROBE_ENV["params"])
    digests = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    config = _config()
    here = _episode(make_env(config), make_expert(config, 0.03), 7)
    assert digests == {hashlib.sha256(here.canonical_bytes()).hexdigest()}


@pytest.mark.parametrize("elbow", [1.0, -1.0])
def test_the_inverse_kinematics_reach_the_target_on_either_elbow_branch(elbow: float) -> None:
    expert = make_expert(_config(), 0.0)
    l1, l2 = 0.1, 0.11
    for target in ([0.15, 0.05], [-0.02, 0.19], [0.03, -0.08], [-0.12, -0.12]):
        q0, q1 = expert.joint_targets(np.array(target), elbow)
        assert math.copysign(1.0, q1) == elbow
        tip = (l1 * math.cos(q0) + l2 * math.cos(q0 + q1), l1 * math.sin(q0) + l2 * math.sin(q0 + q1))
        assert tip == pytest.approx(target, abs=1e-12)


def test_a_replays_state_perturbation_turns_both_arm_joints_and_remeasures_the_spawn() -> None:
    """The probe design replays draws with the spawn's joints turned 1e-4 rad; the observation and the
    spawn distance must come from the turned arm, and a zero scale must change nothing."""
    env = make_env(_config())
    before = env.reset(1000).astype(np.float64)
    d0 = env.record().d0_cm
    after = env.perturb_state(np.random.default_rng(5), 1.0e-4).astype(np.float64)
    turned = np.arctan2(after[2:4], after[0:2]) - np.arctan2(before[2:4], before[0:2])
    assert float(np.linalg.norm(turned)) == pytest.approx(1.0e-4, rel=1e-2)
    assert np.array_equal(after[4:8], before[4:8])  # the target and the joint velocities stay
    assert env.record().d0_cm != d0
    assert abs(env.record().d0_cm - d0) < 100 * 0.21 * 1.0e-4 + 1e-9
    assert env.reset(1000).tobytes() == env.perturb_state(np.random.default_rng(5), 0.0).tobytes()


def test_the_expert_refuses_an_environment_that_is_not_reacher() -> None:
    params = GymnasiumParams(
        gym_id="Pusher-v5",
        replans=2,
        chunk_length=20,
        executed_actions=10,
        object_body="object",
        goal_body="goal",
        expert="grpo_probe.envs.reacher:ReacherExpert",
    )
    with pytest.raises(ValueError, match=r"Pusher-v5: env.params.expert: ReacherExpert drives Reacher-v5"):
        GymnasiumAdapter(params).expert(0.0)
    with pytest.raises(ValueError, match=r"expert noise must be a finite number >= 0"):
        make_expert(_config(), -0.1)


@pytest.mark.e2e
@pytest.mark.slow
def test_the_reacher_smoke_design_runs_end_to_end_and_passes_the_oracles(
    fresh_copy: Path, workflow_tools: Any, grpo_probe: Any
) -> None:
    """Every stage on prereg/designs/smoke/reacher_smoke.yaml from a fresh copy: demos from the Reacher
    expert, the flow arm trained, both oracles passing, decision.md with the adapter's guard, every manifest
    naming the environment, and the decision verifying."""
    run = workflow_tools.run_design(fresh_copy, "prereg/designs/smoke/reacher_smoke.yaml")
    decision = json.loads((run / "decision.json").read_text())
    assert (run / "decision.md").read_text().startswith("# GRPO signal probe: decision")
    version = decision["env"]["version"]
    assert decision["env"]["id"] == "Reacher-v5" and version.startswith("Reacher-v5/1 (gymnasium ")
    (cell,) = decision["cells"]
    assert cell["id"] == "c3_teacher_ode"
    assert [g["guard"] for g in cell["guards"]] == ["away_tail"]
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
        assert env["id"] == FACTORY and env["version"] == version
    verify = grpo_probe(fresh_copy, "verify", str(run.relative_to(fresh_copy) / "decision.manifest.json"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
