"""Goal-conditioned Gymnasium environments through the adapter, on Gymnasium-Robotics' PointMaze.

Why: the goal-conditioned families (Fetch, the mazes, the Shadow hand) observe a Dict (``observation``,
``achieved_goal``, ``desired_goal``), name their goals as MuJoCo sites and ship wrapped. The adapter must
hand the policy the goal inside ``observation.state`` in a registered order, measure the distance the
environment itself reaches for (from the Dict, a site or an ``info`` key), keep every wrapper acting as
in training, refuse an observation it cannot read with an error naming the field, and stay
deterministic: the same seed and actions give the same bytes, in this process or a fresh one.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

pytest.importorskip(
    "gymnasium_robotics",
    reason="Gymnasium-Robotics is not installed (pip install -e '.[robotics]'): no PointMaze to bind",
)

import gymnasium

from grpo_probe.envs.gym_adapter import (
    GOAL_ENV_KEYS,
    GymnasiumAdapter,
    GymnasiumParams,
    make_gymnasium_env,
)
from grpo_probe.envs.point_maze import PointMazeExpert, WallContactInfo
from grpo_probe.envs.registry import EnvFactoryError, env_config, make_env, make_expert
from grpo_probe.keyed_rng import numpy_generator, tag

from .goal_envs import (
    GOAL_SHIFT_M,
    AsTuple,
    DistanceInfo,
    ShiftedGoal,
    StateOnly,
    WithPhase,
    wrapper_name,
)

REPO = Path(__file__).resolve().parents[2]
GYM_ID = "gymnasium_robotics:PointMaze_UMaze-v3"
MAZE: dict[str, Any] = {
    "gym_id": GYM_ID,
    "replans": 3,
    "chunk_length": 20,
    "executed_actions": 10,
    "object_obs_key": "achieved_goal",
    "goal_obs_key": "desired_goal",
    "success_radius_m": 0.45,
}
"""PointMaze_UMaze-v3 as prereg/designs/smoke/pointmaze_smoke.yaml binds it, without its expert and
wrapper."""
SEED = 1000


@pytest.fixture(autouse=True)
def _mazes_write_into_the_test_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mazes these tests make with ``gymnasium.make`` themselves, to compare the adapter with, write
    their scene file to the temporary folder and keep it: point that folder at the test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def _maze(**changes: Any) -> GymnasiumAdapter:
    return make_gymnasium_env(**{**MAZE, **changes})


def _chunks(env: GymnasiumAdapter, key: int) -> list[np.ndarray]:
    """One keyed chunk of normalized forces per replan (the same for every env given the same key)."""
    rng = numpy_generator(tag("test_goal_conditioned"), key)
    shape = (env.spec.chunk_length, env.spec.action_dims)
    return [rng.uniform(-0.6, 0.6, shape).astype(np.float32) for _ in range(env.spec.replans)]


def _rollout(env: GymnasiumAdapter, seed: int, chunks: list[np.ndarray]) -> tuple[bytes, bytes]:
    """Every observation's bytes and the record's bytes of one episode under ``chunks``."""
    observations = [env.reset(seed).tobytes()]
    for chunk in chunks:
        if env.done:
            break
        observations.append(env.execute(chunk, env.spec.executed_actions).tobytes())
    return b"".join(observations), env.record().canonical_bytes()


def _gym_steps(seed: int, chunks: list[np.ndarray], env: Any) -> list[dict[str, np.ndarray]]:
    """The Dict observations of Gymnasium itself, stepped with the chunks' executed actions."""
    obs, _ = env.reset(seed=seed)
    seen = [obs]
    for chunk in chunks:
        for action in chunk[:10]:
            obs, *_ = env.step(action)
            seen.append(obs)
    return seen


# -- Dict observations -> observation.state ------------------------------------------------------------
def test_a_goal_conditioned_dict_becomes_observation_state_in_the_registered_order() -> None:
    env = _maze()
    assert env.state_layout == (("observation", 0, 4), ("achieved_goal", 4, 6), ("desired_goal", 6, 8))
    assert tuple(key for key, _, _ in env.state_layout) == GOAL_ENV_KEYS
    assert (env.spec.obs_dim, env.spec.action_dims, env.spec.tick_s) == (8, 2, 0.01)
    assert env.spec.observation_keys == ("observation.state",)
    chunks = _chunks(env, 1)
    raw = _gym_steps(SEED, chunks, gymnasium.make(GYM_ID))
    states = [env.reset(SEED)] + [env.execute(c, 10) for c in chunks]
    assert len(states) == len(raw) // 10 + 1
    for state, obs in zip(states, raw[::10], strict=True):
        expected = np.concatenate([obs[k] for k in GOAL_ENV_KEYS]).astype(np.float32)
        assert state.dtype == np.float32 and state.tobytes() == expected.tobytes()


