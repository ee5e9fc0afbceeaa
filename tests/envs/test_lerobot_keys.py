"""LeRobot's observation keys as a registered option: the agent's state, the environment's, and the cameras.

Why: a LeRobot policy reads ``observation.state`` (the agent's own state), ``observation.environment_state``
(the object, the goal) and ``observation.images.<camera>``, not one packed state. A design registers the
split (``observation.convention: lerobot``, which entries are whose); the policy must see exactly those
three keys, cut from the state the environment returns, every array it saw must be in the oracles'
per-replan digest, the project's own heads (cloned on the packed state) must still run, and a design that
asks for the convention without saying which entries are whose is refused with its file and field. The
design is prereg/designs/smoke/pointmaze_smoke.yaml with an observation section of LeRobot's keys and a 32 x
32 camera.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from grpo_probe.envs.gym_adapter import GymnasiumAdapter  # first: it chooses MUJOCO_GL before MuJoCo loads

pytest.importorskip(
    "gymnasium_robotics",
    reason="Gymnasium-Robotics is not installed (pip install -e '.[robotics]'): no PointMaze to bind",
)

from grpo_probe.envs.demos import collect_env_demos
from grpo_probe.envs.observation import (
    OBSERVATION_ENVIRONMENT_STATE,
    OBSERVATION_STATE,
    image_key,
    observation_sha256,
)
from grpo_probe.envs.registry import env_spec, make_env
from grpo_probe.policies.check import check_policy
from grpo_probe.policies.checkpoint import load_policy
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.policies.train import train_arm
from grpo_probe.prereg.design import load_prereg, lock_prereg
from grpo_probe.probe_jobs.prepare import prereg_check
from grpo_probe.rollout import GroupJob, PolicySource, run_parallel_oracle
from grpo_probe.rollout.engine import run_sequential
from grpo_probe.rollout.lockstep import run_lockstep

from .lerobot_policies import ThreeKeyPolicy, make_three_key_policy
from .user_envs import factory_name

REPO = Path(__file__).resolve().parents[2]
CAMERA = "default"
INPUTS = [OBSERVATION_STATE, OBSERVATION_ENVIRONMENT_STATE, image_key(CAMERA)]
LEROBOT = {
    "convention": "lerobot",
    "state": ["observation"],
    "environment_state": ["achieved_goal", "desired_goal"],
    "cameras": {CAMERA: {"height": 32, "width": 32}},
}


def _variant(folder: Path, observation: dict[str, Any] | None = None, inputs: list[str] = INPUTS) -> Path:
    """prereg/designs/smoke/pointmaze_smoke.yaml with LeRobot's keys (or ``observation``) and the arm
    reading ``inputs``."""
    raw = yaml.safe_load((REPO / "prereg/designs/smoke/pointmaze_smoke.yaml").read_text())
    raw["name"] = "pointmaze_lerobot"
    raw["observation"] = LEROBOT if observation is None else observation
    raw["arms"]["flow_teacher"]["inputs"] = list(inputs)
    path = folder / "prereg" / "pointmaze_lerobot.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _job(prereg: Any, source: PolicySource) -> GroupJob:
    return GroupJob(
        "flow_teacher",
        "c3_teacher_ode",
        source,
        SamplingMode("flow_ode", steps=10),
        (1000, 1001),
        2,
        prereg.run_key,
        prereg.env,
        observation=prereg.observation,
        inputs=prereg.arms["flow_teacher"].inputs,
    )


def _three_key_source(prereg: Any) -> PolicySource:
    spec = env_spec(prereg.env)
    options = {
        "obs_dim": 4,
        "environment_dim": 4,
        "camera": CAMERA,
        "chunk_length": spec.chunk_length,
        "action_dims": spec.action_dims,
    }
    return PolicySource(factory=factory_name(make_three_key_policy), options=options)


def test_asking_for_lerobot_keys_without_saying_which_entries_are_whose_is_refused(tmp_path: Path) -> None:
    half = {k: v for k, v in LEROBOT.items() if k != "environment_state"}
    with pytest.raises(
        ValueError, match=r"pointmaze_lerobot\.yaml: observation\.environment_state: convention: "
    ):
        load_prereg(_variant(tmp_path, half), require_lock=False)
    packed = {"cameras": LEROBOT["cameras"]}
    with pytest.raises(
        ValueError,
        match=r"pointmaze_lerobot\.yaml: .*arms\.flow_teacher\.inputs reads "
        r"'observation\.environment_state', but the design registers no split",
    ):
        load_prereg(_variant(tmp_path, packed), require_lock=False)
    wrong = {**LEROBOT, "state": ["velocity"]}
    path = _variant(tmp_path, wrong)
    lock_prereg(path)
    with pytest.raises(ValueError) as caught:
        prereg_check(path, tmp_path / "check.manifest.json")
    message = str(caught.value)
    assert "pointmaze_lerobot.yaml: observation.state: environment " in message
    assert "has no state entry 'velocity' (its entries: observation, achieved_goal, desired_goal)" in message
    assert "entry 'observation' of environment" in message  # named in neither part


def test_prereg_check_refuses_an_unknown_state_entry_with_the_workflows_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``grpo-probe prereg check`` builds the environment as the workflow's first rule does: it must not say
    "valid" for a split the workflow then refuses, and its words (file, field) must be the rule's."""
    from grpo_probe.cli import main

    path = _variant(tmp_path, {**LEROBOT, "state": ["velocity"]})
    lock_prereg(path)
    with pytest.raises(ValueError) as caught:
        prereg_check(path, tmp_path / "check.manifest.json")
    capsys.readouterr()
    assert main(["prereg", "check", str(path)]) == 2
    printed = capsys.readouterr()
    assert "valid" not in printed.out
    assert printed.err == f"grpo-probe: error: {caught.value}\n"
    assert f"{path}: observation.state: environment " in printed.err
    assert "has no state entry 'velocity'" in printed.err
    good = _variant(tmp_path / "good")
    lock_prereg(good)
    assert main(["prereg", "check", str(good)]) == 0
    assert "valid and locked" in capsys.readouterr().out


