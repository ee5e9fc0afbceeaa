"""Behaviour cloning of the two heads from scripted-expert demos, deterministic to the byte.

Why deterministic: an auditor reruns a training rule and must get the same checkpoint sha256. So every
random number (weight init, minibatch indices, flow noise and times) comes from a keyed generator, torch
runs single-threaded with deterministic algorithms, and the checkpoint is serialized canonically.

Which head an arm has and its budget are registered (``arms.<id>.head`` and ``training.arms.<id>`` in
the prereg), so an arm may have any id. On one CPU core the registered probe's arms train in about 80 s
(AR, 800 steps), 70-110 s (flow teacher, 4000 steps) and 5 s (flow short: the teacher's recipe with
1/20 of its optimizer steps, the ratio of the research team's ftrig4k to teacher80k).

The configs and the networks they describe live in :mod:`grpo_probe.policies.models`; this module only
trains and writes checkpoints, so reading a checkpoint for inference never imports it.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies.checkpoint import Checkpoint, write_checkpoint
from grpo_probe.policies.fast_tokenizer import FastTokenizer
from grpo_probe.policies.keyed_torch import torch_generator
from grpo_probe.policies.models import ARTrainConfig, FlowTrainConfig, build_ar_model, build_flow_model

__all__ = [
    "DemoArrays",
    "deterministic_torch",
    "head_config",
    "train_ar",
    "train_arm",
    "train_flow",
]


class DemoArrays(Protocol):
    """What training reads from ``grpo_probe.sim.demos.Demos``: obs [N, obs_dim], chunks [N, 50, 6]."""

    obs: np.ndarray
    chunks: np.ndarray


def head_config(
    head: str, settings: Mapping[str, Any] | None = None, where: str = "training"
) -> ARTrainConfig | FlowTrainConfig:
    """The training config of a ``head`` ("ar" or "flow"): its defaults with the registered ``settings``."""
    defaults: dict[str, ARTrainConfig | FlowTrainConfig] = {"ar": ARTrainConfig(), "flow": FlowTrainConfig()}
    if head not in defaults:
        raise ValueError(f"{where}: unknown head {head!r} (known: {', '.join(defaults)})")
    config = defaults[head]
    if settings:
        config = type(config).from_dict({**config.to_dict(), **settings}, where=where)
    return config


def train_arm(
    head: str,
    demos: DemoArrays,
    out: str | Path,
    settings: Mapping[str, Any] | None = None,
    *,
    chunk_shape: tuple[int, int] | None = None,
    where: str = "training",
) -> str:
    """Train a head by behaviour cloning into ``out``; returns the checkpoint sha256.

    ``chunk_shape`` is the registered (chunk length, action dims): the demos must hold chunks of that
    shape, since the head is built for it.
    """
    config = head_config(head, settings, where)
    if chunk_shape is not None and tuple(demos.chunks.shape[1:]) != tuple(chunk_shape):
        raise ValueError(
            f"{where}: demo chunks have shape {tuple(demos.chunks.shape[1:])}, but the environment's "
            f"registered chunk_length x action_dims is {tuple(chunk_shape)}"
        )
    if head == "ar":
        return train_ar(demos, config, out)  # type: ignore[arg-type]
    return train_flow(demos, config, out)  # type: ignore[arg-type]


@contextlib.contextmanager
def deterministic_torch() -> Iterator[None]:
    """Single thread and deterministic kernels for the duration of a training run (restored after)."""
    threads = torch.get_num_threads()
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was_deterministic)
        torch.set_num_threads(threads)


@torch.no_grad()
def _init_parameters(model: nn.Module, gen: torch.Generator, linear_std: float | None) -> None:
    """Keyed init (no global RNG): Linear N(0, linear_std) or U(+-1/sqrt(fan_in)); embeddings N(0, 0.02)."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            if linear_std is None:
                bound = 1.0 / math.sqrt(module.in_features)
                module.weight.copy_((torch.rand(module.weight.shape, generator=gen) * 2 - 1) * bound)
                module.bias.copy_((torch.rand(module.bias.shape, generator=gen) * 2 - 1) * bound)
            else:
                module.weight.copy_(torch.randn(module.weight.shape, generator=gen) * linear_std)
                module.bias.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.copy_(torch.randn(module.weight.shape, generator=gen) * 0.02)
        elif isinstance(module, nn.LayerNorm):
            module.weight.fill_(1.0)
            module.bias.zero_()
    for name, param in model.named_parameters(recurse=False):
        if name == "pos_emb":
            param.copy_(torch.randn(param.shape, generator=gen) * 0.02)


