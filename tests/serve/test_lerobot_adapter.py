"""The LeRobot adapter's rules, without LeRobot: fake policies with LeRobot's shape stand in.

Why fakes: LeRobot cannot live in the probe's environment (tests/serve/test_lerobot_venv.py runs the real
one where asked). The fakes have what the adapter touches of LeRobot 0.6's Diffusion and ACT policies
(``config``, ``reset()``, ``predict_action_chunk``, Diffusion's ``diffusion.conditional_sample(...,
generator=)`` and ``num_inference_steps``, ACT's ``model.encoder_latent_input_proj``) and draw from
torch's global generator whenever no generator is handed to them, so an adapter that does not seed a
draw from the row's key fails here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import deque
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from grpo_probe.serve import RowKey, SamplingMode
from grpo_probe.serve.__main__ import main as serve_main
from grpo_probe.serve.lerobot.adapter import LeRobotAdapter, sampler_for
from grpo_probe.serve.lerobot.load import checkpoint_sha256, checkpoint_type
from grpo_probe.serve.lerobot.rows import (
    ActionBounds,
    CameraMap,
    cut_chunk,
    frame_to_chw,
    parse_camera,
    row_seed,
    stack_history,
)
from grpo_probe.user_code import tree_sha256

STATE = "observation.state"
IMAGE = "observation.image"
ODE = SamplingMode("flow_ode", steps=10)


def _feature(kind: str, *shape: int) -> SimpleNamespace:
    return SimpleNamespace(type=kind, shape=shape)


class FakeDiffusionModel:
    """Diffusion's sampler: initial noise and per-step noise from ``generator``, else from torch's
    global generator, as diffusers' DDPM scheduler does."""

    def __init__(self, horizon: int, action_dim: int) -> None:
        self.horizon, self.action_dim = horizon, action_dim
        self.num_inference_steps = 100
        self.steps_run: list[int] = []

    def conditional_sample(
        self, batch_size: int, global_cond: torch.Tensor, generator: Any = None
    ) -> torch.Tensor:
        shape = (batch_size, self.horizon, self.action_dim)
        sample = torch.randn(shape, generator=generator)
        for _ in range(self.num_inference_steps):
            sample = 0.9 * sample + 0.1 * torch.randn(shape, generator=generator) + 0.01 * global_cond.sum()
        self.steps_run.append(self.num_inference_steps)
        return sample


