"""Cameras through the Gymnasium adapter: named MuJoCo cameras and the env's own view, at any size.

Why: a camera-fed policy on a Gymnasium scene reads ``observation.images.<camera>``, so the adapter must
say which cameras the scene has (``spec.cameras``), render them at the registered size, refuse an unknown
one before any GL context is made, and draw frames that are a pure function of the state: the oracles
compare their digests across processes.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_probe.envs.gym_adapter import DEFAULT_CAMERA, GymnasiumAdapter, GymnasiumParams
from grpo_probe.envs.pusher.spec import PusherParams, pusher_spec
from grpo_probe.envs.registry import env_config, make_env

_CAMERAS = """
    <camera name="front" pos="0 -1.4 1.1" xyaxes="1 0 0 0 0.62 0.78"/>
    <camera name="top" pos="0.3 -0.3 1.6" xyaxes="1 0 0 0 1 0"/>
"""


def _pusher_with_cameras(folder: Path) -> Path:
    """Pusher-v5's own XML with two named cameras added to its world body (Pusher-v5 takes ``xml_file``)."""
    import gymnasium.envs.mujoco as gym_mujoco

    xml = (Path(gym_mujoco.__file__).parent / "assets" / "pusher_v5.xml").read_text()
    path = folder / "pusher_cameras.xml"
    path.write_text(xml.replace("<worldbody>", "<worldbody>" + _CAMERAS, 1))
    return path


def _params(xml_file: Path | None = None) -> GymnasiumParams:
    return GymnasiumParams(
        gym_id="Pusher-v5",
        replans=2,
        chunk_length=10,
        executed_actions=5,
        object_body="object",
        goal_body="goal",
        gym_kwargs=(("xml_file", str(xml_file)),) if xml_file is not None else (),
    )


def test_named_mujoco_cameras_come_in_model_order_then_the_default_view(tmp_path: Path) -> None:
    env = GymnasiumAdapter(_params(_pusher_with_cameras(tmp_path)))
    assert env.spec.cameras == ("front", "top", DEFAULT_CAMERA)
    env.close()


def test_the_pusher_spec_lists_the_default_view_and_the_live_environment_agrees() -> None:
    """Pusher-v5 names no camera of its own; the built-in's static spec must match the built env's."""
    assert pusher_spec().cameras == (DEFAULT_CAMERA,)
    assert GymnasiumAdapter(_params()).spec.cameras == (DEFAULT_CAMERA,)
    assert make_env(env_config("pusher", PusherParams().to_dict())).spec.cameras == (DEFAULT_CAMERA,)


def test_an_unknown_camera_is_refused_naming_the_cameras_the_env_has(tmp_path: Path) -> None:
    """Checked before any renderer is built, so this needs no GL backend."""
    env = GymnasiumAdapter(_params(_pusher_with_cameras(tmp_path)))
    env.reset(0)
    with pytest.raises(ValueError, match=r"no camera 'wrist' \(its cameras: front, top, default\)"):
        env.render("wrist", 64, 64)


_FRAMES = """
import hashlib, json, sys
import numpy as np
from grpo_probe.envs.gym_adapter import GymnasiumAdapter, GymnasiumParams
params = GymnasiumParams(gym_id="Pusher-v5", replans=2, chunk_length=10, executed_actions=5,
                         object_body="object", goal_body="goal", gym_kwargs=(("xml_file", sys.argv[1]),))
out = {}
for build in ("first", "second"):  # a second env in the same process renders the same bytes
    env = GymnasiumAdapter(params)
    for seed in (0, 1):
        env.reset(seed)
        for tick in ("spawn", "stepped"):
            for camera, (h, w) in (("front", (48, 64)), ("default", (32, 32))):
                frame = env.render(camera, h, w)
                again = env.render(camera, h, w)
                assert frame.shape == (h, w, 3) and frame.dtype.name == "uint8", (frame.shape, frame.dtype)
                assert frame.tobytes() == again.tobytes(), "two renders of one state differ"
                assert frame.std() > 0, "a blank frame"
                key = f"{build}/{seed}/{tick}/{camera}"
                out[key] = hashlib.sha256(frame.tobytes()).hexdigest()
            env.execute(np.full((10, 7), 0.5, np.float32), 5)
    env.close()
print(json.dumps(out))
"""
_NO_BACKEND = "camera frames need an OpenGL backend"
"""The start of grpo_probe.render_setup.make_renderer's error when no GL context can be made."""


