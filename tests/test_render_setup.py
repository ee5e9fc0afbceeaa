"""The camera set-up the probe and the environment server share: what it refuses, and what it keeps.

The frames themselves are held by tests/envs/test_served_env_cameras.py (served and in process, the same
bytes) and tests/envs/test_gym_cameras.py; here, the messages each side prints and the user's choices it
leaves alone.
"""

from __future__ import annotations

import os

import mujoco
import numpy as np
import pytest

from grpo_probe import render_setup

_MODEL = """
<mujoco>
  <visual><quality offsamples="4"/></visual>
  <worldbody>
    <camera name="side" pos="0 -1 0.5" xyaxes="1 0 0 0 0.5 1"/>
    <camera pos="0 1 0.5" xyaxes="-1 0 0 0 0.5 1"/>
    <camera name="default" pos="0 0 2"/>
    <geom type="sphere" size="0.1"/>
  </worldbody>
</mujoco>
"""


class _NoContext:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("no display")


@pytest.mark.parametrize(
    ("place", "expected"),
    [
        ({}, "none could be created here (MUJOCO_GL=osmesa): no display. Install EGL"),
        (
            {"place": "where the environment server runs"},
            "none could be created where the environment server runs (MUJOCO_GL=osmesa): no display. "
            "Install EGL (Debian: libegl1) or OSMesa (libosmesa6) where the environment server runs",
        ),
    ],
)
def test_a_missing_backend_names_it_and_where_to_install_one(
    monkeypatch: pytest.MonkeyPatch, place: dict[str, str], expected: str
) -> None:
    model = mujoco.MjModel.from_xml_string(_MODEL)
    monkeypatch.setattr(mujoco, "Renderer", _NoContext)
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    with pytest.raises(RuntimeError, match=r"^camera frames need an OpenGL backend") as failed:
        render_setup.make_renderer(model, 8, 8, **place)
    assert expected in str(failed.value)
    assert int(model.vis.quality.offsamples) == 4, "the model's multisampling is restored after a failure"


def test_a_backend_the_user_chose_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    monkeypatch.setenv("LP_NUM_THREADS", "2")
    assert render_setup.select_headless_gl() == "osmesa"
    assert os.environ["LP_NUM_THREADS"] == "2"


def test_the_model_cameras_are_the_named_ones_in_order_and_a_named_default_is_not_repeated() -> None:
    model = mujoco.MjModel.from_xml_string(_MODEL)
    assert render_setup.named_cameras(model) == ("side", "default")
    assert render_setup.camera_names(model) == ("side", "default")
    without = mujoco.MjModel.from_xml_string(_MODEL.replace(' name="default"', ""))
    assert render_setup.camera_names(without) == ("side", render_setup.DEFAULT_CAMERA)


class _Scene:
    cameras = ("top",)

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        return np.zeros((height, width, 3), np.uint8)


@pytest.mark.parametrize(
    ("cameras", "message"),
    [
        ("top", r"the scene _Scene\.cameras must be a list of camera names, got 'top'"),
        (["top", "top"], r"_Scene\.cameras must name distinct cameras by non-empty strings"),
        (["top", ""], r"_Scene\.cameras must name distinct cameras by non-empty strings"),
    ],
)
def test_a_scenes_cameras_are_refused_naming_the_scene(cameras: object, message: str) -> None:
    scene = _Scene()
    scene.cameras = cameras  # type: ignore[assignment]
    with pytest.raises(ValueError, match=message):
        render_setup.scene_cameras(scene, "the scene _Scene")


def test_a_scene_frame_of_another_shape_or_type_names_the_call() -> None:
    call = "render('top', 4, 6) of the scene _Scene"
    frame = np.asfortranarray(np.zeros((4, 6, 3), np.uint8))
    checked = render_setup.checked_frame(frame, 4, 6, call)
    assert checked.flags.c_contiguous and checked.tobytes() == frame.tobytes()
    with pytest.raises(ValueError, match=r"of the scene _Scene returned float64 \[4, 6, 3\]; it must return"):
        render_setup.checked_frame(np.zeros((4, 6, 3)), 4, 6, call)
    with pytest.raises(ValueError, match=r"returned list; it must return a numpy uint8 array \[4, 6, 3\]"):
        render_setup.checked_frame([[0]], 4, 6, call)