class FakeDiffusionPolicy:
    """LeRobot's DiffusionPolicy: reads [B, n_obs_steps, ...], returns n_action_steps actions from the
    current observation on, in the environment's units (0 to 512)."""

    def __init__(self, images: bool = False) -> None:
        features = {STATE: _feature("STATE", 2)}
        if images:
            features[IMAGE] = _feature("VISUAL", 3, 4, 5)
        self.config = SimpleNamespace(n_obs_steps=2, n_action_steps=4, input_features=features)
        self.diffusion = FakeDiffusionModel(horizon=8, action_dim=2)
        self.resets = 0
        self.seen: list[dict[str, torch.Tensor]] = []

    def reset(self) -> None:
        self.resets += 1

    def predict_action_chunk(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        self.seen.append(dict(batch))
        cond = batch[STATE].flatten(1) / 512.0
        if IMAGE in batch:
            cond = torch.cat([cond, batch[IMAGE].flatten(1).mean(1, keepdim=True)], 1)
        sample = self.diffusion.conditional_sample(cond.shape[0], global_cond=cond)
        start = self.config.n_obs_steps - 1
        return 256.0 + 200.0 * torch.tanh(sample[:, start : start + self.config.n_action_steps])


class FakeACTPolicy:
    """LeRobot's ACT: the latent enters through ``encoder_latent_input_proj`` as zeros at inference;
    returns ``chunk_size`` actions."""

    def __init__(self, use_vae: bool = True) -> None:
        self.config = SimpleNamespace(
            n_obs_steps=1,
            chunk_size=6,
            n_action_steps=3,
            latent_dim=4,
            use_vae=use_vae,
            input_features={STATE: _feature("STATE", 2), "observation.environment_state": _feature("ENV", 3)},
        )
        torch.manual_seed(0)
        self.model = SimpleNamespace(encoder_latent_input_proj=torch.nn.Linear(4, 12))

    def reset(self) -> None:
        pass

    def predict_action_chunk(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        assert batch[STATE].shape == (1, 2)  # ACT reads no history
        latent = self.model.encoder_latent_input_proj(torch.zeros(1, 4))
        return 256.0 + 100.0 * torch.tanh(latent.reshape(1, 6, 2) + batch[STATE].mean() / 512.0)


class FakeGlobalPolicy:
    """Another type (e.g. VQ-BeT): draws from torch's global generator, honours num_inference_steps."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(
            n_obs_steps=1,
            n_action_steps=2,
            num_inference_steps=1,
            input_features={STATE: _feature("STATE", 2)},
        )

    def reset(self) -> None:
        pass

    def predict_action_chunk(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return 256.0 + 50.0 * torch.randn(1, 2 + self.config.num_inference_steps, 2)


class FakeVQBeTPolicy:
    """LeRobot's VQ-BeT: ``predict_action_chunk`` reads only its queues (which ``select_action`` fills)
    and samples codes with ``torch.multinomial`` from the global generator."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(
            n_obs_steps=3,
            action_chunk_size=4,
            image_features={},
            input_features={STATE: _feature("STATE", 2)},
        )
        self._queues: dict[str, deque] = {}

    def reset(self) -> None:
        self._queues = {STATE: deque(maxlen=3), "action": deque(maxlen=4)}

    def predict_action_chunk(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        history = torch.stack(list(self._queues[STATE]), dim=1)
        assert history.shape == (1, 3, 2)
        codes = torch.multinomial(torch.ones(1, 16), num_samples=8, replacement=True).float()
        return 256.0 + history.mean() / 8 + 10.0 * codes.reshape(1, 4, 2)


def _adapter(policy: Any, kind: str, chunk_length: int, cameras: tuple[str, ...] = ()) -> LeRobotAdapter:
    images = [k for k, f in policy.config.input_features.items() if f.type == "VISUAL"]
    return LeRobotAdapter(
        policy,
        sampler_for(kind),
        preprocess=lambda batch: batch,
        postprocess=lambda actions: actions,
        cameras=CameraMap.build(images, cameras),
        bounds=ActionBounds.build(2, {"min": np.zeros(2), "max": np.full(2, 512.0)}),
        chunk_length=chunk_length,
        source=f"fake {kind}",
    )


def _obs(n: int, images: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(n)
    obs = {
        STATE: rng.uniform(0, 512, (n, 2)).astype(np.float32),
        "observation.environment_state": rng.uniform(0, 512, (n, 3)).astype(np.float32),
    }
    if images:
        obs["observation.images.top"] = rng.integers(0, 256, (n, 4, 5, 3), dtype=np.uint8)
    return obs


KEYS = [RowKey(13, 1000, 0, 0), RowKey(13, 1000, 0, 1), RowKey(13, 1001, 2, 0)]


def test_a_rows_seed_is_its_key_and_every_field_counts() -> None:
    base = row_seed(13, 1000, 0, 0)
    assert base == row_seed(13, 1000, 0, 0) and 0 <= base < 2**64
    changed = {
        row_seed(14, 1000, 0, 0),
        row_seed(13, 1001, 0, 0),
        row_seed(13, 1000, 1, 0),
        row_seed(13, 1000, 0, 1),
    }
    assert base not in changed and len(changed) == 4
    with pytest.raises(ValueError, match="draw must be a non-negative integer"):
        row_seed(13, 1000, 0, -1)


@pytest.mark.parametrize(
    ("policy", "kind", "length"),
    [
        (FakeDiffusionPolicy, "diffusion", 4),
        (FakeACTPolicy, "act", 3),
        (FakeVQBeTPolicy, "vqbet", 4),
        (FakeGlobalPolicy, "tdmpc", 2),
    ],
)
def test_each_rows_chunk_is_its_key_alone_and_the_global_generator_is_left_alone(
    policy: Any, kind: str, length: int
) -> None:
    adapter = _adapter(policy(), kind, length)
    obs = _obs(3)
    torch.manual_seed(5)
    first = adapter.act(obs, KEYS, ODE).actions
    after = torch.rand(3)
    torch.manual_seed(99)  # another global state: the rows must not move
    again = adapter.act(obs, KEYS, ODE).actions
    torch.manual_seed(5)
    assert torch.equal(after, torch.rand(3)), "the adapter drew from torch's global generator"
    assert first.dtype == np.float32 and first.shape == (3, length, 2)
    assert first.tobytes() == again.tobytes()
    assert first[0].tobytes() != first[1].tobytes(), "draws 0 and 1 of one observation gave one chunk"
    alone = adapter.act({k: v[2:] for k, v in obs.items()}, KEYS[2:], ODE).actions
    assert alone.tobytes() == first[2:].tobytes()  # a row's bytes do not depend on its batch
    reordered = adapter.act({k: v[::-1] for k, v in obs.items()}, KEYS[::-1], ODE).actions
    assert reordered[::-1].tobytes() == first.tobytes()


def test_diffusion_gets_the_history_the_mode_steps_and_a_fresh_queue_per_row() -> None:
    policy = FakeDiffusionPolicy()
    adapter = _adapter(policy, "diffusion", 4)
    obs = _obs(2)
    adapter.act(obs, KEYS[:2], SamplingMode("flow_ode", steps=7))
    assert policy.diffusion.steps_run == [7, 7] and policy.resets == 2
    state = policy.seen[0][STATE]
    assert state.shape == (1, 2, 2)  # [B, n_obs_steps, state_dim]: the observation, twice
    assert torch.equal(state[0, 0], state[0, 1]) and torch.equal(state[0, 0], torch.from_numpy(obs[STATE][0]))
    assert "conditional_sample" not in vars(policy.diffusion)  # the row's generator is unbound after
    fewer = adapter.act(obs, KEYS[:2], SamplingMode("flow_ode", steps=3)).actions
    assert fewer.tobytes() != adapter.act(obs, KEYS[:2], ODE).actions.tobytes()


def test_acts_latent_comes_from_the_key_and_its_chunk_is_cut_to_the_registered_length() -> None:
    sampled = _adapter(FakeACTPolicy(), "act", 3).act(_obs(2), [KEYS[0], KEYS[1]], ODE).actions
    assert sampled.shape == (2, 3, 2)
    same_obs = {k: np.repeat(v[:1], 2, 0) for k, v in _obs(2).items()}
    no_vae = _adapter(FakeACTPolicy(use_vae=False), "act", 3).act(same_obs, [KEYS[0], KEYS[1]], ODE).actions
    assert no_vae[0].tobytes() == no_vae[1].tobytes()  # trained without its VAE: z = 0, as LeRobot runs it
    with_vae = _adapter(FakeACTPolicy(), "act", 3).act(same_obs, [KEYS[0], KEYS[1]], ODE).actions
    assert with_vae[0].tobytes() != with_vae[1].tobytes()
    with pytest.raises(ValueError, match="returned 6 actions per chunk, fewer than the chunk length 7"):
        _adapter(FakeACTPolicy(), "act", 7).act(_obs(1), KEYS[:1], ODE)


def test_the_probes_camera_feeds_the_checkpoints_image_key() -> None:
    policy = FakeDiffusionPolicy(images=True)
    adapter = _adapter(policy, "diffusion", 4, cameras=("top=observation.image",))
    assert adapter.input_keys == (STATE, "observation.images.top") and adapter.obs_dim == 2
    obs = _obs(1, images=True)
    adapter.act(obs, KEYS[:1], ODE)
    image = policy.seen[0][IMAGE]
    assert image.shape == (1, 2, 3, 4, 5) and image.dtype == torch.float32  # [B, n_obs, C, H, W]
    expected = torch.from_numpy(
        obs["observation.images.top"][0].transpose(2, 0, 1).astype(np.float32) / 255.0
    )
    assert torch.equal(image[0, 1], expected)
    with pytest.raises(ValueError, match=re.escape("reads ['observation.images.top'], not in the request")):
        adapter.act({STATE: obs[STATE]}, KEYS[:1], ODE)


def test_camera_maps_and_their_refusals() -> None:
    assert CameraMap.build(["observation.images.wrist"]).probe_to_checkpoint == {
        "observation.images.wrist": "observation.images.wrist"
    }
    assert parse_camera("top=observation.image") == ("observation.images.top", "observation.image")
    with pytest.raises(ValueError, match=re.escape("--camera CAMERA=observation.image")):
        CameraMap.build([IMAGE])
    with pytest.raises(ValueError, match=re.escape("has no image feature 'observation.images.top'")):
        CameraMap.build([IMAGE], ["top=observation.images.top"])
    with pytest.raises(ValueError, match="expected CAMERA=CHECKPOINT_KEY"):
        parse_camera("observation.image")
    frames = np.zeros((1, 4, 5, 3), np.uint8)
    assert frame_to_chw(frames, "observation.images.top", (3, 4, 5)).shape == (1, 3, 4, 5)
    with pytest.raises(
        ValueError, match=re.escape("observation.images.top: frames uint8 [4, 5, 3], the checkpoint expects")
    ):
        frame_to_chw(frames, "observation.images.top", (3, 96, 96))


def test_history_and_chunk_cutting() -> None:
    value = np.arange(6, dtype=np.float32).reshape(1, 6)
    stacked = stack_history(value, 3)
    assert stacked.shape == (1, 3, 6) and all(np.array_equal(stacked[0, i], value[0]) for i in range(3))
    chunk = np.arange(20.0).reshape(1, 10, 2)
    assert np.array_equal(cut_chunk(chunk, 4, "p"), chunk[:, :4])
    with pytest.raises(ValueError, match="--chunk-length"):
        cut_chunk(chunk, 11, "p")


def test_action_bounds_from_the_statistics_or_the_flags() -> None:
    stats = {"min": np.array([10.0, 20.0]), "max": np.array([110.0, 220.0])}
    bounds = ActionBounds.build(2, stats)
    unit = bounds.to_unit(np.array([[[10.0, 220.0], [60.0, 120.0], [500.0, -5.0]]]))
    assert unit.dtype == np.float32 and unit.tolist() == [[[-1.0, 1.0], [0.0, 0.0], [1.0, -1.0]]]
    flagged = ActionBounds.build(2, stats, low=[0.0], high=[512.0])
    assert flagged.low.tolist() == [0.0, 0.0] and flagged.high.tolist() == [512.0, 512.0]
    with pytest.raises(ValueError, match="no 'min': give the environment's action bounds with --action-low"):
        ActionBounds.build(2, None)
    with pytest.raises(ValueError, match="every high must exceed its low"):
        ActionBounds.build(2, stats, low=[5.0], high=[5.0])
    with pytest.raises(ValueError, match="--action-high: expected 1 or 2 finite values"):
        ActionBounds.build(2, stats, high=[1.0, 2.0, 3.0])


def test_a_kind_other_than_its_own_sampler_is_refused() -> None:
    adapter = _adapter(FakeDiffusionPolicy(), "diffusion", 4)
    assert adapter.capabilities.kinds == ("flow_ode",) and adapter.head == "flow"
    with pytest.raises(ValueError, match="got mode kind 'flow_sde'"):
        adapter.act(_obs(1), KEYS[:1], SamplingMode("flow_sde", sde_a=0.5))


def test_the_checkpoint_folder_is_read_at_the_edge(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=re.escape("not a LeRobot checkpoint folder (no config.json)")):
        checkpoint_type(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"n_obs_steps": 2}))
    with pytest.raises(ValueError, match=re.escape("config.json: field 'type'")):
        checkpoint_type(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"type": "diffusion"}))
    assert checkpoint_type(tmp_path) == "diffusion"
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "lock").write_text("not part of the checkpoint")
    first = checkpoint_sha256(tmp_path)
    assert first == tree_sha256(tmp_path)  # the hash the probe computes of a checkpoint folder
    (tmp_path / "model.safetensors").write_bytes(b"weights, retrained")
    assert checkpoint_sha256(tmp_path) != first


def test_the_package_imports_without_torch_and_the_command_dispatches(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = "import sys, grpo_probe.serve.lerobot.cli; assert 'torch' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    with pytest.raises(SystemExit) as exit_:
        serve_main(["lerobot", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: grpo-probe-serve lerobot") and "CKPT_DIR" in out