def _frame_hashes_in_a_fresh_process(xml_file: Path) -> dict[str, str]:
    """sha256 of each frame the script renders, from a new interpreter with ``MUJOCO_GL=egl``."""
    if ctypes.util.find_library("EGL") is None:
        pytest.skip("no libEGL on this machine (tools/gl/install-gl.sh installs Mesa's EGL)")
    env = {k: v for k, v in os.environ.items() if k != "PYOPENGL_PLATFORM"}
    proc = subprocess.run(
        [sys.executable, "-c", _FRAMES, str(xml_file)],
        capture_output=True,
        text=True,
        env={**env, "MUJOCO_GL": "egl"},
        timeout=180,
    )
    if proc.returncode != 0 and _NO_BACKEND in proc.stderr:
        pytest.skip(
            f"libEGL is here, but no EGL context could be made: {proc.stderr.strip().splitlines()[-1]}"
        )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_frames_are_bit_identical_across_envs_and_fresh_processes_and_follow_the_state(
    tmp_path: Path,
) -> None:
    xml_file = _pusher_with_cameras(tmp_path)
    first = _frame_hashes_in_a_fresh_process(xml_file)
    second = _frame_hashes_in_a_fresh_process(xml_file)
    assert first == second
    for key, digest in first.items():
        if key.startswith("first/"):
            assert second["second/" + key.removeprefix("first/")] == digest, key
    assert first["first/0/spawn/front"] != first["first/1/spawn/front"], "the spawn does not show"
    assert first["first/0/spawn/front"] != first["first/0/stepped/front"], "the arm's motion does not show"
    assert first["first/0/spawn/front"] != first["first/0/spawn/default"], "two cameras, one view"


def test_check_policy_refuses_a_camera_a_users_gymnasium_env_lacks_before_noise_frames(
    tmp_path: Path,
) -> None:
    """Reading the design does not build a user's environment, so the arm's check must (its frames would be
    noise), and ``prereg check``, which builds it as the workflow's first rule does, refuses it too."""
    import yaml

    from grpo_probe.policies.check.arm import check_arm
    from grpo_probe.prereg import load_prereg
    from grpo_probe.prereg.canonical import read_yaml

    raw = read_yaml(Path(__file__).resolve().parents[2] / "prereg/designs/smoke/pusher_camera_smoke.yaml")
    raw["env"] = {
        "id": "grpo_probe.envs.gym_adapter:make_gymnasium_env",
        "params": {
            "gym_id": "Pusher-v5",
            "gym_kwargs": {"xml_file": str(_pusher_with_cameras(tmp_path))},
            "replans": 2,
            "chunk_length": 50,
            "executed_actions": 10,
            "object_body": "object",
            "goal_body": "goal",
        },
    }
    raw["observation"]["cameras"] = {"wrist": {"height": 64, "width": 64}}
    raw["arms"]["flow_camera"]["inputs"] = ["observation.state", "observation.images.wrist"]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    prereg = load_prereg(path, require_lock=False)  # a user's environment is not built here
    with pytest.raises(ValueError) as info:
        check_arm(prereg, None, "flow_camera")
    assert f"{path}: arms.flow_camera.inputs reads 'observation.images.wrist'" in str(info.value)
    assert "renders no camera 'wrist' (its cameras: front, top, default)" in str(info.value)
    from grpo_probe.prereg.env_check import check_built_environment

    with pytest.raises(ValueError) as built:
        check_built_environment(prereg)
    assert (
        f"{path}: observation.cameras.wrist: the environment renders no camera 'wrist' "
        "(its cameras: front, top, default)"
    ) in str(built.value).splitlines()
