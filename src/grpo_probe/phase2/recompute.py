"""Recomputing recorded log-probs under the current parameters: what the loss differentiates and the
oracle (:mod:`grpo_probe.phase2.recompute_oracle`) checks.

Why: GRPO's importance ratio is pi_theta(a) / pi_old(a), with pi_old the log-prob the rollout recorded.
Before the first update theta is the rollout's own parameters, so the ratio must be 1: the trainer's
recomputation must equal the sampler's record. A mismatch (another temperature, a missing grammar mask,
a shifted token, a chain regenerated with other noise) is the classic silent bug of RL stacks: training
then runs on a biased ratio and nothing crashes. So the functions the loss differentiates are the ones
the oracle checks, and a mismatch stops training, naming seed, draw, replan and token position or step.

- AR head: teacher forcing over the recorded ids, log softmax(masked_logits / T) with the sampler's
  grammar mask at each position (only ids that keep the decoded coefficient count <= 300), built from
  the model's ``forward`` and the tokenizer's coefficient counts
  (:func:`grpo_probe.policies.ar_head.grammar_mask_table`). Sampling ran the KV-cached decode step, so the
  two agree up to float32 rounding (registered tolerance ``phase2.heads.ar.replay_atol``).
- Flow head: the chain x_{t_0} .. x_{t_steps} is regenerated from the row's keys exactly as the SDE
  sampler drew it (keyed initial noise, keyed step noise, the same blocks of 8 rows), then each transition
  is scored: log N(x_{t_{i+1}}; mean_theta(x_{t_i}), std_i^2 I) summed over the chunk
  (:func:`grpo_probe.policies.flow_sde.sde_step` and ``gaussian_logprob``, the sampler's own functions).
  The chain is regenerated in the sampler's blocks of 8 rows, so it is the sampled chain bit for bit;
  scoring runs in the loss's larger blocks, so it agrees with the record up to float32 rounding of the
  velocity network (registered tolerance ``phase2.heads.flow.replay_atol``).
- Camera-fed flow head: the velocity network is conditioned on the state and the frames the policy saw,
  stored with each replan. Before any log-prob is compared, the oracle hashes the stored frames
  (:func:`grpo_probe.envs.observation.frame_sha256`) and compares the digest with the one the rollout
  engine recorded when it rendered them, as the probe's oracles compare frames: a frame the update would
  condition on that is not the frame the sampler saw fails as a frame mismatch, naming seed, draw, replan
  and camera, before it can show up as a log-prob mismatch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from grpo_probe.envs.observation import camera_of
from grpo_probe.phase2.rollouts import Episode, Replan, RolloutBatch
from grpo_probe.policies.ar_head import ROW_BLOCK, grammar_mask_table
from grpo_probe.policies.ar_model import ARTransformer
from grpo_probe.policies.checkpoint import Checkpoint, policy_from_checkpoint, read_checkpoint
from grpo_probe.policies.fast_tokenizer import FastTokenizer
from grpo_probe.policies.flow_head import VelocityMLP, flow_noise, padded_block, sde_step_noise
from grpo_probe.policies.flow_sde import gaussian_logprob, sde_step, time_grid
from grpo_probe.policies.protocol import RowKey, SamplingMode
from grpo_probe.policies.vision_flow import VisionVelocityNet

__all__ = [
    "FlowStepLogprobs",
    "HeadModel",
    "TokenBatch",
    "ar_logprobs",
    "flow_chains",
    "flow_step_logprobs",
    "load_head_model",
    "recompute_logprobs",
    "score_units",
    "token_batch",
    "unit_chains",
    "unit_frames",
]


@dataclass
class HeadModel:
    """A head's trainable network with what maps recorded rollouts onto its inputs.

    Mutable on purpose: the trainer updates ``model`` in place. ``checkpoint`` keeps the kind, config,
    tokenizer and normalization statistics the trainer writes back with the new weights.
    """

    head: str
    model: nn.Module
    obs_mean: np.ndarray
    obs_std: np.ndarray
    checkpoint: Checkpoint
    tokenizer: FastTokenizer | None = None
    mask_table: np.ndarray | None = field(default=None, repr=False)
    frame_keys: tuple[str, ...] = ()
    """The ``observation.images.<camera>`` keys a camera-fed head reads (empty: the state alone)."""

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """(obs - mean) / std in float32, the policies' observation conditioning."""
        return (np.asarray(obs, dtype=np.float32) - self.obs_mean) / self.obs_std