def test_the_policy_sees_the_three_keys_cut_from_the_state_and_the_digest_covers_them(
    tmp_path: Path, headless_gl: None
) -> None:
    prereg = load_prereg(_variant(tmp_path), require_lock=False)
    spec = env_spec(prereg.env)
    assert isinstance(make_env(prereg.env), GymnasiumAdapter)
    assert [name for name, _, _ in spec.state_entries] == ["observation", "achieved_goal", "desired_goal"]
    policy = make_three_key_policy(**_three_key_source(prereg).options)
    env = make_env(prereg.env)
    packed = env.reset(1000)
    ThreeKeyPolicy.seen.clear()
    seen: list[dict[str, np.ndarray]] = []
    act = policy.act
    policy.act = lambda obs, keys, mode: (
        seen.append({k: np.array(obs[k]) for k in obs}),
        act(obs, keys, mode),
    )[1]
    job = _job(prereg, _three_key_source(prereg))
    (result,) = run_lockstep(
        policy,
        [env],
        [job.episodes()[0]],
        run_key=job.run_key,
        mode=job.mode,
        observation=prereg.observation,
        inputs=job.inputs,
    )
    assert [sorted(s) for s in ThreeKeyPolicy.seen] == [sorted(INPUTS)] * spec.replans
    first = seen[0]
    assert first[OBSERVATION_STATE].shape == (1, 4) and first[OBSERVATION_ENVIRONMENT_STATE].shape == (1, 4)
    assert first[image_key(CAMERA)].shape == (1, 32, 32, 3) and first[image_key(CAMERA)].dtype == np.uint8
    assert first[OBSERVATION_STATE][0].tobytes() == packed[0:4].tobytes()  # x, y, vx, vy
    assert first[OBSERVATION_ENVIRONMENT_STATE][0].tobytes() == packed[4:8].tobytes()  # achieved, desired
    assert result.frame_sha256 is not None and len(result.frame_sha256) == spec.replans
    assert result.frame_sha256[0] == observation_sha256({k: v[0] for k, v in first.items()})
    without_goal = {
        **{k: v[0] for k, v in first.items()},
        OBSERVATION_ENVIRONMENT_STATE: np.zeros(4, np.float32),
    }
    assert result.frame_sha256[0] != observation_sha256(without_goal)


def test_a_run_in_lerobot_keys_is_the_same_bytes_sequential_and_in_two_workers(
    tmp_path: Path, headless_gl: None
) -> None:
    prereg = load_prereg(_variant(tmp_path), require_lock=False)
    job = _job(prereg, _three_key_source(prereg))
    report = run_parallel_oracle([job], tmp_path / "oracle.json", workers=2, show_progress=False)
    assert report["pass"] and report["counts"]["frames"] == 4 * env_spec(prereg.env).replans
    again = run_sequential(job)
    assert [r.frame_sha256 for r in again] == [r.frame_sha256 for r in run_sequential(job)]


def test_the_projects_own_camera_head_reads_the_packed_state_under_lerobot_keys(
    tmp_path: Path, headless_gl: None
) -> None:
    prereg = load_prereg(_variant(tmp_path), require_lock=False)
    spec = env_spec(prereg.env)
    camera = prereg.observation.camera(CAMERA)
    demos = collect_env_demos(prereg.env, [0, 1], 0.05, prereg.run_key, cameras=[camera])
    tiny = {"steps": 2, "warmup_steps": 1, "hidden": 32, "n_layers": 1, "batch_size": 4, "channels": 4}
    checkpoint = tmp_path / "flow.ckpt"
    train_arm(
        "flow",
        demos,
        checkpoint,
        tiny,
        chunk_shape=(spec.chunk_length, spec.action_dims),
        inputs=prereg.arms["flow_teacher"].inputs,
    )
    policy = load_policy(checkpoint)
    assert policy.obs_dim == spec.obs_dim == 8  # cloned on the packed state, as the demos hold it
    job = _job(prereg, PolicySource(checkpoint=str(checkpoint)))
    first, second = run_sequential(job, policy=policy), run_sequential(job, policy=load_policy(checkpoint))
    assert all(r.frame_sha256 is not None for r in first)
    assert [r.executed_actions.tobytes() for r in first] == [r.executed_actions.tobytes() for r in second]
    assert [r.frame_sha256 for r in first] == [r.frame_sha256 for r in second]


def test_check_policy_hands_a_lerobot_policy_the_split_as_the_engine_does(tmp_path: Path) -> None:
    prereg = load_prereg(_variant(tmp_path), require_lock=False)
    spec = env_spec(prereg.env)
    split = prereg.observation.split(spec.state_entries, spec.id)
    env = make_env(prereg.env)
    states = np.stack([env.reset(seed) for seed in (1000, 1001, 1002)])
    common = {
        "action_shape": (spec.chunk_length, spec.action_dims),
        "modes": [SamplingMode("flow_ode", steps=10)],
        "states": states,
        "seeds": [1000, 1001, 1002],
        "obs_dim": spec.obs_dim,
        "inputs": INPUTS,
        "observation": prereg.observation,
    }
    policy = make_three_key_policy(**_three_key_source(prereg).options)
    report = check_policy(policy, split=split, **common)
    assert report.passed, report.format()
    assert check_policy(make_three_key_policy(**_three_key_source(prereg).options), **common).passed is False
