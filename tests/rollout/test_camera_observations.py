"""Camera-fed policies: observations as a mapping of declared keys, and frames inside both oracles.

The VLA-shaped example adapter (examples/my_vla_adapter.py) reads the overhead frame, the state and the
registered task; the oracle compares a sha256 of the frames it saw at every replan. A parallel path
that renders from a camera moved by 1 mm must fail the oracle at the first replan's tick, naming the
frame digest; a policy reading a key it did not declare fails naming the key.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.observation import ObservationBatch, ObservationConfig, frame_sha256
from grpo_probe.envs.registry import EnvConfig, boat_env
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.rollout import GroupJob, PolicySource, RolloutPool, run_parallel_oracle, run_sequential
from grpo_probe.rollout.oracles import OracleMismatchError

from .camera_cases import make_peeking_policy

pytest.importorskip("mujoco")
_REPO = str(Path(__file__).resolve().parents[2])
if _REPO not in sys.path:  # workers import examples.my_vla_adapter by name
    sys.path.append(_REPO)

VLA = "examples.my_vla_adapter:load_my_vla"
OBSERVATION = ObservationConfig.from_dict(
    {"task": "push the toy boat onto the target disk", "cameras": {"overhead": {"height": 96, "width": 96}}}
)
ODE = SamplingMode("flow_ode", steps=10)


def _needs_gl() -> None:
    from grpo_probe.envs.boat import BoatPushEnv

    try:
        BoatPushEnv().render("overhead", 96, 96)
    except RuntimeError as exc:
        pytest.skip(f"no headless GL backend here: {exc}")


def _job(source: PolicySource, env: EnvConfig | None = None, **changes: object) -> GroupJob:
    job = GroupJob(
        arm="flow_vision",
        cell="c_vision",
        source=source,
        mode=ODE,
        seeds=(3, 4),
        group_size=2,
        run_key=5,
        env=env or boat_env(SimParams(replans=2, executed_actions=10)),
        observation=OBSERVATION,
    )
    return job.replace(**changes) if changes else job


def test_the_vla_adapter_passes_the_parallel_oracle_with_its_frames_compared(
    pool: RolloutPool, tmp_path: Path
) -> None:
    _needs_gl()
    report = run_parallel_oracle([_job(PolicySource(factory=VLA))], tmp_path / "p.json", pool=pool)
    assert report["pass"] and report["counts"]["frames"] == 2 * 2 * 2  # seeds x draws x replans
    frames = json.loads((tmp_path / "p.json").read_text())["frames"]["sequential_sha256_per_replan"]
    assert [(f["seed"], f["draw"], len(f["sha256"])) for f in frames] == [
        (3, 0, 2),
        (3, 1, 2),
        (4, 0, 2),
        (4, 1, 2),
    ]
    assert frames[0]["sha256"][0] == frames[1]["sha256"][0]  # draws of a seed share its spawn frame
    assert frames[0]["sha256"][0] != frames[2]["sha256"][0]  # seeds do not


def test_a_camera_moved_by_a_millimetre_on_the_parallel_path_fails_the_oracle_at_the_first_tick(
    pool: RolloutPool, tmp_path: Path
) -> None:
    _needs_gl()
    moved = EnvConfig("rollout.camera_cases:moved_camera_boat", {"replans": 2, "executed_actions": 10})
    job = _job(PolicySource(factory=VLA), env=moved)
    with pytest.raises(OracleMismatchError, match=r"seed=3 draw=0 tick 1, replan_frame_sha256\[0\]"):
        run_parallel_oracle([job], tmp_path / "p.json", pool=pool, show_progress=False)
    report = json.loads((tmp_path / "p.json").read_text())
    assert report["pass"] is False and report["first_divergence"]["field"] == "replan_frame_sha256[0]"


def test_frames_are_rendered_only_for_a_policy_that_declares_a_camera() -> None:
    _needs_gl()
    state_only = _job(PolicySource(factory="rollout.keyed_test_policies:make_flow_policy"))
    assert all(r.frame_sha256 is None for r in run_sequential(state_only))
    seen = run_sequential(_job(PolicySource(factory=VLA), seeds=(3,), group_size=1))
    assert seen[0].frame_sha256 is not None and len(seen[0].frame_sha256) == 2
    assert seen[0].timing.render_s > 0


def test_a_policy_reading_a_key_it_did_not_declare_fails_naming_the_key() -> None:
    _needs_gl()
    source = PolicySource(factory="rollout.camera_cases:make_peeking_policy")
    with pytest.raises(KeyError, match=r"'observation\.images\.wrist', which it did not declare"):
        run_sequential(_job(source, seeds=(3,), group_size=1))
    assert make_peeking_policy().input_keys == ("observation.state", "observation.images.overhead")


def test_a_policy_declaring_a_camera_the_design_does_not_register_fails_before_any_episode() -> None:
    unregistered = _job(PolicySource(factory=VLA), observation=ObservationConfig(task="push"))
    with pytest.raises(
        ValueError, match=r"reads 'observation\.images\.overhead', but the design registers no camera"
    ):
        run_sequential(unregistered)
    with pytest.raises(ValueError, match=r"declares input\(s\) task, which the arm does not register"):
        run_sequential(
            _job(PolicySource(factory=VLA), inputs=("observation.state", "observation.images.overhead"))
        )


def test_an_observation_batch_names_undeclared_keys_and_frame_digests_cover_every_camera() -> None:
    batch = ObservationBatch({"observation.state": np.zeros((2, 17), np.float32), "task": ("a", "a")}, "flow")
    assert batch.batch_size == 2 and list(batch) == ["observation.state", "task"]
    with pytest.raises(KeyError, match=r"declared: observation\.state, task"):
        batch["observation.images.top"]
    frame = np.zeros((4, 4, 3), np.uint8)
    other = frame.copy()
    other[3, 3, 2] = 1
    assert frame_sha256({"observation.images.a": frame}) != frame_sha256({"observation.images.a": other})
    assert frame_sha256({"observation.images.a": frame}) != frame_sha256({"observation.images.b": frame})
    with pytest.raises(ValueError, match="uint8"):
        frame_sha256({"observation.images.a": frame.astype(np.float32)})
