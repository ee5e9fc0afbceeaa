"""Image-conditioned flow head: demos with frames, reproducible training, row invariance, input checks."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.demo_set import Demos
from grpo_probe.envs.demos import collect_env_demos
from grpo_probe.envs.observation import CameraConfig, ObservationBatch, image_key
from grpo_probe.envs.registry import boat_env
from grpo_probe.policies import Policy, RowKey, SamplingMode, load_policy
from grpo_probe.policies.checkpoint import file_sha256, read_checkpoint
from grpo_probe.policies.models import FlowTrainConfig, VisionFlowTrainConfig
from grpo_probe.policies.synthetic_demos import synthetic_demos
from grpo_probe.policies.train import head_config, train_arm, train_vision_flow
from grpo_probe.policies.vision_flow import VisionFlowPolicy

OVERHEAD = image_key("overhead")
VISION_INPUTS = ("observation.state", OVERHEAD)
TINY_VISION = VisionFlowTrainConfig(
    hidden=64,
    n_layers=2,
    obs_embed=16,
    time_embed=16,
    image_embed=16,
    channels=8,
    steps=5,
    batch_size=8,
    warmup_steps=2,
)


def _frames(n: int, seed: int = 0, size: int = 96) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, size, size, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def vision_demos() -> Demos:
    synthetic = synthetic_demos(48, run_key=11)
    return Demos(
        obs=synthetic.obs,
        chunks=synthetic.chunks,
        seeds=np.arange(48, dtype=np.int64),
        images={OVERHEAD: _frames(48)},
    )


@pytest.fixture(scope="module")
def vision_checkpoint(tmp_path_factory: pytest.TempPathFactory, vision_demos: Demos) -> Path:
    path = tmp_path_factory.mktemp("vision") / "vision.pt"
    train_vision_flow(vision_demos, TINY_VISION, "overhead", path)
    return path


@pytest.fixture(scope="module")
def policy(vision_checkpoint: Path) -> VisionFlowPolicy:
    loaded = load_policy(vision_checkpoint)
    assert isinstance(loaded, VisionFlowPolicy)
    return loaded


def _keys(n: int) -> list[RowKey]:
    return [RowKey(run_key=5, seed=300 + i, replan=1, draw=0) for i in range(n)]


def _obs(demos: Demos, rows: slice) -> ObservationBatch:
    values = {"observation.state": demos.obs[rows], OVERHEAD: demos.images[OVERHEAD][rows]}
    return ObservationBatch(values, head="flow")


def test_demos_with_frames_round_trip_through_save_and_load(tmp_path: Path, vision_demos: Demos) -> None:
    path = tmp_path / "demos.npz"
    vision_demos.save(path)
    assert zipfile.ZipFile(path).namelist() == ["obs.npy", "chunks.npy", "seeds.npy", "images.overhead.npy"]
    loaded = Demos.load(path, obs_dim=None)
    assert list(loaded.images) == [OVERHEAD]
    assert loaded.images[OVERHEAD].tobytes() == vision_demos.images[OVERHEAD].tobytes()
    assert loaded.obs.tobytes() == vision_demos.obs.tobytes()
    vision_demos.save(tmp_path / "again.npz")
    assert (tmp_path / "again.npz").read_bytes() == path.read_bytes()


def test_state_only_demos_keep_the_bytes_of_the_three_member_file(
    tmp_path: Path, vision_demos: Demos
) -> None:
    """Demos without frames write exactly what ``np.savez(obs, chunks, seeds)`` always wrote."""
    state_only = Demos(obs=vision_demos.obs, chunks=vision_demos.chunks, seeds=vision_demos.seeds)
    path = tmp_path / "demos.npz"
    state_only.save(path)
    reference = io.BytesIO()
    np.savez(reference, obs=state_only.obs, chunks=state_only.chunks, seeds=state_only.seeds)
    assert path.read_bytes() == reference.getvalue()
    assert Demos.load(path, obs_dim=None).images == {}


@pytest.mark.parametrize(
    "frames",
    [
        np.zeros((48, 8, 8, 3), dtype=np.float32),  # wrong dtype
        np.zeros((47, 8, 8, 3), dtype=np.uint8),  # wrong rows
        np.zeros((48, 8, 8, 4), dtype=np.uint8),  # not RGB
        np.zeros((48, 8, 8), dtype=np.uint8),  # not 4-D
    ],
)
def test_ill_formed_frames_in_a_demos_file_name_the_file_and_the_array(
    tmp_path: Path, vision_demos: Demos, frames: np.ndarray
) -> None:
    path = tmp_path / "bad.npz"
    with path.open("wb") as fh:
        np.savez(
            fh,
            obs=vision_demos.obs,
            chunks=vision_demos.chunks,
            seeds=vision_demos.seeds,
            **{"images.overhead": frames},
        )
    with pytest.raises(ValueError, match=r"bad\.npz: demos images 'observation\.images\.overhead'"):
        Demos.load(path, obs_dim=None)


def test_training_twice_gives_the_same_vision_checkpoint_sha256(
    tmp_path: Path, vision_demos: Demos, vision_checkpoint: Path
) -> None:
    sha = train_arm("flow", vision_demos, tmp_path / "again.pt", TINY_VISION.to_dict(), inputs=VISION_INPUTS)
    assert sha == file_sha256(vision_checkpoint)
    other = VisionFlowTrainConfig.from_dict({**TINY_VISION.to_dict(), "seed": 1})
    assert train_vision_flow(vision_demos, other, "overhead", tmp_path / "other.pt") != sha


def test_the_checkpoint_stores_the_camera_beside_the_numeric_config(vision_checkpoint: Path) -> None:
    ckpt = read_checkpoint(vision_checkpoint, expected_kind="vision_flow")
    assert ckpt.config == {"camera": "overhead", **TINY_VISION.to_dict()}


def test_the_policy_declares_the_state_and_its_camera(policy: VisionFlowPolicy) -> None:
    assert isinstance(policy, Policy)
    assert policy.head == "flow"
    assert policy.input_keys == ("observation.state", OVERHEAD)
    assert policy.camera == "overhead"
    assert policy.image_shape == (96, 96, 3)
    assert policy.obs_dim == 17


@pytest.mark.parametrize("mode", [SamplingMode("flow_ode"), SamplingMode("flow_sde", sde_a=0.5)])
def test_vision_rows_do_not_depend_on_batch_rows(
    policy: VisionFlowPolicy, vision_demos: Demos, mode: SamplingMode
) -> None:
    keys = _keys(5)
    batch = policy.act(_obs(vision_demos, slice(0, 5)), keys, mode)
    for row in range(5):
        alone = policy.act(_obs(vision_demos, slice(row, row + 1)), keys[row : row + 1], mode)
        assert batch.actions[row].tobytes() == alone.actions[0].tobytes()
        if mode.kind == "flow_sde":
            assert (
                batch.diagnostics[row].step_logprobs.tobytes() == alone.diagnostics[0].step_logprobs.tobytes()
            )
            assert batch.diagnostics[row].logprob == alone.diagnostics[0].logprob
        else:
            assert batch.diagnostics[row].logprob is None


def test_the_frame_conditions_the_actions(policy: VisionFlowPolicy, vision_demos: Demos) -> None:
    obs = {"observation.state": vision_demos.obs[:2], OVERHEAD: vision_demos.images[OVERHEAD][:2]}
    other = {**obs, OVERHEAD: _frames(2, seed=9)}
    a = policy.act(obs, _keys(2), SamplingMode("flow_ode", steps=4))
    b = policy.act(other, _keys(2), SamplingMode("flow_ode", steps=4))
    assert not np.array_equal(a.actions, b.actions)


def test_the_encoder_runs_once_per_row_block_not_per_step(
    policy: VisionFlowPolicy, vision_demos: Demos, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    condition = policy.model.condition

    def counted(obs: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        calls.append(len(obs))
        return condition(obs, image)

    monkeypatch.setattr(policy.model, "condition", counted)
    keys = [RowKey(run_key=5, seed=i, replan=0, draw=0) for i in range(9)]
    obs = {"observation.state": vision_demos.obs[:9], OVERHEAD: vision_demos.images[OVERHEAD][:9]}
    policy.act(obs, keys, SamplingMode("flow_ode", steps=10))
    assert calls == [8, 8]  # two padded blocks of ROW_BLOCK = 8 rows


def test_the_split_network_is_its_forward(policy: VisionFlowPolicy, vision_demos: Demos) -> None:
    model = policy.model
    x = torch.randn((3, *model.chunk_shape), generator=torch.Generator().manual_seed(0))
    t = torch.tensor([0.9, 0.5, 0.1])
    obs = torch.from_numpy(vision_demos.obs[:3])
    image = torch.from_numpy(vision_demos.images[OVERHEAD][:3])
    with torch.no_grad():
        assert torch.equal(model(x, t, obs, image), model.velocity(x, t, model.condition(obs, image)))


def test_missing_or_ill_shaped_frames_are_errors_naming_the_key(
    policy: VisionFlowPolicy, vision_demos: Demos
) -> None:
    keys, mode = _keys(2), SamplingMode("flow_ode")
    state = vision_demos.obs[:2]
    with pytest.raises(ValueError, match=r"lacks 'observation\.images\.overhead'"):
        policy.act({"observation.state": state}, keys, mode)
    with pytest.raises(ValueError, match=r"lacks 'observation\.images\.overhead'"):
        policy.act(ObservationBatch({"observation.state": state}, head="flow"), keys, mode)
    bad_frames = {
        "dtype": vision_demos.images[OVERHEAD][:2].astype(np.float32),
        "size": _frames(2, size=64),
        "rows": _frames(3),
    }
    for frames in bad_frames.values():
        with pytest.raises(
            ValueError, match=r"observation\.images\.overhead: must be uint8 of shape \(2, 96, 96, 3\)"
        ):
            policy.act({"observation.state": state, OVERHEAD: frames}, keys, mode)
    with pytest.raises(ValueError, match=r"observation\.state: obs must have shape \[B, 17\]"):
        policy.act({"observation.state": state[:, :5], OVERHEAD: _frames(2)}, keys, mode)
    with pytest.raises(ValueError, match="observation mapping"):
        policy.act(state, keys, mode)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="greedy"):
        policy.act({"observation.state": state, OVERHEAD: _frames(2)}, keys, SamplingMode("greedy"))


def test_a_corrupted_vision_checkpoint_is_detected(tmp_path: Path, vision_checkpoint: Path) -> None:
    payload = torch.load(vision_checkpoint, weights_only=True)
    conv = next(k for k in payload["state_dict"] if k.startswith("encoder.0."))
    payload["state_dict"][conv] = payload["state_dict"][conv] + 1e-3
    bad = tmp_path / "edited.pt"
    torch.save(payload, bad)
    with pytest.raises(ValueError, match=r"edited\.pt: checkpoint is corrupted"):
        load_policy(bad)


def test_train_arm_refuses_inputs_the_demos_or_the_head_cannot_serve(
    tmp_path: Path, vision_demos: Demos
) -> None:
    out = tmp_path / "never.pt"
    state_only = Demos(obs=vision_demos.obs, chunks=vision_demos.chunks, seeds=vision_demos.seeds)
    with pytest.raises(
        ValueError, match=r"arm x: the arm reads 'observation\.images\.overhead', but the demos"
    ):
        train_arm("flow", state_only, out, TINY_VISION.to_dict(), where="arm x", inputs=VISION_INPUTS)
    two = (*VISION_INPUTS, image_key("side"))
    with pytest.raises(ValueError, match="arm x: the image-conditioned flow head reads one camera"):
        train_arm("flow", vision_demos, out, where="arm x", inputs=two)
    with pytest.raises(ValueError, match="arm x: head 'ar' reads the state only"):
        train_arm("ar", vision_demos, out, where="arm x", inputs=VISION_INPUTS)
    with pytest.raises(ValueError, match=r"arm x: demos: observation\.images\.overhead frames are 96x96"):
        train_arm("flow", vision_demos, out, {"image_height": 64}, where="arm x", inputs=VISION_INPUTS)
    assert not out.exists()


def test_head_config_validates_an_arms_settings_against_the_vision_config() -> None:
    config = head_config("flow", {"image_embed": 64, "steps": 10}, "arm v", vision=True)
    assert isinstance(config, VisionFlowTrainConfig)
    assert (config.image_embed, config.steps, config.batch_size) == (
        64,
        10,
        VisionFlowTrainConfig().batch_size,
    )
    assert isinstance(head_config("flow"), FlowTrainConfig)
    with pytest.raises(ValueError, match=r"arm s: unknown field 'image_embed'"):
        head_config("flow", {"image_embed": 64}, "arm s")
    with pytest.raises(ValueError, match=r"arm v\.channels must be an integer"):
        head_config("flow", {"channels": 1.5}, "arm v", vision=True)


def test_boat_demos_record_the_overhead_frame_at_each_replan() -> None:
    config = boat_env(SimParams(replans=2))
    camera = CameraConfig("overhead", 32, 32)
    with_frames = collect_env_demos(config, seeds=[0, 1], noise=0.05, run_key=3, cameras=[camera])
    state_only = collect_env_demos(config, seeds=[0, 1], noise=0.05, run_key=3)
    frames = with_frames.images[OVERHEAD]
    assert frames.dtype == np.uint8
    assert frames.shape == (len(with_frames.obs), 32, 32, 3)
    assert state_only.images == {}
    assert with_frames.obs.tobytes() == state_only.obs.tobytes()  # rendering leaves the episode alone
    assert with_frames.chunks.tobytes() == state_only.chunks.tobytes()
    assert not np.array_equal(frames[0], frames[2])  # another seed shows another scene
