"""The image-conditioned flow head: a small CNN over one camera frame plus the state, then the same flow.

Why a second flow head: the state-only head cannot tell whether a policy that sees pixels behaves
differently under the probe. This head keeps everything of :mod:`grpo_probe.policies.flow_head` (openpi
time convention, keyed noise, the Heun / Euler / Flow-GRPO SDE samplers, fixed padded row blocks,
normalization and clipping) and changes only what the velocity network is conditioned on: the
normalized state vector and one uint8 RGB frame of a registered camera.

The network splits into ``condition(obs_norm, image) -> cond`` (CNN encoder, state MLP) and
``velocity(x_t, t, cond)`` (time embedding and the velocity MLP over the flattened chunk), so the
sampler encodes each block's frames once and integrates with the condition bound.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from grpo_probe.envs.observation import OBSERVATION_STATE, image_key
from grpo_probe.policies.flow_head import (
    BlockNet,
    FlowPolicyBase,
    check_flow_mode,
    padded_block,
    sample_flow_chunks,
    state_and_time_nets,
    time_embedding,
    velocity_body,
)
from grpo_probe.policies.protocol import PolicyOutput, RowKey, SamplingMode, check_obs_batch

__all__ = ["CONV_LAYERS", "VisionFlowPolicy", "VisionVelocityNet", "encoder_grid"]

CONV_LAYERS = 4
"""Stride-2 3x3 convolutions of the image encoder; each halves the frame (rounding up)."""


def encoder_grid(height: int, width: int) -> tuple[int, int]:
    """Spatial size of the encoder's last feature map for a ``height`` x ``width`` frame (96 -> 6)."""
    for _ in range(CONV_LAYERS):
        height, width = (height + 1) // 2, (width + 1) // 2
    return height, width


