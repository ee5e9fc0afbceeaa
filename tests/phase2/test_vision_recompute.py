"""Phase 2 of the camera-fed flow arm: rollouts store the frames, updates read them, the oracle compares them.

The arm of prereg/designs/smoke/vision_smoke.yaml reads the overhead frame. Its phase-2 rollouts keep every
frame the policy saw beside the digest the rollout engine recorded when it rendered it; the replay oracle
hashes the stored frames and compares them with that digest before it compares a log-prob, so a frame that is
not the one the policy saw (a changed digest, one pixel moved) fails as a frame mismatch naming seed, draw,
replan and camera. The honest replay passes bit for bit, and a Flow-GRPO step moves the image encoder:
the frames reach the network the update differentiates.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from grpo_probe.envs.demo_set import Demos
from grpo_probe.envs.observation import frame_sha256, image_key
from grpo_probe.phase2.recompute import load_head_model
from grpo_probe.phase2.recompute_oracle import RecomputeMismatchError, check_recompute, recompute_batch
from grpo_probe.phase2.rollouts import RolloutBatch, read_batch, run_iteration, write_iteration_table
from grpo_probe.phase2.trainer import grpo_update, make_optimizer
from grpo_probe.policies.models import VisionFlowTrainConfig
from grpo_probe.policies.synthetic_demos import synthetic_demos
from grpo_probe.policies.train import train_vision_flow
from grpo_probe.prereg import Prereg, load_prereg, lock_prereg
from grpo_probe.prereg.canonical import read_yaml

from .conftest import REPO

pytest.importorskip("mujoco")

ARM = "flow_vision"
OVERHEAD = image_key("overhead")
TINY_VISION = VisionFlowTrainConfig(
    hidden=32,
    n_layers=2,
    obs_embed=8,
    time_embed=8,
    image_embed=8,
    channels=4,
    steps=3,
    batch_size=8,
    warmup_steps=1,
)


def _needs_gl() -> None:
    from grpo_probe.envs.boat import BoatPushEnv

    try:
        BoatPushEnv().render("overhead", 96, 96)
    except RuntimeError as exc:
        pytest.skip(f"no headless GL backend here: {exc}")


@pytest.fixture(scope="module")
def vision_design(tmp_path_factory: pytest.TempPathFactory) -> Prereg:
    """prereg/designs/smoke/vision_smoke.yaml with two-replan episodes, a one-iteration pilot of 2 seeds x K =
    2, 4 SDE steps and every group kept, locked."""
    raw = read_yaml(REPO / "prereg/designs/smoke/vision_smoke.yaml")
    raw["sim"]["replans"] = 2
    phase2 = raw["phase2"]
    phase2.update(iterations=1, min_group_std=0.0, train_seeds={"first": 2000, "count": 2})
    phase2["heads"]["flow"].update(mode={"kind": "flow_sde", "sde_a": 0.5, "steps": 4}, lr=1.0e-3)
    path = tmp_path_factory.mktemp("vision_design") / "vision_pilot.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    lock_prereg(path)
    return load_prereg(path)


@pytest.fixture(scope="module")
def vision_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny camera-fed flow head (three steps on synthetic demos with random 96 x 96 frames)."""
    synthetic = synthetic_demos(16, run_key=11)
    frames = np.random.default_rng(0).integers(0, 256, size=(16, 96, 96, 3), dtype=np.uint8)
    demos = Demos(synthetic.obs, synthetic.chunks, np.arange(16, dtype=np.int64), images={OVERHEAD: frames})
    path = tmp_path_factory.mktemp("vision_head") / "vision.pt"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_vision_flow(demos, TINY_VISION, "overhead", path)
    finally:
        torch.set_num_threads(threads)
    return path


@pytest.fixture(scope="module")
def vision_table(
    tmp_path_factory: pytest.TempPathFactory, vision_design: Prereg, vision_checkpoint: Path
) -> Path:
    """Iteration 0's rollouts of the camera-fed arm, as the phase2_rollouts rule records them."""
    _needs_gl()
    torch.set_num_threads(1)
    table = tmp_path_factory.mktemp("vision_rollouts") / "rollouts.parquet"
    write_iteration_table(
        run_iteration(vision_design, ARM, vision_checkpoint, 0, workers=0, show_progress=False), table
    )
    return table


def _tolerance(design: Prereg) -> float:
    return design.phase2.recipe("flow").replay_atol  # type: ignore[union-attr]


def _replace_replan(batch: RolloutBatch, episode: int, replan: int, **changes: object) -> RolloutBatch:
    episodes = list(batch.episodes)
    replans = list(episodes[episode].replans)
    replans[replan] = dataclasses.replace(replans[replan], **changes)  # type: ignore[arg-type]
    episodes[episode] = dataclasses.replace(episodes[episode], replans=tuple(replans))
    return dataclasses.replace(batch, episodes=tuple(episodes))


def test_the_rollouts_store_the_frames_the_policy_saw_with_the_engines_digest(
    vision_table: Path, vision_design: Prereg
) -> None:
    columns = pq.read_table(vision_table, columns=["replan_frames", "replan_frame_sha256"]).to_pydict()
    assert all(len(row) == 2 for row in columns["replan_frames"])  # two replans, one frame each
    batch = read_batch(vision_table, vision_design.run_key)
    assert len(batch.episodes) == 2 * 2
    for episode in batch.episodes:
        for replan in episode.replans:
            assert replan.frames is not None and list(replan.frames) == [OVERHEAD]
            assert replan.frames[OVERHEAD].shape == (96, 96, 3)
            assert replan.frames[OVERHEAD].dtype == np.uint8
            assert frame_sha256(replan.frames) == replan.frame_sha256
    first, second = batch.episodes[0].replans
    assert first.frame_sha256 != second.frame_sha256  # the frame of each replan, not one frame repeated