def test_obs_keys_choose_the_entries_and_their_order() -> None:
    env = _maze(obs_keys=["desired_goal", "observation"])
    assert env.state_layout == (("desired_goal", 0, 2), ("observation", 2, 6))
    assert env.spec.obs_dim == 6
    state = env.reset(SEED)
    obs, _ = gymnasium.make(GYM_ID).reset(seed=SEED)
    assert (
        state.tobytes()
        == np.concatenate([obs["desired_goal"], obs["observation"]]).astype(np.float32).tobytes()
    )


def test_the_distance_from_the_dict_is_the_environments_own() -> None:
    env = _maze()
    chunks = _chunks(env, 2)
    raw = _gym_steps(SEED, chunks, gymnasium.make(GYM_ID))
    env.reset(SEED)
    for chunk in chunks:
        env.execute(chunk, 10)
    row = env.record().to_row()
    own = [100.0 * float(np.linalg.norm(o["achieved_goal"] - o["desired_goal"])) for o in raw]
    assert row["distance_trace_cm"] == pytest.approx(own, rel=0, abs=1e-12)
    assert (row["goal_x_m"], row["goal_y_m"]) == tuple(raw[-1]["desired_goal"].tolist())
    assert row["object_x_trace_m"] == [float(o["achieved_goal"][0]) for o in raw]
    assert row["n_ticks"] == 30 and row["progress_final_cm"] == pytest.approx(own[0] - own[-1], abs=1e-9)


# -- sites and info keys -------------------------------------------------------------------------------
def test_a_goal_site_is_measured_where_the_maze_put_its_target() -> None:
    env = _maze(object_obs_key=None, goal_obs_key=None, object_body="particle", goal_site="target")
    env.reset(SEED)
    obs, _ = gymnasium.make(GYM_ID).reset(seed=SEED)
    record = env.record()
    assert (record.goal_x_m, record.goal_y_m) == pytest.approx(tuple(obs["desired_goal"]), abs=1e-12)
    assert record.d0_cm == pytest.approx(
        100.0 * float(np.linalg.norm(obs["achieved_goal"] - obs["desired_goal"])), abs=1e-10
    )
    site = _maze(object_obs_key=None, object_site="particle_site", goal_obs_key=None, goal_site="target")
    site.reset(SEED)
    assert site.record().d0_cm == pytest.approx(record.d0_cm, abs=1e-12)


def test_the_distance_may_come_from_a_registered_info_key() -> None:
    env = _maze(wrappers=[wrapper_name(DistanceInfo)], distance_info_key="distance_m", distance_scale=2.0)
    chunks = _chunks(env, 3)
    raw = _gym_steps(SEED, chunks, gymnasium.make(GYM_ID))
    env.reset(SEED)
    for chunk in chunks:
        env.execute(chunk, 10)
    own = [200.0 * float(np.linalg.norm(o["achieved_goal"] - o["desired_goal"])) for o in raw]
    assert env.record().distance_trace_cm == pytest.approx(own, rel=1e-12, abs=1e-12)


def test_an_info_key_the_reset_does_not_report_is_an_error_naming_the_field() -> None:
    env = _maze(distance_info_key="distance_m")
    with pytest.raises(ValueError, match=r"reset\(\) returned no info\['distance_m'\].*distance_info_key"):
        env.reset(SEED)


# -- wrappers stay on ----------------------------------------------------------------------------------
def test_the_made_wrappers_stay_on_and_the_time_limit_is_the_registered_episode() -> None:
    env = _maze()
    chain = []
    layer = env.wrapped
    while layer is not env.env:
        chain.append(type(layer).__name__)
        layer = layer.env
    assert chain == ["TimeLimit", "OrderEnforcing", "PassiveEnvChecker"]
    assert env.wrapped.spec.max_episode_steps == 30  # not PointMaze's 300: 3 replans x 10 ticks
    assert "wrappers TimeLimit > OrderEnforcing > PassiveEnvChecker" in env.spec.version
    assert "gymnasium-robotics 1.4.2" in env.spec.version


