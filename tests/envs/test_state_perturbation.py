"""``perturb_state``: the spawn moved by exactly the registered scale, in a keyed direction, re-measured.

Why: a state replay is "the same choices, a hair's breadth elsewhere". The hair's breadth must be the
registered one (not more, not less), its direction a pure function of the replay's key (or replays are
not reproducible), the episode's metrics measured from the shifted spawn (or progress mixes two
spawns), and size zero must move nothing at all (the unperturbed replay oracle relies on it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.gym_adapter import GymnasiumAdapter, GymnasiumParams
from grpo_probe.envs.pusher.spec import PusherParams
from grpo_probe.envs.registry import EnvConfig, boat_env, make_env
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.prereg.replay import Perturbation
from grpo_probe.rollout import EpisodeSpec, run_lockstep
from grpo_probe.rollout.perturb import Replay, state_generator

from .user_envs import make_noise_policy

SEED = 7


def _key(*parts: int) -> np.random.Generator:
    return numpy_generator(tag("test_state_perturbation"), *parts)


def _boat() -> Any:
    return make_env(boat_env(SimParams(replans=2, executed_actions=10)))


def _pusher() -> Any:
    return make_env(EnvConfig("pusher", PusherParams(replans=2, executed_actions=5)))


def _reacher(**changes: Any) -> GymnasiumAdapter:
    """Reacher-v5 as examples/my_gym_env.py adapts it; cheap to build and step."""
    fields = {
        "gym_id": "Reacher-v5",
        "replans": 2,
        "chunk_length": 50,
        "executed_actions": 5,
        "object_body": "fingertip",
        "goal_body": "target",
        "success_radius_m": 0.01,
        **changes,
    }
    return GymnasiumAdapter(GymnasiumParams(**fields))


def _reacher_with_target_joints() -> GymnasiumAdapter:
    return _reacher(perturb_joints=("target_x", "target_y"))


ENVS: dict[str, Callable[[], Any]] = {
    "boat": _boat,
    "pusher": _pusher,
    "reacher-target": _reacher_with_target_joints,
}


def _zero_chunk(env: Any) -> np.ndarray:
    return np.zeros((env.spec.chunk_length, env.spec.action_dims), dtype=np.float32)


def _spawn(env: Any) -> tuple[np.ndarray, np.ndarray]:
    """The object's and the target's xy at spawn, read from the record through the spec's view."""
    row = env.record().to_row()
    (ox, oy), (tx, ty) = env.spec.view.object_xy, env.spec.view.target_xy
    return np.array([row[ox][0], row[oy][0]]), np.array([row[tx], row[ty]])


# -- every environment that offers one ----------------------------------------------------------------
@pytest.mark.parametrize("make", ENVS.values(), ids=ENVS.keys())
def test_the_spec_says_what_a_state_perturbation_moves(make: Callable[[], Any]) -> None:
    env = make()
    assert isinstance(env.spec.state_perturbation, str) and env.spec.state_perturbation
    assert callable(env.perturb_state)


@pytest.mark.parametrize("make", ENVS.values(), ids=ENVS.keys())
def test_a_zero_scale_moves_nothing(make: Callable[[], Any]) -> None:
    plain, shifted = make(), make()
    obs = plain.reset(SEED)
    shifted.reset(SEED)
    assert shifted.perturb_state(_key(1), 0.0).tobytes() == obs.tobytes()
    assert shifted.record().canonical_bytes() == plain.record().canonical_bytes()
    # nothing hidden moved either: the same chunk executed after it gives the same episode
    chunk = _zero_chunk(plain) + np.float32(0.25)
    assert (
        shifted.execute(chunk, shifted.spec.executed_actions).tobytes()
        == plain.execute(chunk, plain.spec.executed_actions).tobytes()
    )
    assert shifted.record().canonical_bytes() == plain.record().canonical_bytes()


@pytest.mark.parametrize("make", ENVS.values(), ids=ENVS.keys())
def test_the_spawn_distance_is_measured_again_from_the_shifted_state(make: Callable[[], Any]) -> None:
    env = make()
    env.reset(SEED)
    before = env.record()
    env.perturb_state(_key(2), 1e-3)
    after = env.record()
    obj, target = _spawn(env)
    assert after.d0_cm == pytest.approx(100.0 * math.hypot(*(obj - target)), rel=1e-12, abs=1e-12)
    assert after.d0_cm != before.d0_cm
    assert after.distance_trace_cm == (after.d0_cm,) and after.n_ticks == 0
    assert (after.progress_final_cm, after.best_point_cm) == (0.0, 0.0)
    # the episode goes on from the shifted spawn: progress is 100 (d0 - d_final) of this episode
    env.execute(_zero_chunk(env), env.spec.executed_actions)
    record = env.record()
    assert record.distance_trace_cm[0] == after.d0_cm == record.d0_cm
    assert record.progress_final_cm == pytest.approx(
        100.0 * (after.d0_cm / 100.0 - record.d_final_cm / 100.0)
    )