def _learning_rate(step: int, config: ARTrainConfig | FlowTrainConfig) -> float:
    """Linear warmup to ``lr``, then cosine decay to 10% of it at the last step."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def _check_demos(demos: DemoArrays) -> tuple[np.ndarray, np.ndarray]:
    obs = np.asarray(demos.obs, dtype=np.float32)
    chunks = np.asarray(demos.chunks, dtype=np.float32)
    if obs.ndim != 2 or chunks.ndim != 3 or obs.shape[0] != chunks.shape[0] or obs.shape[0] == 0:
        raise ValueError(
            f"demos: need obs [N, obs_dim] and chunks [N, T, D] with N > 0, got {obs.shape}, {chunks.shape}"
        )
    if not (np.all(np.isfinite(obs)) and np.all(np.isfinite(chunks))):
        raise ValueError("demos: obs or chunks contain non-finite values")
    return obs, chunks


def _obs_stats(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = obs.astype(np.float64).mean(axis=0)
    std = np.maximum(obs.astype(np.float64).std(axis=0), 1e-3)  # constant dims stay finite
    return mean, std


def _progress(steps: int, desc: str) -> tqdm:
    return tqdm(range(steps), desc=desc, file=sys.stderr, mininterval=2.0, ascii=True)


def _optimizer(model: nn.Module, config: ARTrainConfig | FlowTrainConfig) -> torch.optim.Optimizer:
    return torch.optim.AdamW(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay, foreach=False
    )


def train_ar(demos: DemoArrays, config: ARTrainConfig, out: str | Path) -> str:
    """Fit FAST on the demo chunks, train the AR decoder by next-token cross-entropy; returns the sha256."""
    obs, chunks = _check_demos(demos)
    with deterministic_torch():
        tokenizer = FastTokenizer.fit(chunks, scale=config.scale, vocab_size=config.vocab_size)
        obs_mean, obs_std = _obs_stats(obs)
        obs_norm = torch.from_numpy(((obs - obs_mean) / obs_std).astype(np.float32))
        sequences = tokenizer.encode_batch(chunks)
        lengths = np.array([len(s) for s in sequences])
        width = int(lengths.max()) + 1
        inputs = torch.full((len(sequences), width), tokenizer.eos_id, dtype=torch.long)
        targets = torch.full((len(sequences), width), -100, dtype=torch.long)
        for i, ids in enumerate(sequences):
            inputs[i, : len(ids) + 1] = torch.tensor([tokenizer.bos_id, *ids])
            targets[i, : len(ids) + 1] = torch.tensor([*ids, tokenizer.eos_id])

        model = build_ar_model(config, obs.shape[1], tokenizer)
        _init_parameters(model, torch_generator(config.seed, tag("ar_init")), linear_std=0.02)
        optimizer = _optimizer(model, config)
        model.train()
        bar = _progress(config.steps, "train ar")
        for step in bar:
            idx = numpy_generator(config.seed, tag("ar_batch"), step).integers(
                0, len(sequences), config.batch_size
            )
            span = int(lengths[idx].max()) + 1  # trim padding: shapes depend only on the keyed batch
            logits = model(obs_norm[idx], inputs[idx, :span])
            loss = nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), targets[idx, :span].reshape(-1)
            )
            _optimizer_step(model, optimizer, loss, _learning_rate(step, config), config.grad_clip)
            if step % 50 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}")
        bar.close()
        ckpt = Checkpoint(
            kind="ar",
            config=config.to_dict(),
            tokenizer_json=tokenizer.to_json(),
            norm={
                "obs_mean": obs_mean,
                "obs_std": obs_std,
                "action_low": tokenizer.q_low,
                "action_high": tokenizer.q_high,
            },
            state_dict=model.state_dict(),
        )
        return write_checkpoint(ckpt, out)


def train_flow(demos: DemoArrays, config: FlowTrainConfig, out: str | Path) -> str:
    """Train the velocity MLP by conditional flow matching (openpi convention); returns the sha256."""
    obs, chunks = _check_demos(demos)
    with deterministic_torch():
        obs_mean, obs_std = _obs_stats(obs)
        obs_norm = torch.from_numpy(((obs - obs_mean) / obs_std).astype(np.float32))
        flat = chunks.reshape(-1, chunks.shape[2]).astype(np.float64)
        action_low, action_high = np.percentile(flat, 1.0, axis=0), np.percentile(flat, 99.0, axis=0)
        action_high = np.where(action_high - action_low < 1e-6, action_low + 2.0, action_high)
        actions = torch.from_numpy(
            (2.0 * (chunks - action_low) / (action_high - action_low) - 1.0).astype(np.float32)
        )

        model = build_flow_model(config, obs.shape[1], chunks.shape[1], chunks.shape[2])
        _init_parameters(model, torch_generator(config.seed, tag("flow_init")), linear_std=None)
        optimizer = _optimizer(model, config)
        model.train()
        bar = _progress(config.steps, "train flow")
        for step in bar:
            rng = numpy_generator(config.seed, tag("flow_batch"), step)
            idx = rng.integers(0, len(actions), config.batch_size)
            a = actions[idx]
            eps = torch.from_numpy(rng.standard_normal(a.shape).astype(np.float32))
            # openpi time sampling: t ~ Beta(1.5, 1) * 0.999 + 0.001, weighted toward the noisy end
            t = torch.from_numpy((rng.beta(1.5, 1.0, config.batch_size) * 0.999 + 0.001).astype(np.float32))
            t_b = t[:, None, None]
            x_t = t_b * eps + (1 - t_b) * a  # openpi: x_t = t * eps + (1 - t) * a
            u = eps - a  # target velocity dx_t/dt
            loss = ((model(x_t, t, obs_norm[idx]) - u) ** 2).mean()
            _optimizer_step(model, optimizer, loss, _learning_rate(step, config), config.grad_clip)
            if step % 50 == 0:
                bar.set_postfix(loss=f"{loss.item():.4f}")
        bar.close()
        ckpt = Checkpoint(
            kind="flow",
            config=config.to_dict(),
            tokenizer_json="",
            norm={
                "obs_mean": obs_mean,
                "obs_std": obs_std,
                "action_low": action_low,
                "action_high": action_high,
            },
            state_dict=model.state_dict(),
        )
        return write_checkpoint(ckpt, out)


def _optimizer_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, loss: torch.Tensor, lr: float, grad_clip: float
) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip, foreach=False)
    optimizer.step()