def load_head_model(path: str, *, trainable: bool = True) -> HeadModel:
    """Load a checkpoint's network on the CPU; ``trainable=False`` freezes it (the KL reference)."""
    ckpt = read_checkpoint(path)
    policy: Any = policy_from_checkpoint(ckpt, device="cpu")
    model: nn.Module = policy.model
    model.eval()  # no dropout anywhere; eval keeps the module state the sampler used
    for param in model.parameters():
        param.requires_grad_(trainable)
    if ckpt.kind == "ar":
        tokenizer: FastTokenizer = policy.tokenizer
        table = grammar_mask_table(tokenizer.coefficient_counts, tokenizer.n_coefficients, tokenizer.eos_id)
        return HeadModel("ar", model, policy.obs_mean, policy.obs_std, ckpt, tokenizer, table)
    frame_keys = tuple(k for k in getattr(policy, "input_keys", ()) if camera_of(k) is not None)
    return HeadModel("flow", model, policy.obs_mean, policy.obs_std, ckpt, frame_keys=frame_keys)


# -- AR head ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenBatch:
    """Recorded replans of the AR head as teacher-forcing tensors, [S sequences, L positions]."""

    obs: torch.Tensor
    """float32 [S, obs_dim], normalized."""
    inputs: torch.Tensor
    """int64 [S, L]: BOS then the recorded ids, shifted right (EOS pads)."""
    targets: torch.Tensor
    """int64 [S, L]: the recorded ids (EOS pads)."""
    remaining: np.ndarray
    """int64 [S, L]: coefficients still to emit before each position (0 at pads: only EOS admissible)."""
    mask: torch.Tensor
    """bool [S, L]: valid (recorded) positions."""
    old_logprob: torch.Tensor
    """float64 [S, L]: the recorded log-probs (0 at pads)."""


def token_batch(head_model: HeadModel, replans: Sequence[Replan]) -> TokenBatch:
    """Teacher-forcing tensors of ``replans`` (each with ``token_ids`` and ``token_logprobs``)."""
    tokenizer = head_model.tokenizer
    if tokenizer is None:
        raise ValueError("token_batch needs an AR head")
    counts = np.asarray(tokenizer.coefficient_counts, dtype=np.int64)
    width = max(len(r.token_ids) for r in replans)  # type: ignore[arg-type]
    n = len(replans)
    inputs = np.full((n, width), tokenizer.eos_id, dtype=np.int64)
    targets = np.full((n, width), tokenizer.eos_id, dtype=np.int64)
    remaining = np.zeros((n, width), dtype=np.int64)
    mask = np.zeros((n, width), dtype=bool)
    old = np.zeros((n, width), dtype=np.float64)
    for s, replan in enumerate(replans):
        ids, logps = replan.token_ids, replan.token_logprobs
        if ids is None or logps is None or len(ids) != len(logps) or len(ids) == 0:
            raise ValueError(f"replan {replan.replan}: AR token ids and log-probs are missing or differ")
        k = len(ids)
        inputs[s, 0] = tokenizer.bos_id
        inputs[s, 1:k] = ids[:-1]
        targets[s, :k] = ids
        emitted = np.concatenate([[0], np.cumsum(counts[ids])[:-1]])  # coefficients before each position
        remaining[s, :k] = tokenizer.n_coefficients - emitted
        mask[s, :k] = True
        old[s, :k] = logps
    obs = np.stack([head_model.normalize(r.obs) for r in replans])
    return TokenBatch(
        obs=torch.from_numpy(obs),
        inputs=torch.from_numpy(inputs),
        targets=torch.from_numpy(targets),
        remaining=remaining,
        mask=torch.from_numpy(mask),
        old_logprob=torch.from_numpy(old),
    )


def ar_logprobs(
    model: ARTransformer, mask_table: np.ndarray, batch: TokenBatch, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi_theta(id_k | obs, id_<k) under softmax(masked_logits / T), and the entropy, [S, L] float64.

    The sampler's distribution, recomputed by teacher forcing (differentiable in the model's weights).
    """
    logits = model(batch.obs, batch.inputs).to(torch.float64)  # [S, L, n_ids], next-token logits
    admissible = torch.from_numpy(mask_table[batch.remaining])  # grammar mask before each position
    tempered = logits.masked_fill(~admissible, -math.inf) / temperature  # masked_logits / T
    log_p = torch.log_softmax(tempered, dim=-1)
    logprob = log_p.gather(-1, batch.targets[..., None])[..., 0]
    entropy = -(log_p.exp() * log_p.masked_fill(~admissible, 0.0)).sum(dim=-1)
    return logprob, entropy


def _ar_temperature(mode: SamplingMode) -> float:
    return 1.0 if mode.kind == "greedy" else float(mode.temperature)  # type: ignore[arg-type]


# -- flow head -------------------------------------------------------------------------------------------
FlowNet = VelocityMLP | VisionVelocityNet
"""A flow head's velocity network: the state-only MLP or the camera-fed one."""