@pytest.mark.parametrize("make", ENVS.values(), ids=ENVS.keys())
def test_the_direction_is_a_pure_function_of_the_generators_key(make: Callable[[], Any]) -> None:
    def shifted(key: int, scale: float, env: Any | None = None) -> tuple[np.ndarray, bytes, bytes]:
        env = env if env is not None else make()
        env.reset(SEED)
        start = np.concatenate(_spawn(env))  # object and target: either may be what moves
        obs = env.perturb_state(_key(key), scale)
        moved = np.concatenate(_spawn(env))
        return moved - start, obs.tobytes(), env.record().canonical_bytes()

    env = make()
    first = shifted(3, 1e-3, env)
    again = shifted(3, 1e-3, env)  # the same env, reset again
    fresh = shifted(3, 1e-3)  # a fresh env
    assert first[1:] == again[1:] == fresh[1:]
    other = shifted(4, 1e-3)
    assert other[2] != first[2]
    assert not np.allclose(other[0], first[0])
    # the direction does not depend on the scale: twice the scale, twice the shift
    double = shifted(3, 2e-3)
    assert np.allclose(double[0], 2.0 * first[0], rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("make", ENVS.values(), ids=ENVS.keys())
def test_perturb_state_is_refused_once_the_episode_has_ticked(make: Callable[[], Any]) -> None:
    env = make()
    with pytest.raises(RuntimeError, match="right after reset"):
        env.perturb_state(_key(5), 1e-3)  # before any reset
    env.reset(SEED)
    env.perturb_state(_key(5), 1e-3)
    env.execute(_zero_chunk(env), env.spec.executed_actions)
    with pytest.raises(RuntimeError, match="right after reset"):
        env.perturb_state(_key(5), 1e-3)
    with pytest.raises(RuntimeError, match="right after reset"):
        env.perturb_state(_key(5), 0.0)
    env.reset(SEED)  # a new episode may be perturbed again
    env.perturb_state(_key(5), 1e-3)


# -- the boat -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [1e-4, 2.5e-3])
def test_the_boat_moves_by_exactly_the_scale_in_the_table_plane(scale: float) -> None:
    env = _boat()
    obs0 = env.reset(SEED)
    start = env.record().to_row()
    obs = env.perturb_state(state_generator(11, SEED, 3, Replay(1, 0, Perturbation("state", scale))), scale)
    row = env.record().to_row()
    shift = np.array(
        [
            row["boat_x_trace_m"][0] - start["boat_x_trace_m"][0],
            row["boat_y_trace_m"][0] - start["boat_y_trace_m"][0],
        ]
    )
    assert math.hypot(*shift) == pytest.approx(scale, abs=1e-12)
    assert (row["disk_x_m"], row["disk_y_m"]) == (start["disk_x_m"], start["disk_y_m"])
    assert (row["pusher_x_trace_m"], row["pusher_y_trace_m"]) == (
        start["pusher_x_trace_m"],
        start["pusher_y_trace_m"],
    )
    # the returned observation is the shifted one: boat centre (6-8), disk minus boat (15-16)
    assert obs.tobytes() == env.observe().tobytes()
    boat = np.array([row["boat_x_trace_m"][0], row["boat_y_trace_m"][0]])
    assert obs[6:8].tobytes() == boat.astype(np.float32).tobytes()
    assert obs[8] == obs0[8]  # height unchanged
    assert obs[9:13].tobytes() == obs0[9:13].tobytes()  # orientation unchanged
    disk = np.array([row["disk_x_m"], row["disk_y_m"]])
    assert np.allclose(obs[15:17], (disk - boat).astype(np.float32), atol=1e-7)
    changed = np.flatnonzero(obs != obs0)
    assert set(changed.tolist()) <= {6, 7, 15, 16} and {6, 7} & set(changed.tolist())


# -- the pusher ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [1e-4, 2.5e-3])
def test_the_pusher_object_moves_by_exactly_the_scale_along_its_slide_joints(scale: float) -> None:
    env = _pusher()
    model, data = env.env.model, env.env.data
    slides = [int(model.joint(name).qposadr[0]) for name in ("obj_slidex", "obj_slidey")]
    obs0 = env.reset(SEED)
    qpos0, qvel0 = data.qpos.copy(), data.qvel.copy()
    object0 = data.body("object").xpos.copy()
    obs = env.perturb_state(_key(6), scale)
    moved = data.qpos[slides] - qpos0[slides]
    assert float(np.linalg.norm(moved)) == pytest.approx(scale, abs=1e-12)
    others = np.setdiff1d(np.arange(model.nq), slides)
    assert data.qpos[others].tobytes() == qpos0[others].tobytes()
    assert data.qvel.tobytes() == qvel0.tobytes()
    # obj_slidex moves the object along x, obj_slidey along y
    assert np.allclose(data.body("object").xpos[:2] - object0[:2], moved, rtol=0, atol=1e-12)
    # the observation's object position (17-19) is the shifted one; nothing else in it moved
    assert obs[17:19].tobytes() == data.body("object").xpos[:2].astype(np.float32).tobytes()
    assert set(np.flatnonzero(obs != obs0).tolist()) <= {17, 18}
    obj, _ = _spawn(env)
    assert obj.tolist() == data.body("object").xpos[:2].tolist()


# -- the Gymnasium adapter ----------------------------------------------------------------------------
def test_an_adapter_without_perturb_joints_offers_no_state_perturbation() -> None:
    env = _reacher()
    assert env.spec.state_perturbation is None
    env.reset(SEED)
    with pytest.raises(ValueError, match=r"no state perturbation is offered .*perturb_joints is empty"):
        env.perturb_state(_key(7), 1e-3)


def test_an_adapter_with_perturb_joints_names_them_and_moves_the_target() -> None:
    env = _reacher_with_target_joints()
    assert env.spec.state_perturbation is not None and "target_x, target_y" in env.spec.state_perturbation
    env.reset(SEED)
    obj0, target0 = _spawn(env)
    env.perturb_state(_key(8), 1e-3)
    obj, target = _spawn(env)
    assert obj.tolist() == obj0.tolist()  # the fingertip stays
    assert math.hypot(*(target - target0)) == pytest.approx(1e-3, abs=1e-12)


def test_an_unknown_perturb_joint_is_an_error_naming_it() -> None:
    with pytest.raises(
        ValueError, match=r"no MuJoCo joint named 'no_such_joint' \(env.params.perturb_joints\)"
    ):
        _reacher(perturb_joints=("target_x", "no_such_joint"))


def test_perturb_joints_need_the_distance_measured_from_the_bodies() -> None:
    with pytest.raises(ValueError, match=r"perturb_joints: a state perturbation needs the spawn distance"):
        GymnasiumParams(
            gym_id="Reacher-v5",
            replans=1,
            chunk_length=50,
            executed_actions=5,
            object_body="fingertip",
            goal_body="target",
            distance_info_key="reward_dist",
            perturb_joints=("target_x",),
        )


def test_perturb_joints_from_a_design_are_a_tuple_of_names() -> None:
    values = {
        "gym_id": "Reacher-v5",
        "replans": 1,
        "chunk_length": 50,
        "executed_actions": 5,
        "object_body": "fingertip",
        "goal_body": "target",
    }
    params = GymnasiumParams.from_dict({**values, "perturb_joints": ["target_x", "target_y"]})
    assert params.perturb_joints == ("target_x", "target_y")
    with pytest.raises(ValueError, match=r"perturb_joints must be a list of joint names"):
        GymnasiumParams.from_dict({**values, "perturb_joints": "target_x"})


@pytest.mark.parametrize("scale", [0.0, 1e-4])
def test_the_engine_refuses_a_state_replay_on_an_environment_without_one(scale: float) -> None:
    env = _reacher()
    spec = env.spec
    policy = make_noise_policy(
        obs_dim=spec.obs_dim, chunk_length=spec.chunk_length, action_dims=spec.action_dims
    )
    replay = Replay(1, 0, Perturbation("state", scale))
    with pytest.raises(
        ValueError, match=r"asks environment 'Reacher-v5' to shift its state, which it does not"
    ):
        run_lockstep(
            policy, [env], [EpisodeSpec(SEED, 0)], run_key=3, mode=SamplingMode("flow_ode"), replay=replay
        )
    # an action replay needs nothing of the environment
    (result,) = run_lockstep(
        policy,
        [env],
        [EpisodeSpec(SEED, 0)],
        run_key=3,
        mode=SamplingMode("flow_ode"),
        replay=Replay(1, 0, Perturbation("action", scale)),
    )
    assert result.executed_actions.shape == (spec.replans, spec.executed_actions, spec.action_dims)