def test_a_shorter_time_limit_ends_the_episode_where_gymnasium_truncates_it() -> None:
    env = _maze(gym_kwargs={"max_episode_steps": 15})
    env.reset(SEED)
    chunks = _chunks(env, 4)
    env.execute(chunks[0], 10)
    assert not env.done
    env.execute(chunks[1], 10)  # truncated at tick 15, half way through the chunk
    assert env.done and env.replan_index == 2
    record = env.record()
    assert record.n_ticks == 15 and len(record.distance_trace_cm) == 16


def test_an_observation_wrapper_stays_on_by_name_or_around_your_own_env() -> None:
    named = _maze(wrappers=[wrapper_name(ShiftedGoal)])
    yours = GymnasiumAdapter(
        GymnasiumParams.from_dict(MAZE), env=ShiftedGoal(gymnasium.make(GYM_ID, max_episode_steps=30))
    )
    plain = _maze()
    chunks = _chunks(plain, 5)
    for env in (named, yours):
        assert "ShiftedGoal" in env.spec.version
        shifted, base = env.reset(SEED), plain.reset(SEED)
        assert shifted[6:8].tobytes() == (base[6:8] + np.float32(GOAL_SHIFT_M)).tobytes()
        assert shifted[:6].tobytes() == base[:6].tobytes()
        for chunk in chunks:
            shifted, base = env.execute(chunk, 10), plain.execute(chunk, 10)
            assert shifted[6:8].tobytes() == (base[6:8] + np.float32(GOAL_SHIFT_M)).tobytes()
        # the distance is read from the wrapped observation: to the shifted goal
        assert env.record().d_final_cm > 100.0 * GOAL_SHIFT_M
        assert env.record().goal_x_m == pytest.approx(plain.record().goal_x_m + GOAL_SHIFT_M, abs=1e-12)


def test_an_info_wrapper_feeds_a_guard_channel() -> None:
    env = _maze(
        wrappers=["grpo_probe.envs.point_maze:WallContactInfo"], guard_info_keys={"wall_hit": "wall_contact"}
    )
    assert env.spec.guard_names == ("away_tail", "wall_hit")
    assert isinstance(env.wrapped, WallContactInfo)
    env.reset(SEED)
    push = np.zeros((20, 2), dtype=np.float32)
    push[:, 0] = 1.0  # full force toward +x: the ball (spawned in the right arm) runs into the outer wall
    while not env.done:
        env.execute(push, 10)
    assert env.record().to_row()["wall_hit"] is True
    env.reset(SEED)
    env.execute(np.zeros((20, 2), dtype=np.float32), 10)
    assert env.record().to_row()["wall_hit"] is False


def test_a_factory_env_takes_no_gym_kwargs() -> None:
    with pytest.raises(ValueError, match=r"env.params.gym_kwargs: the environment was built by your factory"):
        GymnasiumAdapter(
            GymnasiumParams.from_dict({**MAZE, "gym_kwargs": {"continuing_task": False}}),
            env=gymnasium.make(GYM_ID),
        )


