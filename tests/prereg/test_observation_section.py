"""The camera-fed designs register what policies may read (``observation:``) and what each arm reads.

Why: a frame a policy reads changes what it does, so the cameras, their frame size and the task string
are registered numbers like any other, and a mistake names the file and the field before anything runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.envs.observation import CameraConfig, ObservationConfig
from grpo_probe.prereg import load_prereg

from .design_edits import edited, load_error

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["designs/smoke/vision_smoke.yaml", "designs/probes/vision_probe.yaml"])
def test_the_vision_designs_are_locked_and_register_the_overhead_camera(name: str) -> None:
    prereg = load_prereg(REPO / "prereg" / name)
    assert prereg.observation == ObservationConfig(
        task="push the toy boat onto the target disk", cameras=(CameraConfig("overhead", 96, 96),)
    )
    arm = prereg.arms["flow_vision"]
    assert arm.head == "flow" and arm.reads_images
    assert arm.inputs == ("observation.state", "observation.images.overhead", "task")


def test_a_state_only_design_registers_no_camera_and_its_arms_read_the_state() -> None:
    prereg = load_prereg(REPO / "prereg/grpo_signal_probe.yaml")
    assert prereg.observation == ObservationConfig()
    assert all(arm.inputs == ("observation.state",) and not arm.reads_images for arm in prereg.arms.values())


def test_an_arm_reading_an_unregistered_camera_names_the_field(tmp_path: Path) -> None:
    def edit(raw):
        raw["arms"]["flow_vision"]["inputs"] = ["observation.state", "observation.images.wrist"]

    message = load_error(edited(tmp_path, "designs/smoke/vision_smoke.yaml", edit))
    assert "vision_smoke.yaml: arms.flow_vision.inputs reads 'observation.images.wrist'" in message
    assert "registers no camera 'wrist' (observation.cameras: overhead)" in message


def test_a_camera_the_environment_cannot_render_names_its_cameras(tmp_path: Path) -> None:
    def edit(raw):
        raw["observation"]["cameras"]["wrist"] = {"height": 64, "width": 64}
        raw["arms"]["flow_vision"]["inputs"] = ["observation.state", "observation.images.wrist"]

    assert "the environment renders no camera 'wrist' (its cameras: overhead)" in load_error(
        edited(tmp_path, "designs/smoke/vision_smoke.yaml", edit)
    )


def test_a_design_registering_a_camera_the_pusher_lacks_names_the_file_the_field_and_its_cameras(
    tmp_path: Path,
) -> None:
    def edit(raw):
        raw["observation"]["cameras"] = {"front": {"height": 64, "width": 64}}
        raw["arms"]["flow_camera"]["inputs"] = ["observation.state", "observation.images.front"]

    message = load_error(edited(tmp_path, "designs/smoke/pusher_camera_smoke.yaml", edit))
    assert (
        "pusher_camera_smoke.yaml: observation.cameras.front: the environment renders no camera 'front' "
        "(its cameras: default)" in message
    )
    assert "arms.flow_camera.inputs reads 'observation.images.front'" in message


def test_reading_the_task_needs_a_registered_task_and_frames_need_the_flow_head(tmp_path: Path) -> None:
    def no_task(raw):
        del raw["observation"]["task"]

    assert "arms.flow_vision.inputs reads 'task', but the design registers no observation.task" in load_error(
        edited(tmp_path, "designs/smoke/vision_smoke.yaml", no_task)
    )

    def ar_with_frames(raw):
        raw["arms"]["flow_vision"]["head"] = "ar"
        raw["arms"]["flow_vision"]["anchor"] = {"kind": "greedy"}
        raw["cells"] = [dict(raw["cells"][0], mode={"kind": "temperature", "temperature": 1.0})]
        raw["oracles"]["parallel"]["modes"] = [{"kind": "greedy"}]

    assert "arms.flow_vision.inputs: the AR head reads the state only" in load_error(
        edited(tmp_path, "designs/smoke/vision_smoke.yaml", ar_with_frames)
    )


def test_a_bad_frame_size_or_key_is_a_schema_error_naming_the_field(tmp_path: Path) -> None:
    def tiny(raw):
        raw["observation"]["cameras"]["overhead"] = {"height": 2, "width": 96}

    assert "observation.cameras.overhead.height" in load_error(
        edited(tmp_path, "designs/smoke/vision_smoke.yaml", tiny)
    )

    def typo(raw):
        raw["arms"]["flow_vision"]["inputs"] = ["observation.state", "observation.image.overhead"]

    assert "arms.flow_vision.inputs" in load_error(edited(tmp_path, "designs/smoke/vision_smoke.yaml", typo))


def test_the_registered_ar_arm_decodes_in_blocks_of_20_and_only_ar_arms_may(tmp_path: Path) -> None:
    prereg = load_prereg(REPO / "prereg/grpo_signal_probe.yaml")
    assert prereg.arms["ar"].row_block == 20
    assert prereg.arms["flow_teacher"].row_block is None
    row_block = [a for a in prereg.amendments if "arms" in a.fields and "decision_rule" not in a.fields]
    (added,) = row_block[-2].replaces
    assert (added.path, added.added) == ("arms.ar.row_block", True)
    (changed,) = row_block[-1].replaces
    assert (changed.path, changed.added, changed.was) == ("arms.ar.row_block", False, 16)

    def flow_block(raw):
        raw["arms"]["flow_vision"]["row_block"] = 16

    assert "arms.flow_vision.row_block: only the AR head decodes in a registered row block" in load_error(
        edited(tmp_path, "designs/smoke/vision_smoke.yaml", flow_block)
    )


def test_lerobot_keys_on_an_environment_without_named_state_entries_are_refused(tmp_path: Path) -> None:
    def edit(raw):
        raw["observation"] = {"convention": "lerobot", "state": ["joints"], "environment_state": ["object"]}

    message = load_error(edited(tmp_path, "designs/smoke/pusher_smoke.yaml", edit))
    assert (
        "pusher_smoke.yaml: observation.convention: lerobot splits the state by its named entries" in message
    )
    assert "environment 'pusher' names none" in message
    assert "phase2: the phase-2 pilot replays the packed state" in message  # the design registers a pilot


def test_lerobot_entries_without_the_convention_are_refused(tmp_path: Path) -> None:
    def edit(raw):
        raw["observation"]["state"] = ["observation"]

    message = load_error(edited(tmp_path, "designs/smoke/vision_smoke.yaml", edit))
    assert "vision_smoke.yaml: observation.state: names the entries of LeRobot's split" in message
