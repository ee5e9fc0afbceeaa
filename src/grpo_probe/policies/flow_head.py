"""The flow head: a conditional flow-matching velocity network and its policy.

Conditional flow matching in openpi's convention (Black et al., pi0, arXiv:2410.24164v1, Sec. 3 / App. B;
Lipman et al., arXiv:2210.02747v2): x_t = t * eps + (1 - t) * a and target velocity u = eps - a, so
t = 1 is noise and t = 0 the (normalized) action chunk. The network is a small MLP over the flattened
chunk, conditioned on an embedding of the normalized observation and a sinusoidal embedding of t.

Modes: ``flow_ode`` = Heun with ``steps`` steps (last step Euler) from keyed initial noise; ``flow_sde`` =
Flow-GRPO SDE with noise scale ``sde_a`` (:mod:`grpo_probe.policies.flow_sde`); ``flow_euler`` = the
deterministic Euler sampler that ``flow_sde`` at ``sde_a = 0`` reproduces bit for bit. The network runs
on the policy's device; initial noise, sampler arithmetic and log-probs stay on the CPU in float64.
Initial noise of a row comes from (run_key, tag("flow_noise"), seed, replan, draw); SDE step noise from
(run_key, tag("flow_sde_noise"), seed, replan, draw, step). Sampling happens in normalized action
space; the chunk is then mapped back to action units and clipped to [-1, 1]. Log-probs are those of
the normalized chunk (the clip is outside the density).

The sampler (:func:`sample_flow_chunks`) takes the network as a conditioning callable, so the
image-conditioned head (:mod:`grpo_probe.policies.vision_flow`) samples with exactly the same code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn

from grpo_probe.keyed_rng import tag
from grpo_probe.policies.ar_head import ROW_BLOCK
from grpo_probe.policies.flow_sde import FlowSampler
from grpo_probe.policies.keyed_torch import torch_generator
from grpo_probe.policies.protocol import PolicyOutput, RowDiagnostics, RowKey, SamplingMode, check_obs_batch
from grpo_probe.sampling import kinds_of_head, sampler_entry

__all__ = [
    "BlockCondition",
    "BlockNet",
    "FlowPolicy",
    "FlowPolicyBase",
    "VelocityMLP",
    "check_flow_mode",
    "flow_noise",
    "sample_flow_chunks",
    "sde_step_noise",
    "state_and_time_nets",
    "time_embedding",
    "velocity_body",
]

_FLOW_NOISE = tag("flow_noise")
_FLOW_SDE_NOISE = tag("flow_sde_noise")


def time_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of t in [0, 1] (Vaswani et al. 2017 frequencies), float32 [B, dim]."""
    half = dim // 2
    freqs = torch.exp(-math.log(1000.0) * torch.arange(half, dtype=torch.float32) / half)
    angles = 100.0 * t[:, None].to(torch.float32) * freqs[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


def state_and_time_nets(obs_dim: int, obs_embed: int, time_embed: int) -> tuple[nn.Sequential, nn.Sequential]:
    """A flow head's state embedding (two Linear layers, SiLU between) and time embedding (one Linear,
    SiLU), built in this order: the order their weights draw from torch's generator, which checkpoints
    of either flow head depend on."""
    obs_net = nn.Sequential(nn.Linear(obs_dim, obs_embed), nn.SiLU(), nn.Linear(obs_embed, obs_embed))
    time_net = nn.Sequential(nn.Linear(time_embed, time_embed), nn.SiLU())
    return obs_net, time_net


def velocity_body(in_width: int, hidden: int, n_layers: int, out_width: int) -> nn.Sequential:
    """A flow head's velocity MLP from its concatenated features (``in_width``) to the flattened chunk
    (``out_width``): ``n_layers`` SiLU layers ``hidden`` wide, then a Linear output."""
    layers: list[nn.Module] = [nn.Linear(in_width, hidden), nn.SiLU()]
    for _ in range(n_layers - 1):
        layers += [nn.Linear(hidden, hidden), nn.SiLU()]
    layers.append(nn.Linear(hidden, out_width))
    return nn.Sequential(*layers)


class VelocityMLP(nn.Module):
    """v_theta(x_t, t, obs): [B, T, D] chunk + [B] time + [B, obs_dim] observation -> [B, T, D]."""

    def __init__(
        self,
        obs_dim: int,
        chunk_length: int,
        action_dims: int,
        hidden: int,
        n_layers: int,
        obs_embed: int,
        time_embed: int,
    ) -> None:
        super().__init__()
        self.chunk_shape = (chunk_length, action_dims)
        self.time_embed = time_embed
        self.obs_net, self.time_net = state_and_time_nets(obs_dim, obs_embed, time_embed)
        width = chunk_length * action_dims
        self.net = velocity_body(width + obs_embed + time_embed, hidden, n_layers, width)

    def forward(self, x: torch.Tensor, t: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        features = torch.cat(
            [x.flatten(1), self.obs_net(obs), self.time_net(time_embedding(t, self.time_embed))], dim=1
        )
        return self.net(features).view(x.shape[0], *self.chunk_shape)


def flow_noise(key: RowKey, shape: tuple[int, ...]) -> torch.Tensor:
    """Initial noise eps ~ N(0, I) of one row (float64), keyed by (run_key, seed, replan, draw)."""
    gen = torch_generator(key.run_key, _FLOW_NOISE, key.seed, key.replan, key.draw)
    return torch.randn(shape, generator=gen, dtype=torch.float64)


def sde_step_noise(key: RowKey, step: int, shape: tuple[int, ...]) -> torch.Tensor:
    """SDE transition noise of one row at one step (float64), keyed with the step index."""
    gen = torch_generator(key.run_key, _FLOW_SDE_NOISE, key.seed, key.replan, key.draw, step)
    return torch.randn(shape, generator=gen, dtype=torch.float64)


BlockNet = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""A velocity network with one row block's condition bound: x_t float32 [ROW_BLOCK, T, D] and t float32
[ROW_BLOCK], both on the network's device -> velocity float32 [ROW_BLOCK, T, D]."""

BlockCondition = Callable[[int, int], BlockNet]
"""(start, stop) -> the network conditioned on rows [start, stop) of the batch, padded to ROW_BLOCK rows."""


def padded_block(rows: np.ndarray) -> np.ndarray:
    """``rows`` [n <= ROW_BLOCK, ...] in a zero array of ``ROW_BLOCK`` rows, same dtype: every block a
    network sees has one shape, so a row's arithmetic never depends on how many rows share its block."""
    block = np.zeros((ROW_BLOCK, *rows.shape[1:]), dtype=rows.dtype)
    block[: len(rows)] = rows
    return block


def check_flow_mode(mode: SamplingMode) -> None:
    """``ValueError`` unless ``mode`` is one of the flow head's kinds (:mod:`grpo_probe.sampling`)."""
    if mode.head != "flow":
        known = ", ".join(repr(k) for k in kinds_of_head("flow"))
        raise ValueError(f"the flow head samples with {known}, got {mode.kind!r}")


def sample_flow_chunks(
    condition: BlockCondition,
    keys: Sequence[RowKey],
    mode: SamplingMode,
    chunk_shape: tuple[int, int],
    action_low: np.ndarray,
    action_high: np.ndarray,
    device: torch.device,
) -> PolicyOutput:
    """Sample one chunk per row in fixed blocks of ``ROW_BLOCK`` rows (the last one padded).

    ``condition(start, stop)`` is called once per block, so a conditioning network (an image encoder)
    runs once per block, not once per integration step. The sampler is the same for every flow head:
    keyed initial and SDE noise per row, sampling in normalized action space, then the chunk mapped
    back to ``[action_low, action_high]`` and clipped to [-1, 1]. A row's bytes depend only on its key
    and its own inputs, never on the other rows of its block, as long as the network treats rows alike.
    """
    actions = np.zeros((len(keys), *chunk_shape), dtype=np.float32)
    diagnostics: list[RowDiagnostics] = []
    for start in range(0, len(keys), ROW_BLOCK):
        block_keys = list(keys[start : start + ROW_BLOCK])
        with torch.no_grad():
            net = condition(start, start + len(block_keys))
        normalized, step_logprobs = _sample_block(net, block_keys, mode, chunk_shape, device)
        for i in range(len(block_keys)):
            chunk = (normalized[i] + 1.0) * 0.5 * (action_high - action_low) + action_low
            actions[start + i] = np.clip(chunk, -1.0, 1.0).astype(np.float32)
            if step_logprobs is None:
                diagnostics.append(RowDiagnostics(logprob=None))
            else:
                row_steps = step_logprobs[i].copy()
                diagnostics.append(RowDiagnostics(logprob=float(row_steps.sum()), step_logprobs=row_steps))
    return PolicyOutput(actions=actions, diagnostics=diagnostics)


@torch.no_grad()
def _sample_block(
    net: BlockNet, keys: list[RowKey], mode: SamplingMode, shape: tuple[int, int], device: torch.device
) -> tuple[np.ndarray, np.ndarray | None]:
    n_rows = len(keys)
    x = torch.zeros((ROW_BLOCK, *shape), dtype=torch.float64)
    for r, key in enumerate(keys):
        x[r] = flow_noise(key, shape)

    def velocity(x_t: torch.Tensor, t: float) -> torch.Tensor:
        t_col = torch.full((ROW_BLOCK,), t, dtype=torch.float32, device=device)
        v = net(x_t.to(device=device, dtype=torch.float32), t_col)
        return v.to(device="cpu", dtype=torch.float64)

    def noise(step: int) -> torch.Tensor:
        out = torch.zeros((ROW_BLOCK, *shape), dtype=torch.float64)
        for r, key in enumerate(keys):
            out[r] = sde_step_noise(key, step, shape)
        return out

    # the kind's registered entry (grpo_probe.policies.flow_sde for the built-in kinds)
    sample: FlowSampler = sampler_entry(mode.kind)
    x0, step_logprobs = sample(velocity, x, mode, noise)
    logprobs = None if step_logprobs is None else step_logprobs[:n_rows].numpy()
    return x0[:n_rows].numpy(), logprobs


class FlowPolicyBase:
    """What every flow policy holds: its network in eval mode on ``device``, the observation normalization
    (float32) and the action bounds (float64) from its checkpoint. The state-only head
    (:class:`FlowPolicy`) and the image-conditioned one
    (:class:`grpo_probe.policies.vision_flow.VisionFlowPolicy`) build on it."""

    head = "flow"

    def __init__(
        self,
        model: torch.nn.Module,
        obs_mean: np.ndarray,
        obs_std: np.ndarray,
        action_low: np.ndarray,
        action_high: np.ndarray,
        device: str = "cpu",
    ) -> None:
        self.device = torch.device(device)
        self.model = model.eval().to(self.device)
        self.obs_mean = np.asarray(obs_mean, dtype=np.float32)
        self.obs_std = np.asarray(obs_std, dtype=np.float32)
        self.action_low = np.asarray(action_low, dtype=np.float64)
        self.action_high = np.asarray(action_high, dtype=np.float64)
        self.obs_dim = int(self.obs_mean.shape[0])


class FlowPolicy(FlowPolicyBase):
    """Flow-matching policy; implements :class:`grpo_probe.policies.protocol.Policy`."""

    model: VelocityMLP

    def act(self, obs: np.ndarray, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        check_flow_mode(mode)
        obs = check_obs_batch(obs, keys, self.obs_dim)

        def condition(start: int, stop: int) -> BlockNet:
            cond = padded_block((obs[start:stop] - self.obs_mean) / self.obs_std)
            cond_t = torch.from_numpy(cond).to(self.device)
            return lambda x_t, t: self.model(x_t, t, cond_t)

        return sample_flow_chunks(
            condition, keys, mode, self.model.chunk_shape, self.action_low, self.action_high, self.device
        )
