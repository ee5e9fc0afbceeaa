"""Any simulator behind Gymnasium: the scene function, its checks at the edge, and the refusals that name it.

Why: a simulator that is not MuJoCo (gym-pusht) or that runs MuJoCo through dm_control (gym-aloha) has
no bodies or sites the adapter can look up, so a lab binds it through a scene function of its own. The
function's results enter the records, so each is checked where it enters (an error naming the design's
field and the function), and the environment it binds must keep the oracles' guarantees: the same seed
and actions give the same bytes, sequential or in workers, and a replay's state shift is keyed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grpo_probe.envs.registry import EnvFactoryError, env_config, make_env
from grpo_probe.envs.scene import SCENE_SIGNATURE, ScenePositions
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.rollout import GroupJob, PolicySource, run_parallel_oracle

from .scene_envs import (
    GOAL_PX,
    PIXEL_M,
    BlankEngagementScene,
    CameraWithoutRenderScene,
    CountingEngagementScene,
    FloatFrameScene,
    PuckScene,
    SaidEngagementScene,
    SceneWithoutPositions,
    ThreeNumberScene,
    TupleScene,
    callable_name,
    make_dm_control_like,
    make_puck,
)
from .user_envs import factory_name, make_noise_policy

GEOMETRY = {"replans": 2, "chunk_length": 6, "executed_actions": 3}
SCENE = callable_name(PuckScene)


def _puck(**params: Any) -> Any:
    return make_puck(**GEOMETRY, scene=SCENE, **params)


def _key(*parts: int) -> np.random.Generator:
    return numpy_generator(tag("test_scene"), *parts)


def test_a_dm_control_env_is_told_to_bind_through_the_scene_function_not_that_it_lacks_mujoco() -> None:
    config = env_config(
        callable_name(make_dm_control_like),
        {**GEOMETRY, "object_body": "puck", "goal_body": "goal"},
        "prereg/aloha.yaml: env",
    )
    with pytest.raises(EnvFactoryError) as caught:
        make_env(config)
    message = str(caught.value)
    assert message.startswith("prereg/aloha.yaml: DmLike-v0: env.params.gym_id: DmControlLike runs MuJoCo")
    assert "through dm_control (its physics object)" in message
    assert 'env.params.scene: "module:callable"' in message and SCENE_SIGNATURE in message
    assert 'docs/your-simulator.md, "Any simulator: the scene function"' in message
    assert "no MuJoCo model" not in message


def test_a_simulator_that_is_not_mujoco_named_by_bodies_is_told_what_to_provide() -> None:
    with pytest.raises(ValueError, match=r"PixelPuck \(module .*\) is not a MuJoCo environment") as caught:
        make_puck(**GEOMETRY, object_body="puck", goal_body="goal")
    assert "env.params.scene" in str(caught.value) and "perturb(rng, scale)" in str(caught.value)
    refusal = r"name the object exactly once, .* \(got none\), or name a scene function .*env\.params\.scene"
    with pytest.raises(ValueError, match=refusal):
        make_puck(**GEOMETRY)


def test_the_scene_function_measures_the_object_and_the_goal_in_metres() -> None:
    env = _puck()
    assert env.spec.cameras == () and "scene " + SCENE in env.spec.version
    obs = env.reset(7)
    start = obs[:2].astype(np.float64) * PIXEL_M
    while not env.done:
        obs = env.execute(np.ones((6, 2), np.float32), 3)
    record = env.record()
    assert record.goal_x_m == pytest.approx(GOAL_PX[0] * PIXEL_M)
    assert record.object_x_trace_m[0] == pytest.approx(start[0])
    d0 = math.hypot(start[0] - GOAL_PX[0] * PIXEL_M, start[1] - GOAL_PX[1] * PIXEL_M)
    assert record.d0_cm == pytest.approx(100 * d0)
    assert len(record.distance_trace_cm) == 7 and record.n_ticks == 6
    assert record.contact and record.first_contact_tick == 1  # the scene's engaged(info)
    assert env.spec.engagement.startswith("the scene function")


def test_a_scene_that_says_what_engagement_means_is_quoted_and_a_blank_saying_is_refused() -> None:
    """decision.md prints the spec's engagement: the scene's own words where it gives them."""
    env = make_puck(**GEOMETRY, scene=callable_name(SaidEngagementScene))
    assert env.spec.engagement == "the puck was pushed this tick"
    with pytest.raises(ValueError, match=r"env\.params\.scene: .*: engagement must be a non-empty string"):
        make_puck(**GEOMETRY, scene=callable_name(BlankEngagementScene))


def test_the_scenes_state_shift_is_keyed_and_measured_again() -> None:
    env = _puck()
    assert env.spec.state_perturbation == "the puck's spawn position in the plane"
    spawn = env.reset(3)
    assert env.perturb_state(_key(0), 0.0).tobytes() == spawn.tobytes()
    shifted = {}
    for key in (1, 1, 2):
        env.reset(3)
        shifted.setdefault(key, []).append(env.perturb_state(_key(key), 0.01).tobytes())
        moved = np.frombuffer(shifted[key][-1], np.float32)[:2].astype(np.float64) - spawn[:2]
        assert np.hypot(*moved) * PIXEL_M == pytest.approx(0.01, rel=1e-5)
        assert env.record().object_x_trace_m[0] == pytest.approx(float(env.env.puck[0]) * PIXEL_M)
    assert shifted[1][0] == shifted[1][1] != shifted[2][0]


@pytest.mark.parametrize(
    ("scene", "message"),
    [
        (
            SceneWithoutPositions,
            r"returned SceneWithoutPositions, which has no positions\(\) method; the scene ",
        ),
        (TupleScene, r"positions\(\) of .*TupleScene\(env\) returned tuple; it must return .*ScenePositions"),
        (
            ThreeNumberScene,
            r"positions\(\) of .*ThreeNumberScene\(env\) failed: .*object_xy must be 2 numbers",
        ),
        (
            CountingEngagementScene,
            r"engaged\(info\) of .*CountingEngagementScene\(env\) returned int 1; it must",
        ),
    ],
)
def test_a_scene_that_breaks_the_contract_is_named_with_the_field_and_the_function(
    scene: type, message: str
) -> None:
    config = env_config(
        callable_name(make_puck), {**GEOMETRY, "scene": callable_name(scene)}, "prereg/p.yaml: env"
    )
    with pytest.raises(ValueError, match=r"env\.params\.scene: '.*" + message) as caught:
        env = make_env(config)
        env.reset(0)
        env.execute(np.ones((6, 2), np.float32), 3)
    if scene is SceneWithoutPositions:  # refused while the design's environment is built: the file is named
        assert str(caught.value).startswith("prereg/p.yaml: env.params.scene: ")


@pytest.mark.parametrize(
    ("scene", "message"),
    [
        (CameraWithoutRenderScene, r"CameraWithoutRenderScene names cameras \['top'\] but has no render"),
        (FloatFrameScene, r"render\('top', 8, 6\) of .*FloatFrameScene\(env\) returned float32 \[8, 6, 3\]"),
    ],
)
def test_a_scene_camera_that_breaks_the_contract_is_named_with_the_field_and_the_function(
    scene: type, message: str
) -> None:
    """A scene's camera (the path a simulator that draws itself takes) is checked as its positions are."""
    with pytest.raises(ValueError, match=r"env\.params\.scene: '.*" + message):
        env = make_puck(**GEOMETRY, scene=callable_name(scene))
        assert env.spec.cameras == ("top",)
        env.reset(0)
        env.render("top", 8, 6)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"scene": "not a name"}, r"env\.params\.scene: 'not a name' is not a 'module:callable' name"),
        (
            {"scene": SCENE, "object_obs_key": "x"},
            r"env\.params\.scene: .* leave out env\.params\.object_obs_key",
        ),
        ({"scene": SCENE, "effector_body": "tip"}, r"leave out effector_body and effector_site"),
        ({"scene": SCENE, "engaged_info_key": "moved"}, r"engaged_info_key: the scene function .* once"),
        (
            {"scene": "no_such_lab.scenes:Scene"},
            r"env\.params\.scene: cannot import module 'no_such_lab\.scenes'",
        ),
    ],
)
def test_scene_params_are_checked_before_anything_runs(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_puck(**GEOMETRY, **params)


def test_scene_positions_hold_two_floats_whatever_the_scene_returned() -> None:
    found = ScenePositions(object_xy=np.array([0.1, 0.2], np.float32), goal_xy=[1, 2])
    assert found.goal_xy == (1.0, 2.0) and all(type(v) is float for v in found.object_xy)
    with pytest.raises(ValueError, match=r"goal_xy must be finite"):
        ScenePositions(object_xy=(0, 0), goal_xy=(math.nan, 0))


def test_an_environment_bound_by_its_scene_passes_the_parallel_oracle(tmp_path: Path) -> None:
    config = env_config(callable_name(make_puck), {**GEOMETRY, "scene": SCENE})
    spec = make_env(config).spec
    options = {"obs_dim": spec.obs_dim, "chunk_length": spec.chunk_length, "action_dims": spec.action_dims}
    source = PolicySource(factory=factory_name(make_noise_policy), options=options)
    job = GroupJob("arm_x", "cell_x", source, SamplingMode("flow_ode"), (0, 1), 2, 3, config)
    report = run_parallel_oracle([job], tmp_path / "oracle.json", workers=2, show_progress=False)
    assert report["pass"] and report["counts"]["ticks"] == 4 * (spec.episode_ticks + 1)