def _condition(model: FlowNet, obs: torch.Tensor, frames: torch.Tensor | None) -> torch.Tensor:
    """What the velocity reads besides x_t and t: the normalized state, or the camera-fed network's
    condition of the state and the frames (uint8 [B, H, W, 3]), as the sampler computes it per block."""
    if isinstance(model, VisionVelocityNet):
        if frames is None:
            raise ValueError("the camera-fed flow head needs the frames its rollouts saw; none were given")
        return model.condition(obs, frames)
    return obs


def _velocity(model: FlowNet, x: torch.Tensor, t: float, cond: torch.Tensor) -> torch.Tensor:
    """The sampler's velocity call: float32 network on a [ROW_BLOCK, ...] block, float64 out."""
    t_col = torch.full((x.shape[0],), t, dtype=torch.float32)
    if isinstance(model, VisionVelocityNet):
        return model.velocity(x.to(torch.float32), t_col, cond).to(torch.float64)
    return model(x.to(torch.float32), t_col, cond).to(torch.float64)


def _block(rows: torch.Tensor, start: int, fill_shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Rows ``start .. start + ROW_BLOCK`` padded with zeros to ROW_BLOCK, as the heads pad their batches."""
    out = torch.zeros((ROW_BLOCK, *fill_shape), dtype=dtype)
    part = rows[start : start + ROW_BLOCK]
    out[: part.shape[0]] = part
    return out


@torch.no_grad()
def flow_chains(
    head_model: HeadModel,
    obs: np.ndarray,
    keys: Sequence[RowKey],
    mode: SamplingMode,
    frames: np.ndarray | None = None,
) -> torch.Tensor:
    """The SDE chains the sampler drew for these rows, regenerated from their keys, [S, steps + 1, T, D].

    x_{t_0} is the row's keyed initial noise; x_{t_{i+1}} = mean_theta(x_{t_i}) + std_i * z_i with z_i the
    row's keyed step noise: the sampler's draws, in its blocks of ROW_BLOCK rows. ``frames`` (camera-fed
    head): uint8 [S, H, W, 3], each row's stored frame, conditioned on per block as the sampler did.
    """
    model: FlowNet = head_model.model  # type: ignore[assignment]
    shape = model.chunk_shape
    grid = time_grid(mode.steps)
    cond_all = torch.from_numpy(head_model.normalize(obs))
    chains = torch.zeros((len(keys), mode.steps + 1, *shape), dtype=torch.float64)
    for start in range(0, len(keys), ROW_BLOCK):
        block_keys = list(keys[start : start + ROW_BLOCK])
        n = len(block_keys)
        cond = _block(cond_all, start, (cond_all.shape[1],), torch.float32)
        frame_block = None
        if frames is not None:
            frame_block = torch.from_numpy(padded_block(frames[start : start + ROW_BLOCK]))
        cond = _condition(model, cond, frame_block)
        x = torch.zeros((ROW_BLOCK, *shape), dtype=torch.float64)
        for r, key in enumerate(block_keys):
            x[r] = flow_noise(key, shape)
        chains[start : start + n, 0] = x[:n]
        for i in range(mode.steps):
            noise = torch.zeros((ROW_BLOCK, *shape), dtype=torch.float64)
            for r, key in enumerate(block_keys):
                noise[r] = sde_step_noise(key, i, shape)
            v = _velocity(model, x, grid[i], cond)
            x, _, _ = sde_step(x, v, grid[i], grid[i + 1], float(mode.sde_a), noise)  # type: ignore[arg-type]
            chains[start : start + n, i + 1] = x[:n]
    return chains


@dataclass(frozen=True)
class FlowStepLogprobs:
    """Per-step log-probs of chains under a model, and the transition means (for the KL), [S, steps]."""

    logprob: torch.Tensor
    means: list[torch.Tensor]
    """Per step, the transition mean [S, T, D] float64."""
    stds: list[float]


SCORE_BLOCK = 256
"""Rows per forward when scoring chains (the loss and the oracle): big blocks keep the update fast."""


def flow_step_logprobs(
    model: FlowNet,
    cond_all: torch.Tensor,
    chains: torch.Tensor,
    mode: SamplingMode,
    keep_means: bool = False,
    frames: torch.Tensor | None = None,
) -> FlowStepLogprobs:
    """log N(x_{t_{i+1}}; mean_theta(x_{t_i}), std_i^2 I), summed over the chunk, per row and step.

    Differentiable in the model's weights; the chain is data. The loss and the recompute oracle both call
    this, in blocks of SCORE_BLOCK rows; the sampler ran blocks of ROW_BLOCK, so the two agree up to
    float32 rounding of the velocity network (``phase2.heads.flow.replay_atol``). ``frames`` (camera-fed
    head): uint8 [S, H, W, 3]; the image encoder then runs once per block, differentiably, as the
    sampler ran it once per block.
    """
    grid = time_grid(mode.steps)
    a = float(mode.sde_a)  # type: ignore[arg-type]
    per_step: list[list[torch.Tensor]] = [[] for _ in range(mode.steps)]
    means: list[list[torch.Tensor]] = [[] for _ in range(mode.steps)]
    stds = [0.0] * mode.steps
    for start in range(0, chains.shape[0], SCORE_BLOCK):
        frame_block = None if frames is None else frames[start : start + SCORE_BLOCK]
        cond = _condition(model, cond_all[start : start + SCORE_BLOCK], frame_block)
        for i in range(mode.steps):
            x = chains[start : start + SCORE_BLOCK, i]
            v = _velocity(model, x, grid[i], cond)
            _, mean, std = sde_step(x, v, grid[i], grid[i + 1], a, None)  # Flow-GRPO Eq. 9 mean and std
            x_next = chains[start : start + SCORE_BLOCK, i + 1]
            per_step[i].append(gaussian_logprob(x_next, mean, std))
            stds[i] = std
            if keep_means:
                means[i].append(mean)
    logprob = torch.stack([torch.cat(parts) for parts in per_step], dim=1)
    return FlowStepLogprobs(logprob, [torch.cat(m) for m in means] if keep_means else [], stds)


def unit_frames(head_model: HeadModel, units: Sequence[tuple[Episode, Replan]]) -> np.ndarray | None:
    """The stored frames a camera-fed head reads for ``units``, uint8 [len(units), H, W, 3]; None for a
    head that reads the state alone. A unit without its frame is an error naming it."""
    if not head_model.frame_keys:
        return None
    if len(head_model.frame_keys) != 1:
        raise ValueError(f"the camera-fed flow head reads one camera, not {', '.join(head_model.frame_keys)}")
    key = head_model.frame_keys[0]
    frames = []
    for episode, replan in units:
        frame = None if replan.frames is None else replan.frames.get(key)
        if frame is None:
            raise ValueError(
                f"seed {episode.seed}, draw {episode.draw}, replan {replan.replan}: no stored frame of "
                f"{key}, which the camera-fed flow head reads"
            )
        frames.append(frame)
    return np.stack(frames).astype(np.uint8, copy=False)


def score_units(
    head_model: HeadModel, mode: SamplingMode, units: Sequence[tuple[Episode, Replan]], chains: torch.Tensor
) -> FlowStepLogprobs:
    """:func:`flow_step_logprobs` of ``units`` along their ``chains`` under ``head_model``: its normalized
    observations of the units, and the stored frames a camera-fed head reads. The one way the gradient
    reads, the recompute and the calibration's update KL score recorded chunks."""
    cond = torch.from_numpy(head_model.normalize(np.stack([r.obs for _, r in units])))
    frames = unit_frames(head_model, units)
    return flow_step_logprobs(
        head_model.model,  # type: ignore[arg-type]
        cond,
        chains,
        mode,
        frames=None if frames is None else torch.from_numpy(frames),
    )


def unit_chains(
    head_model: HeadModel, batch: RolloutBatch, units: Sequence[tuple[Episode, Replan]]
) -> torch.Tensor:
    """The regenerated SDE chains of ``units`` (flow), [len(units), steps + 1, T, D]."""
    obs = np.stack([r.obs for _, r in units])
    keys = [r.key(batch.run_key, e.seed, e.draw) for e, r in units]
    return flow_chains(head_model, obs, keys, batch.mode, unit_frames(head_model, units))


def recompute_logprobs(
    head_model: HeadModel,
    batch: RolloutBatch,
    units: Sequence[tuple[Episode, Replan]],
    chains: torch.Tensor | None = None,
) -> list[np.ndarray]:
    """Recomputed per-token (AR) or per-step (flow) log-probs of each unit, under the current weights.

    ``chains`` (flow): the units' regenerated chains, when the caller already has them.
    """
    out: list[np.ndarray] = []
    with torch.no_grad():
        if head_model.head == "ar":
            temperature = _ar_temperature(batch.mode)
            for start in range(0, len(units), 128):  # bounded memory: the mask is [S, L, n_ids]
                part = [r for _, r in units[start : start + 128]]
                tokens = token_batch(head_model, part)
                logprob, _ = ar_logprobs(head_model.model, head_model.mask_table, tokens, temperature)  # type: ignore[arg-type]
                for s, replan in enumerate(part):
                    out.append(logprob[s, : len(replan.token_ids)].numpy().copy())  # type: ignore[arg-type]
        else:
            if chains is None:
                chains = unit_chains(head_model, batch, units)
            scored = score_units(head_model, batch.mode, units, chains)
            out = [row.numpy().copy() for row in scored.logprob]
    return out