def test_the_honest_replay_of_the_camera_fed_arm_passes_on_its_frames(
    vision_table: Path, vision_design: Prereg, vision_checkpoint: Path
) -> None:
    batch = read_batch(vision_table, vision_design.run_key)
    report = recompute_batch(load_head_model(str(vision_checkpoint)), batch, _tolerance(vision_design))
    assert report.passed, report.first_mismatch
    assert report.frames == report.replans == 2 * 2 * 2
    assert report.max_abs_diff == 0.0  # the same frames, blocks and keyed noise as the sampler
    assert report.entries == report.replans * 4
    assert "stored frames" in report.to_dict()["compared"]


def test_a_changed_frame_digest_fails_the_oracle_as_a_frame_mismatch(
    vision_table: Path, vision_design: Prereg, vision_checkpoint: Path
) -> None:
    batch = read_batch(vision_table, vision_design.run_key)
    planted = batch.episodes[2]
    stored = planted.replans[1].frames[OVERHEAD]  # type: ignore[index]
    other = stored.copy()
    other[0, 0, 0] ^= 1
    changed = frame_sha256({OVERHEAD: other})
    report = recompute_batch(
        load_head_model(str(vision_checkpoint)),
        _replace_replan(batch, 2, 1, frame_sha256=changed),
        _tolerance(vision_design),
    )
    mismatch = report.first_mismatch
    assert mismatch is not None and mismatch.what == "frame"
    assert (mismatch.seed, mismatch.draw, mismatch.replan, mismatch.camera) == (
        planted.seed,
        planted.draw,
        1,
        OVERHEAD,
    )
    assert mismatch.recorded_sha256 == changed
    assert mismatch.replayed_sha256 == planted.replans[1].frame_sha256
    assert report.max_abs_diff == 0.0  # the log-probs alone would not have caught it
    with pytest.raises(RecomputeMismatchError, match=rf"seed {planted.seed}, draw {planted.draw}, replan 1, "
                       rf"frame of {OVERHEAD}: .*frame mismatch") as err:  # fmt: skip
        check_recompute(report, "rollouts.parquet")
    assert "nothing is trained" in str(err.value)
    recorded = report.to_dict()["first_mismatch"]
    assert recorded["what"] == "frame" and recorded["camera"] == OVERHEAD


def test_one_moved_pixel_of_a_stored_frame_fails_the_oracle_naming_frame_and_camera(
    vision_table: Path, vision_design: Prereg, vision_checkpoint: Path
) -> None:
    batch = read_batch(vision_table, vision_design.run_key)
    planted = batch.episodes[1]
    moved = dict(planted.replans[0].frames)  # type: ignore[arg-type]
    moved[OVERHEAD] = moved[OVERHEAD].copy()
    moved[OVERHEAD][48, 48, 1] ^= 1
    report = recompute_batch(
        load_head_model(str(vision_checkpoint)),
        _replace_replan(batch, 1, 0, frames=moved),
        _tolerance(vision_design),
    )
    mismatch = report.first_mismatch
    assert mismatch is not None and mismatch.what == "frame"
    assert (mismatch.seed, mismatch.draw, mismatch.replan) == (planted.seed, planted.draw, 0)
    assert mismatch.recorded_sha256 == planted.replans[0].frame_sha256
    assert mismatch.replayed_sha256 == frame_sha256(moved)
    assert f"frame of {OVERHEAD}" in mismatch.text()
    assert report.max_abs_diff <= _tolerance(vision_design)  # the log-probs alone would have passed


def test_a_replan_without_its_stored_frame_fails_the_oracle_before_any_log_prob(
    vision_table: Path, vision_design: Prereg, vision_checkpoint: Path
) -> None:
    batch = read_batch(vision_table, vision_design.run_key)
    report = recompute_batch(
        load_head_model(str(vision_checkpoint)),
        _replace_replan(batch, 0, 1, frames=None),
        _tolerance(vision_design),
    )
    mismatch = report.first_mismatch
    assert mismatch is not None and mismatch.what == "frame" and mismatch.replayed_sha256 is None
    assert report.entries == 0
    assert "no stored frame" in mismatch.text()


def test_a_flow_grpo_step_on_the_stored_frames_moves_the_image_encoder(
    vision_table: Path, vision_design: Prereg, vision_checkpoint: Path
) -> None:
    batch = read_batch(vision_table, vision_design.run_key)
    assert any(e.advantage != 0.0 for e in batch.kept_episodes)
    recipe = vision_design.phase2.recipe("flow")  # type: ignore[union-attr]
    policy = load_head_model(str(vision_checkpoint))
    before = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
    stats = grpo_update(
        policy,
        None,
        batch,
        recipe,
        vision_design.phase2,
        make_optimizer(policy, recipe),  # type: ignore[arg-type]
    )
    assert stats.updates == vision_design.phase2.minibatches  # type: ignore[union-attr]
    after = policy.model.state_dict()
    encoder = [k for k in before if k.startswith("encoder.")]
    assert encoder and any(not torch.equal(before[k], after[k]) for k in encoder)
