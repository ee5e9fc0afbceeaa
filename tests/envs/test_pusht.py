"""LeRobot's PushT (gym-pusht: pymunk, not MuJoCo) as a design's environment, bound through a scene function.

Why: the probe must measure simulators as their authors ship them, MuJoCo or not. gym-pusht exposes no
MuJoCo model, so prereg/designs/smoke/pusht_smoke.yaml binds it through ``grpo_probe.envs.pusht:PushTScene``;
this holds the bound environment to Gymnasium's own checker, to the determinism the oracles need (the same
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
DESIGN = REPO / "prereg/designs/smoke/pusht_smoke.yaml"
RESULTS = Path("results/pusht_smoke")


def _config() -> Any:
    raw = yaml.safe_load(DESIGN.read_text())
    return design_environment(raw, "prereg/designs/smoke/pusht_smoke.yaml")


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


_RENDER_TWICE = """
import hashlib, sys
from grpo_probe.envs.registry import make_env
from grpo_probe.prereg.design import design_environment
import yaml
config = design_environment(yaml.safe_load(open(sys.argv[1]).read()), "prereg/designs/smoke/pusht_smoke.yaml")
env = make_env(config)
env.reset(1000)
print(hashlib.sha256(env.render("top", 32, 32).tobytes()).hexdigest())
"""


def test_the_scene_draws_pushts_top_view_as_a_pure_function_of_the_state() -> None:
    """The scene function's camera path: PushT's own drawing, the same bytes twice and in a fresh
    process, following the state (the T moves, the frame changes)."""
    import hashlib
    import subprocess
    import sys

    env = make_env(_config())
    assert env.spec.cameras == ("top",)
    env.reset(1000)
    frame = env.render("top", 32, 32)
    assert frame.shape == (32, 32, 3) and frame.dtype == np.uint8 and frame.std() > 0
    assert env.render("top", 32, 32).tobytes() == frame.tobytes()
    other = make_env(_config())
    other.reset(1000)
    assert other.render("top", 32, 32).tobytes() == frame.tobytes()
    fresh = subprocess.run(
        [sys.executable, "-c", _RENDER_TWICE, str(DESIGN)], capture_output=True, text=True, check=True
    )
    assert fresh.stdout.strip() == hashlib.sha256(frame.tobytes()).hexdigest()
    expert = make_expert(_config(), 0.0)
    env.execute(expert.act(env.reset(1000), (0, 1000, 0)), env.spec.executed_actions)
    assert env.render("top", 32, 32).tobytes() != frame.tobytes(), "the frame does not follow the state"
    with pytest.raises(ValueError, match=r"no camera 'front' \(its cameras: top\)"):
        env.render("front", 32, 32)


def _camera_design(folder: Path) -> Path:
    """prereg/designs/smoke/pusht_smoke.yaml with PushT's top view registered (32 x 32) and the arm reading
    it."""
    raw = yaml.safe_load(DESIGN.read_text())
    raw["name"] = "pusht_camera"
    raw["observation"] = {"cameras": {"top": {"height": 32, "width": 32}}}
    raw["arms"]["flow_teacher"]["inputs"] = ["observation.state", "observation.images.top"]
    path = folder / "prereg" / "pusht_camera.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    (folder / "prereg" / "rules").mkdir(exist_ok=True)
    for rule in (REPO / "prereg" / "rules").glob("*.yaml"):
        (folder / "prereg" / "rules" / rule.name).write_text(rule.read_text())
    return path


def test_a_pusht_design_with_a_camera_is_valid_and_its_frames_agree_across_workers(tmp_path: Path) -> None:
    """PushT with a camera was refused (a scene function drew none); now the design checks, and a
    camera-fed arm's rollouts are the same bytes sequential and in two workers, frames digested."""
    from grpo_probe.cli import main
    from grpo_probe.prereg.design import load_prereg, lock_prereg

    from .user_envs import make_frame_policy

    path = _camera_design(tmp_path)
    lock_prereg(path)
    assert main(["prereg", "check", str(path)]) == 0
    prereg = load_prereg(path)
    spec = make_env(prereg.env).spec
    options = {"obs_dim": spec.obs_dim, "chunk_length": spec.chunk_length, "action_dims": spec.action_dims}
    source = PolicySource(factory=factory_name(make_frame_policy), options=options)
    job = GroupJob(
        "flow_teacher",
        "c1_teacher_ode",
        source,
        SamplingMode("flow_ode"),
        (1000, 1001),
        2,
        prereg.run_key,
        prereg.env,
        observation=prereg.observation,
        inputs=prereg.arms["flow_teacher"].inputs,
    )
    report = run_parallel_oracle([job], tmp_path / "oracle.json", workers=2, show_progress=False)
    assert report["pass"], report
    assert report["counts"]["ticks"] == 4 * (spec.episode_ticks + 1)
    assert report["frames"]["compared"] == 4 * spec.replans  # every replan's frame, on both sides
    digests = [d for episode in report["frames"]["sequential_sha256_per_replan"] for d in episode["sha256"]]
    assert len(set(digests)) > 1, "every frame the same: the camera does not follow the state"


@pytest.mark.e2e
@pytest.mark.slow
def test_the_pusht_design_runs_to_its_decision_with_both_oracles_passing(
    fresh_copy: Path, workflow_tools, grpo_probe
) -> None:
    run = workflow_tools.run_design(fresh_copy, "prereg/designs/smoke/pusht_smoke.yaml")
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
