"""Random-weight LeRobot checkpoints of PushT's keys, built from LeRobot's own config classes.

Run by the LeRobot environment's Python (tests/serve/test_lerobot_venv.py), never imported by the
suite: ``python lerobot_checkpoints.py OUT_DIR`` writes ``OUT_DIR/diffusion``, ``OUT_DIR/act`` and
``OUT_DIR/diffusion_image`` and ``OUT_DIR/vqbet_image`` (LeRobot's single-camera
``observation.image``, 3 x 48 x 64), each
a folder as LeRobot's ``save_pretrained`` writes it (config.json, model.safetensors, and the pre- and
post-processors with their normalization statistics), which is what a lab's trained checkpoint holds.
The weights are random (seeded), the statistics PushT's ranges: positions and the action in 0 to 512
pixels. Small networks, so a CPU serves a row in milliseconds.

``python lerobot_checkpoints.py OUT_DIR --default-size`` writes ``OUT_DIR/diffusion_default`` alone: a
Diffusion Policy of PushT's state keys at LeRobot's default size (its config's defaults, 249 M
parameters), so that what a served row costs can be measured on the network a lab trains
(docs/lerobot.md; benchmarks/served_row_cost.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy
from lerobot.policies.factory import make_pre_post_processors
from lerobot.policies.vqbet.configuration_vqbet import VQBeTConfig
from lerobot.policies.vqbet.modeling_vqbet import VQBeTPolicy

INPUTS = {
    "observation.state": PolicyFeature(FeatureType.STATE, (2,)),  # the disk's x, y
    "observation.environment_state": PolicyFeature(FeatureType.ENV, (16,)),  # the T's keypoints
}
OUTPUTS = {"action": PolicyFeature(FeatureType.ACTION, (2,))}


def _stats(width: int) -> dict[str, torch.Tensor]:
    """PushT's pixel range as a dataset's statistics would give it."""
    return {
        "min": torch.zeros(width),
        "max": torch.full((width,), 512.0),
        "mean": torch.full((width,), 256.0),
        "std": torch.full((width,), 148.0),
    }


STATS = {"observation.state": _stats(2), "observation.environment_state": _stats(16), "action": _stats(2)}
IMAGE_STATS = {
    "observation.image": {
        "mean": torch.full((3, 1, 1), 0.5),
        "std": torch.full((3, 1, 1), 0.25),
        "min": torch.zeros(3, 1, 1),
        "max": torch.ones(3, 1, 1),
    }
}


def _save(policy: object, config: object, folder: Path) -> None:
    preprocessor, postprocessor = make_pre_post_processors(config, dataset_stats={**STATS, **IMAGE_STATS})
    for part in (policy, preprocessor, postprocessor):
        part.save_pretrained(folder)


def default_size(out: Path) -> None:
    """A Diffusion Policy of PushT's keys at LeRobot's default size: every field but the features its
    config's default (a horizon of 64, 32 actions per chunk, a U-Net of 512, 1024 and 2048 channels)."""
    torch.manual_seed(0)
    config = DiffusionConfig(input_features=INPUTS, output_features=OUTPUTS, device="cpu")
    _save(DiffusionPolicy(config), config, out / "diffusion_default")


def main(out: Path) -> None:
    torch.manual_seed(0)
    diffusion = DiffusionConfig(
        input_features=INPUTS,
        output_features=OUTPUTS,
        device="cpu",
        n_obs_steps=2,
        horizon=16,
        n_action_steps=8,
        down_dims=(32, 64),
        diffusion_step_embed_dim=32,
    )
    _save(DiffusionPolicy(diffusion), diffusion, out / "diffusion")
    act = ACTConfig(
        input_features=INPUTS,
        output_features=OUTPUTS,
        device="cpu",
        chunk_size=16,  # more than the design executes: the adapter cuts the chunk
        n_action_steps=8,
        dim_model=64,
        n_heads=4,
        dim_feedforward=128,
        n_encoder_layers=1,
        n_vae_encoder_layers=1,
        latent_dim=8,
    )
    _save(ACTPolicy(act), act, out / "act")
    camera = DiffusionConfig(
        input_features={
            "observation.state": INPUTS["observation.state"],
            "observation.image": PolicyFeature(FeatureType.VISUAL, (3, 48, 64)),
        },
        output_features=OUTPUTS,
        device="cpu",
        n_obs_steps=2,
        horizon=16,
        n_action_steps=8,
        down_dims=(32, 64),
        diffusion_step_embed_dim=32,
        pretrained_backbone_weights=None,  # random weights: nothing to download
        use_group_norm=True,
        spatial_softmax_num_keypoints=8,
    )
    _save(DiffusionPolicy(camera), camera, out / "diffusion_image")
    vqbet = VQBeTConfig(
        input_features=camera.input_features,
        output_features=OUTPUTS,
        device="cpu",
        n_obs_steps=2,
        n_action_pred_token=3,
        action_chunk_size=8,
        crop_shape=None,
        pretrained_backbone_weights=None,
    )
    _save(VQBeTPolicy(vqbet), vqbet, out / "vqbet_image")


if __name__ == "__main__":
    if sys.argv[2:] == ["--default-size"]:
        default_size(Path(sys.argv[1]))
    else:
        main(Path(sys.argv[1]))