# -- what the adapter cannot read, named -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"wrappers": [wrapper_name(StateOnly)], "goal_obs_key": None, "goal_site": "target"},
            r"env.params.obs_keys: the observation space is a Dict with entries observation; list the ones",
        ),
        (
            {"obs_keys": ["observation", "goal"]},
            r"env.params.obs_keys\[1\]: the observation Dict has no entry 'goal' \(its entries: ",
        ),
        (
            {"wrappers": [wrapper_name(WithPhase)], "obs_keys": ["observation", "phase"]},
            r"env.params.obs_keys\[1\]: observation entry 'phase' is Discrete\(3\); observation.state "
            r"concatenates Box entries only",
        ),
        (
            {"wrappers": [wrapper_name(AsTuple)], "object_obs_key": None, "goal_obs_key": None}
            | {"object_body": "particle", "goal_site": "target"},
            r"env.params.gym_id: the observation space is Tuple\(.*\); the adapter reads a 1-D Box, or a "
            r"Dict of Box entries \(env.params.obs_keys\)",
        ),
        (
            {"goal_obs_key": "goal"},
            r"env.params.goal_obs_key: the observation Dict has no entry 'goal'",
        ),
        (
            {"goal_obs_key": None, "goal_site": "no_such_site"},
            r"no MuJoCo site named 'no_such_site' \(env.params.goal_site\)",
        ),
        (
            {"wrappers": ["grpo_probe.envs.no_such_module:Wrapper"]},
            r"env.params.wrappers\[0\]: cannot import module 'grpo_probe.envs.no_such_module'",
        ),
    ],
    ids=[
        "dict-without-goals",
        "unknown-entry",
        "discrete-entry",
        "tuple",
        "unknown-goal-entry",
        "site",
        "wrapper",
    ],
)
def test_an_observation_the_adapter_cannot_read_is_an_error_naming_the_field(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        _maze(**changes)


def test_a_box_observation_takes_no_obs_keys() -> None:
    with pytest.raises(ValueError, match=r"env.params.obs_keys: the observation space is a Box, not a Dict"):
        make_gymnasium_env(
            gym_id="Reacher-v5",
            replans=1,
            chunk_length=10,
            executed_actions=5,
            object_body="fingertip",
            goal_body="target",
            obs_keys=["observation"],
        )
    with pytest.raises(ValueError, match=r"env.params.object_obs_key: the observation space is Box"):
        make_gymnasium_env(
            gym_id="Reacher-v5",
            replans=1,
            chunk_length=10,
            executed_actions=5,
            object_obs_key="achieved_goal",
            goal_body="target",
        )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"goal_site": "target"},
            r"name the goal exactly once, as one of goal_body, goal_site, goal_obs_key "
            r"\(got goal_site, goal_obs_key\)",
        ),
        ({"object_obs_key": None}, r"name the object exactly once, .* \(got none\)"),
        ({"obs_keys": "observation"}, r"env.params.obs_keys must be a list of observation entry names"),
        ({"obs_keys": ["observation", "observation"]}, r"env.params.obs_keys must be distinct entry names"),
        (
            {"wrappers": ["ShiftedGoal"]},
            r"env.params.wrappers: 'ShiftedGoal' is not a 'module:callable' name",
        ),
        (
            {"expert": "point_maze.Expert"},
            r"env.params.expert: 'point_maze.Expert' is not a 'module:callable'",
        ),
        ({"goal_site": ""}, r"env.params.goal_site must be a non-empty string"),
    ],
)
def test_the_params_are_checked_before_anything_is_built(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GymnasiumParams.from_dict({**MAZE, **changes})


def test_an_id_no_package_registered_names_the_module_to_import() -> None:
    with pytest.raises(
        ValueError, match=r"env.params.gym_id: Gymnasium cannot make it .*'gymnasium_robotics:"
    ):
        _maze(gym_id="PointMaze_NoSuchMaze-v3")
    with pytest.raises(ValueError, match=r"env.params.gym_id: cannot import the module that registers it"):
        _maze(gym_id="no_such_robotics_package:PointMaze_UMaze-v3")


def test_a_state_perturbation_is_refused_where_the_observation_cannot_be_rebuilt() -> None:
    with pytest.raises(ValueError, match=r"env.params.perturb_joints: PointMazeEnv builds its observation"):
        _maze(perturb_joints=["ball_x", "ball_y"])


# -- determinism ---------------------------------------------------------------------------------------
_EPISODE = """
import hashlib, sys
import numpy as np
from grpo_probe.envs.gym_adapter import make_gymnasium_env
from grpo_probe.keyed_rng import numpy_generator, tag
env = make_gymnasium_env(**{params!r})
rng = numpy_generator(tag("test_goal_conditioned"), 6)
h = hashlib.sha256(env.reset({seed}).tobytes())
while not env.done:
    h.update(env.execute(rng.uniform(-0.6, 0.6, (20, 2)).astype(np.float32), 10).tobytes())
h.update(env.record().canonical_bytes())
sys.stdout.write(h.hexdigest())
"""


def test_two_rollouts_of_one_seed_give_identical_observation_bytes() -> None:
    first, second = _maze(), _maze()
    chunks = _chunks(first, 6)
    a = _rollout(first, SEED, chunks)
    _rollout(first, SEED + 1, chunks)  # another episode in between changes nothing
    assert _rollout(first, SEED, chunks) == a == _rollout(second, SEED, chunks)
    assert _rollout(second, SEED + 1, chunks)[0] != a[0]
    # a fresh process (its own Gymnasium registry, MuJoCo model and maze file) gives the same bytes
    code = _EPISODE.format(params=MAZE, seed=SEED)
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert fresh == hashlib.sha256(a[0] + a[1]).hexdigest()


def test_the_maze_leaves_no_scene_file_in_the_temporary_folder(tmp_path: Path) -> None:
    """Gymnasium-Robotics writes each maze's scene to the temporary folder and keeps it; the adapter
    removes it once the model is built, and the environment runs the same episodes without it."""
    assert tempfile.gettempdir() == str(tmp_path)  # the module's fixture
    bare = gymnasium.make(GYM_ID)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 1 and left[0].startswith("ant_maze"), left  # what the adapter has to clean up
    bare.close()
    (tmp_path / left[0]).unlink()
    env = _maze()
    assert list(tmp_path.iterdir()) == []
    chunks = _chunks(env, 6)
    first = _rollout(env, SEED, chunks)
    _rollout(env, SEED + 1, chunks)  # a reset that moves the goal reads no file either
    assert _rollout(env, SEED, chunks) == first
    assert list(tmp_path.iterdir()) == []


# -- the scripted expert -------------------------------------------------------------------------------
def _expert_env() -> GymnasiumAdapter:
    return _maze(
        replans=8, chunk_length=50, executed_actions=25, expert="grpo_probe.envs.point_maze:PointMazeExpert"
    )


def test_the_expert_reaches_the_goal_through_the_maze() -> None:
    env = _expert_env()
    expert = env.expert(0.05)
    records = []
    for seed in range(6):
        obs = env.reset(seed)
        while not env.done:
            obs = env.execute(expert.act(obs, (0, seed, env.replan_index)), 25)
        records.append(env.record())
    assert all(r.success for r in records), [r.d_final_cm for r in records]
    assert min(r.progress_final_cm for r in records) > 50.0


def test_the_expert_is_offered_through_the_registry_and_its_noise_is_keyed() -> None:
    config = env_config(
        "grpo_probe.envs.gym_adapter:make_gymnasium_env",
        {**MAZE, "expert": "grpo_probe.envs.point_maze:PointMazeExpert"},
    )
    expert = make_expert(config, 0.1)
    assert isinstance(expert, PointMazeExpert)
    env = make_env(config)
    obs = env.reset(SEED)
    chunk = expert.act(obs, (1, SEED, 0))
    assert chunk.dtype == np.float32 and chunk.shape == (20, 2) and np.abs(chunk).max() <= 1.0
    assert chunk.tobytes() == expert.act(obs, (1, SEED, 0)).tobytes()
    assert chunk.tobytes() != expert.act(obs, (1, SEED, 1)).tobytes()
    quiet = make_expert(config, 0.0)
    assert quiet.act(obs, (1, SEED, 0)).tobytes() == quiet.act(obs, (9, 9, 9)).tobytes()


def test_without_an_expert_the_registry_says_how_to_bind_checkpoints() -> None:
    config = env_config("grpo_probe.envs.gym_adapter:make_gymnasium_env", MAZE)
    with pytest.raises(EnvFactoryError, match=r"offers no scripted expert .* bind every arm to a checkpoint"):
        make_expert(config, 0.0)


def test_the_expert_needs_the_goal_in_the_state() -> None:
    env = _maze(obs_keys=["observation"], expert="grpo_probe.envs.point_maze:PointMazeExpert")
    with pytest.raises(ValueError, match=r"env.params.obs_keys: PointMazeExpert reads 'desired_goal'"):
        env.expert(0.0)


# -- the guide -----------------------------------------------------------------------------------------
def test_the_guide_shows_the_point_maze_designs_environment() -> None:
    """Text no test reads drifts: the guide's example is prereg/designs/smoke/pointmaze_smoke.yaml's env
    section."""
    guide = (REPO / "docs/your-simulator.md").read_text()
    section = guide.split("### Goal-conditioned Gymnasium envs", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, flags=re.S)
    design = yaml.safe_load((REPO / "prereg/designs/smoke/pointmaze_smoke.yaml").read_text())
    assert yaml.safe_load(block) == {"env": design["env"]}
    rows = [line.split(" | ")[0] for line in section.splitlines() if line.startswith("| `")]
    documented = {name for row in rows for name in re.findall(r"`([a-z_]+)`", row)}
    goal_params = {"obs_keys", "object_site", "object_obs_key", "goal_site", "goal_obs_key", "effector_site"}
    assert documented >= goal_params | {"distance_info_key", "wrappers", "gym_kwargs", "expert"}
