"""LeRobot's PushT (gym-pusht: pymunk, not MuJoCo) as a design's environment, bound through a scene function.

Why: the probe must measure simulators as their authors ship them, MuJoCo or not. gym-pusht exposes no
MuJoCo model, so prereg/pusht_smoke.yaml binds it through ``grpo_probe.envs.pusht:PushTScene``; this
holds the bound environment to Gymnasium's own checker, to the determinism the oracles need (the same
seed and actions give the same bytes, in this process, again, and in worker processes), to a keyed state
shift, and runs the design to its decision with both oracles passing (about 40 s on the 2-core machine).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

pytest.importorskip(
    "gym_pusht", reason="gym-pusht is not installed (pip install -e '.[pusht]'): no PushT to bind"
)

from gymnasium.utils.env_checker import check_env

from grpo_probe.envs.pusht import METRES_PER_PIXEL
from grpo_probe.envs.registry import make_env, make_expert
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.prereg.design import design_environment
from grpo_probe.rollout import GroupJob, PolicySource, run_parallel_oracle
from grpo_probe.rollout.perturb import Perturbation, Replay, state_generator

from .user_envs import factory_name, make_noise_policy

REPO = Path(__file__).resolve().parents[2]
DESIGN = REPO / "prereg" / "pusht_smoke.yaml"
RESULTS = Path("results/pusht_smoke")


def _config() -> Any:
    raw = yaml.safe_load(DESIGN.read_text())
    return design_environment(raw, "prereg/pusht_smoke.yaml")


def _expert_episode(seed: int) -> tuple[bytes, list[bytes]]:
    env = make_env(_config())
    expert = make_expert(_config(), 0.05)
    observations = [env.reset(seed).tobytes()]
    while not env.done:
        obs = np.frombuffer(observations[-1], np.float32)
        chunk = expert.act(obs, (13, seed, env.replan_index))
        observations.append(env.execute(chunk, env.spec.executed_actions).tobytes())
    return env.record().canonical_bytes(), observations


def test_the_designs_pusht_passes_gymnasiums_check_env_through_the_adapter() -> None:
    env = make_env(_config())
    assert (
        "gym-pusht 0.1.8" in env.spec.version and "scene grpo_probe.envs.pusht:PushTScene" in env.spec.version
    )
    assert (env.spec.obs_dim, env.spec.action_dims, env.spec.tick_s) == (5, 2, 0.1)
    with warnings.catch_warnings():
        # PushT's actions are target positions in [0, 512] pixels, which Gymnasium would rather see in [-1, 1]
        warnings.filterwarnings("ignore", message=r".*recommend using a symmetric and normalized space")
        check_env(env.env)  # the environment the adapter steps, unwrapped, as check_env asks
    env.reset(0)
    positions = env._scene.positions()
    assert positions.goal_xy == (256 * METRES_PER_PIXEL, 256 * METRES_PER_PIXEL)
    assert positions.object_xy == tuple(float(v) * METRES_PER_PIXEL for v in env.env.block.position)


def test_a_pusht_rollout_is_byte_identical_twice_and_the_expert_pushes() -> None:
    first, observations = _expert_episode(1001)
    again, observations_again = _expert_episode(1001)
    assert first == again and observations == observations_again
    env = make_env(_config())
    expert = make_expert(_config(), 0.0)
    progress = []
    for seed in range(6):
        obs = env.reset(seed)
        while not env.done:
            obs = env.execute(expert.act(obs, (0, seed, env.replan_index)), env.spec.executed_actions)
        record = env.record()
        assert record.contact and len(record.effector_x_trace_m) == env.spec.episode_ticks + 1
        progress.append(record.progress_final_cm)
    assert np.mean(progress) > 2.0, progress


def test_the_scene_shifts_the_ts_spawn_by_the_registered_scale_in_a_keyed_direction() -> None:
    env = make_env(_config())
    replay = Replay(1, 1, Perturbation("state", 1e-3))
    spawn = env.reset(1000)
    shifted = [env.perturb_state(state_generator(13, 1000, 0, replay), 1e-3)]
    moved_m = np.hypot(*(shifted[0][2:4].astype(np.float64) - spawn[2:4])) * METRES_PER_PIXEL
    assert moved_m == pytest.approx(1e-3, rel=1e-3) and shifted[0][0:2].tobytes() == spawn[0:2].tobytes()
    assert env.record().d0_cm != pytest.approx(0.0)
    env.reset(1000)
    shifted.append(env.perturb_state(state_generator(13, 1000, 0, replay), 1e-3))
    env.reset(1000)
    shifted.append(env.perturb_state(state_generator(13, 1000, 1, replay), 1e-3))
    assert shifted[0].tobytes() == shifted[1].tobytes() != shifted[2].tobytes()
    env.reset(1000)
    assert env.perturb_state(state_generator(13, 1000, 0, replay), 0.0).tobytes() == spawn.tobytes()


def test_pusht_rollouts_are_the_same_bytes_sequential_and_in_two_workers(tmp_path: Path) -> None:
    config = _config()
    spec = make_env(config).spec
    options = {"obs_dim": spec.obs_dim, "chunk_length": spec.chunk_length, "action_dims": spec.action_dims}
    source = PolicySource(factory=factory_name(make_noise_policy), options=options)
    job = GroupJob("arm_x", "cell_x", source, SamplingMode("flow_ode"), (1000, 1001), 2, 13, config)
    report = run_parallel_oracle([job], tmp_path / "oracle.json", workers=2, show_progress=False)
    assert report["pass"] and report["counts"]["ticks"] == 4 * (spec.episode_ticks + 1)


@pytest.mark.e2e
@pytest.mark.slow
def test_the_pusht_design_runs_to_its_decision_with_both_oracles_passing(
    fresh_copy: Path, workflow_tools, grpo_probe
) -> None:
    run = workflow_tools.run_design(fresh_copy, "pusht_smoke")
    assert (run / "decision.md").read_text().startswith("# GRPO signal probe: decision")
    decision = json.loads((run / "decision.json").read_text())
    assert decision["env"]["id"] == "gym_pusht:gym_pusht/PushT-v0"
    assert "scene grpo_probe.envs.pusht:PushTScene" in decision["env"]["version"]
    reports = workflow_tools.oracle_reports(run)
    assert len(reports) == 2
    for report in reports:
        assert json.loads(report.read_text())["pass"] is True, report
    replay = json.loads((run / "oracles/replay/c1_teacher_ode.json").read_text())
    assert replay["pass"] is True  # the scene's perturb at size zero gives the probe's rows back
    assert [case["replay"]["kind"] for case in replay["cases"]] == ["action", "state"]
    cell = decision["cells"][0]
    assert [p["kind"] for p in cell["replay"]["perturbations"]] == ["action", "state"]
    verify = grpo_probe(fresh_copy, "verify", str(RESULTS / "decision.manifest.json"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