class VisionVelocityNet(nn.Module):
    """v_theta(x_t, t, obs, image): chunk [B, T, D], time [B], obs [B, S], uint8 [B, H, W, 3] -> [B, T, D].

    Encoder: the frame as float32 / 255, four stride-2 3x3 convolutions (3 -> channels/2 -> channels ->
    channels -> channels, SiLU after each), flattened, a Linear to ``image_embed``. The state goes through
    an MLP like :class:`~grpo_probe.policies.flow_head.VelocityMLP`'s ``obs_net``; the velocity MLP reads
    the flattened chunk, both embeddings and the sinusoidal time embedding.
    """

    def __init__(
        self,
        obs_dim: int,
        chunk_length: int,
        action_dims: int,
        image_height: int,
        image_width: int,
        channels: int,
        image_embed: int,
        hidden: int,
        n_layers: int,
        obs_embed: int,
        time_embed: int,
    ) -> None:
        super().__init__()
        self.chunk_shape = (chunk_length, action_dims)
        self.image_shape = (image_height, image_width, 3)
        self.time_embed = time_embed
        widths = [3, max(1, channels // 2)] + [channels] * (CONV_LAYERS - 1)
        convs: list[nn.Module] = []
        for c_in, c_out in itertools.pairwise(widths):
            convs += [nn.Conv2d(c_in, c_out, kernel_size=3, stride=2, padding=1), nn.SiLU()]
        grid_h, grid_w = encoder_grid(image_height, image_width)
        self.encoder = nn.Sequential(*convs, nn.Flatten(), nn.Linear(channels * grid_h * grid_w, image_embed))
        self.obs_net, self.time_net = state_and_time_nets(obs_dim, obs_embed, time_embed)
        width = chunk_length * action_dims
        self.net = velocity_body(width + obs_embed + image_embed + time_embed, hidden, n_layers, width)

    def condition(self, obs: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        """Normalized state float32 [B, obs_dim], frame uint8 [B, H, W, 3] -> [B, obs_embed + image_embed]."""
        pixels = image.permute(0, 3, 1, 2).to(torch.float32) / 255.0  # [B, 3, H, W] in [0, 1]
        return torch.cat([self.obs_net(obs), self.encoder(pixels)], dim=1)

    def velocity(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """Velocity of chunk ``x`` [B, T, D] at times ``t`` [B] under a :meth:`condition` ``cond``."""
        features = torch.cat([x.flatten(1), cond, self.time_net(time_embedding(t, self.time_embed))], dim=1)
        return self.net(features).view(x.shape[0], *self.chunk_shape)

    def forward(
        self, x: torch.Tensor, t: torch.Tensor, obs: torch.Tensor, image: torch.Tensor
    ) -> torch.Tensor:
        return self.velocity(x, t, self.condition(obs, image))


class VisionFlowPolicy(FlowPolicyBase):
    """Flow-matching policy over the state and one camera's frames.

    Reads an observation mapping (:class:`grpo_probe.envs.observation.ObservationBatch`) holding
    ``observation.state`` float32 [B, obs_dim] and ``observation.images.<camera>`` uint8 [B, H, W, 3];
    ``input_keys`` declares exactly those two, so the rollout engine renders the camera for it.
    Sampling is :func:`grpo_probe.policies.flow_head.sample_flow_chunks`, as for the state-only head.
    """

    model: VisionVelocityNet

    def __init__(
        self,
        model: VisionVelocityNet,
        camera: str,
        obs_mean: np.ndarray,
        obs_std: np.ndarray,
        action_low: np.ndarray,
        action_high: np.ndarray,
        device: str = "cpu",
    ) -> None:
        super().__init__(model, obs_mean, obs_std, action_low, action_high, device)
        self.camera = camera
        self.image_shape: tuple[int, int, int] = model.image_shape
        """(H, W, 3) of the frames the encoder was built for."""
        self.input_keys: tuple[str, ...] = (OBSERVATION_STATE, image_key(camera))

    def check_observation(
        self, obs: Mapping[str, Any], keys: Sequence[RowKey]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Validate an ``act`` call's observation mapping; returns (state float32 [B, obs_dim], frames uint8
        [B, H, W, 3]). A missing key or an ill-typed array is a ``ValueError`` naming the key."""
        if not isinstance(obs, Mapping):
            raise ValueError(
                f"the vision flow head reads an observation mapping with {', '.join(self.input_keys)}, "
                f"got {type(obs).__name__}"
            )
        frame_key = self.input_keys[1]
        for key in self.input_keys:
            if key not in obs:
                raise ValueError(
                    f"observation lacks {key!r} (the vision flow head reads {', '.join(self.input_keys)})"
                )
        try:
            state = check_obs_batch(obs[OBSERVATION_STATE], keys, self.obs_dim)
        except ValueError as exc:
            raise ValueError(f"{OBSERVATION_STATE}: {exc}") from None
        frames = obs[frame_key]
        expected = (len(keys), *self.image_shape)
        if not isinstance(frames, np.ndarray) or frames.dtype != np.uint8 or frames.shape != expected:
            found = f"{getattr(frames, 'dtype', type(frames).__name__)} {getattr(frames, 'shape', '')}"
            raise ValueError(f"{frame_key}: must be uint8 of shape {expected} ([B, H, W, 3]), got {found}")
        return state, frames

    def act(self, obs: Mapping[str, Any], keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        check_flow_mode(mode)
        state, frames = self.check_observation(obs, keys)

        def condition(start: int, stop: int) -> BlockNet:
            state_block = padded_block((state[start:stop] - self.obs_mean) / self.obs_std)
            frame_block = padded_block(frames[start:stop])
            cond = self.model.condition(
                torch.from_numpy(state_block).to(self.device), torch.from_numpy(frame_block).to(self.device)
            )
            return lambda x_t, t: self.model.velocity(x_t, t, cond)

        return sample_flow_chunks(
            condition, keys, mode, self.model.chunk_shape, self.action_low, self.action_high, self.device
        )
