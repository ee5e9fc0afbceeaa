"""gym-aloha, served from its own environment: what binds, what replays, what it lacks.

Why: gym-aloha 0.1.5 runs MuJoCo through dm_control and needs ``mujoco>=3.0,<3.9``, so it cannot live in
the probe's environment (mujoco 4.0.0). This test builds its venv with the script a lab runs
(``tools/make_sim_venv.sh aloha``, cached under .venvs/), serves ``grpo_probe.serve.aloha_env`` from it,
and holds what docs/your-simulator-served.md says of it: the insertion and transfer tasks bind with the
state as the observation and the model's named cameras; a seeded episode (its record and its frames)
replays bit for bit on another connection, in a reused environment and behind a restarted server; the
scene says when the peg touches a gripper; and no scripted expert comes with it.

Opt-in (``GRPO_PROBE_SIM_VENV=1``, which `.ci/run` sets): the first build downloads gym-aloha, dm_control
and MuJoCo 3.3.0 from the package index (under a minute here); it skips, with the reason, when not asked.
"""

from __future__ import annotations

import hashlib
import subprocess

import numpy as np
import pytest

from grpo_probe.envs.served import ServedEnvError, served_env, served_env_config
from serve_processes import env_server_process, sim_venv_python

pytestmark = pytest.mark.slow

FACTORY = "grpo_probe.serve.aloha_env:make"
SCENE = "grpo_probe.serve.aloha_env:scene"
INSERTION = "gym_aloha/AlohaInsertion-v0"
TRANSFER = "gym_aloha/AlohaTransferCube-v0"
PARAMS = {"replans": 3, "chunk_length": 10, "executed_actions": 5, "success_radius_m": 0.02}
CAMERAS = (
    "left_pillar",
    "right_pillar",
    "top",
    "angle",
    "front_close",
    "left_wrist",
    "right_wrist",
    "default",
)
"""gym-aloha's scene's named cameras in model order, then the free camera."""


@pytest.fixture(scope="module")
def aloha_python() -> str:
    return sim_venv_python("aloha")


@pytest.fixture(scope="module")
def server(aloha_python: str, tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("aloha") / "server.log"
    with env_server_process(aloha_python, FACTORY, log, scene=SCENE) as (address, _):
        yield address


def _bind(address: str, gym_id: str = INSERTION):
    section = {"source": "server", "address": address, "params": {"gym_id": gym_id, **PARAMS}}
    return served_env(**served_env_config(section, "design.yaml: env"))


def _episode(env, seed: int) -> tuple[bytes, list[str]]:
    """The record's bytes and the digest of the ``top`` and ``left_wrist`` frames at every replan."""
    env.reset(seed)
    rng = np.random.default_rng(seed)
    frames = []
    while True:
        for camera in ("top", "left_wrist"):
            frames.append(hashlib.sha256(env.render(camera, 48, 64).tobytes()).hexdigest())
        if env.done:
            return env.record().canonical_bytes(), frames
        env.execute(rng.uniform(-0.3, 0.3, (10, env.spec.action_dims)).astype(np.float32), 5)


def test_insertion_binds_with_the_state_and_the_models_cameras_and_no_expert(server):
    env = _bind(server)
    spec = env.spec
    assert (spec.obs_dim, spec.action_dims, spec.tick_s) == (42, 14, 0.02)
    assert spec.cameras == CAMERAS
    assert spec.version.startswith(f"{INSERTION}/1 (served: gym_aloha.env:AlohaEnv from {FACTORY}")
    assert "gym-aloha 0.1.5, dm-control 1.0.28, mujoco 3.3.0" in spec.version
    assert not hasattr(env, "expert"), "gym-aloha ships no scripted expert, and the scene offers none"
    env.reset(0)
    for camera in CAMERAS:
        frame = env.render(camera, 24, 32)
        assert frame.shape == (24, 32, 3) and frame.std() > 0, camera
    env.close()


def test_a_seeded_episode_replays_bit_for_bit_and_the_seed_places_the_objects(aloha_python, server, tmp_path):
    first, other = _bind(server), _bind(server)
    episode = _episode(first, 4)
    assert _episode(other, 4) == episode, "another connection (another environment) gave other bytes"
    assert _episode(first, 4) == episode, "a reused environment gave other bytes"
    assert _episode(first, 5) != episode, "the seed does not show"
    with env_server_process(aloha_python, FACTORY, tmp_path / "server.log", scene=SCENE) as (address, _):
        assert _episode(_bind(address), 4) == episode, "a restarted server gave other bytes"
    for seed in range(4):  # gym-aloha's spawn ranges: the peg at x 0.1..0.2, the socket at -0.2..-0.1
        first.reset(seed)
        record = first.record()
        assert 0.1 <= record.object_x_trace_m[0] <= 0.2 and 0.4 <= record.object_y_trace_m[0] <= 0.6
        assert -0.2 <= record.goal_x_m <= -0.1 and 0.4 <= record.goal_y_m <= 0.6
    first.close()
    other.close()


def test_the_transfer_task_binds_and_an_unknown_task_is_refused_naming_the_served_ones(server):
    env = _bind(server, TRANSFER)
    env.reset(2)
    record = env.record()
    assert 0.0 <= record.object_x_trace_m[0] <= 0.2 and 0.4 <= record.object_y_trace_m[0] <= 0.6
    assert record.goal_x_m < 0, "the goal is the left gripper's grasp point"
    env.close()
    with pytest.raises(ServedEnvError, match=r"gym-aloha has no served task 'gym_aloha/AlohaPour-v0'"):
        _bind(server, "gym_aloha/AlohaPour-v0")


_ENGAGED = """
from grpo_probe.serve.aloha_env import make, scene
env = make("gym_aloha/AlohaInsertion-v0")
found = scene(env)
env.reset(seed=0)
physics = env.unwrapped._env.physics
print(found.engaged({}))
physics.data.qpos[16:19] = physics.named.data.xpos["vx300s_right/left_finger_link"]  # the peg into a finger
physics.forward()
print(found.engaged({}))
"""


def test_the_scene_says_the_peg_is_engaged_when_it_touches_a_gripper(aloha_python):
    done = subprocess.run(
        [aloha_python, "-c", _ENGAGED], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False", "True"]
