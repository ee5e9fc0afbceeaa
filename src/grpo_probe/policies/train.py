"""Behaviour cloning of the two heads from scripted-expert demos, deterministic to the byte.

Why deterministic: an auditor reruns a training rule and must get the same checkpoint sha256. So every
random number (weight init, minibatch indices, flow noise and times) comes from a keyed generator, torch
runs single-threaded with deterministic algorithms, and the checkpoint is serialized canonically.

Budgets: on one CPU core the reference arms (``REFERENCE_ARMS``) train in about 80 s (AR, 800 steps),
70-110 s (flow teacher, 4000 steps) and 5 s (``flow_short``: the teacher's recipe with 1/20 of its
optimizer steps, the ratio of the research team's ftrig4k to teacher80k).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from grpo_probe.keyed_rng import numpy_generator, tag, torch_generator
from grpo_probe.policies.ar_head import ARTransformer
from grpo_probe.policies.checkpoint import Checkpoint, write_checkpoint
from grpo_probe.policies.fast_tokenizer import FastTokenizer
from grpo_probe.policies.flow_head import VelocityMLP

__all__ = [
    "REFERENCE_ARMS",
    "ARTrainConfig",
    "DemoArrays",
    "FlowTrainConfig",
    "build_ar_model",
    "build_flow_model",
    "reference_arm",
    "train_ar",
    "train_arm",
    "train_flow",
]


class DemoArrays(Protocol):
    """What training reads from ``grpo_probe.sim.demos.Demos``: obs [N, obs_dim], chunks [N, 50, 6]."""

    obs: np.ndarray
    chunks: np.ndarray


class _ConfigMixin:
    @classmethod
    def from_dict(cls, values: Mapping[str, Any], where: str = "config") -> Any:
        """Build from a mapping (a prereg ``arms.<arm>.train``); unknown or mistyped keys are errors."""
        if not isinstance(values, Mapping):
            raise ValueError(f"{where}: must be a mapping, got {type(values).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            if key not in fields:
                raise ValueError(f"{where}: unknown field {key!r} (known: {', '.join(sorted(fields))})")
            default = fields[key].default
            if isinstance(default, bool) or isinstance(value, bool):
                raise ValueError(f"{where}.{key} must be a number, got {value!r}")
            if isinstance(default, int) and not isinstance(value, int):
                raise ValueError(f"{where}.{key} must be an integer, got {value!r}")
            if isinstance(default, float):
                if not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ValueError(f"{where}.{key} must be a finite number, got {value!r}")
                value = float(value)
            kwargs[key] = value
        config = cls(**kwargs)
        for key, f in fields.items():
            value = getattr(config, key)
            if key != "seed" and value <= 0 and f.name != "weight_decay":
                raise ValueError(f"{where}.{key} must be > 0, got {value!r}")
            if value < 0:
                raise ValueError(f"{where}.{key} must be >= 0, got {value!r}")
        return config

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True)
class ARTrainConfig(_ConfigMixin):
    """AR head: FAST tokenizer, decoder size and optimizer budget."""

    seed: int = 0
    """keys weight init and minibatch order"""
    vocab_size: int = 1024
    """BPE symbols of the FAST tokenizer (BOS and EOS come on top)"""
    scale: float = 10.0
    """FAST DCT coefficient scale before rounding"""
    d_model: int = 128
    """transformer width"""
    n_layers: int = 2
    """decoder blocks"""
    n_heads: int = 4
    """attention heads"""
    n_prefix: int = 4
    """observation prefix embeddings"""
    steps: int = 800
    """optimizer steps"""
    batch_size: int = 32
    """demo chunks per step"""
    lr: float = 1e-3
    """peak AdamW learning rate (linear warmup, cosine decay to 10%)"""
    warmup_steps: int = 100
    """linear warmup steps"""
    weight_decay: float = 0.01
    """AdamW weight decay"""
    grad_clip: float = 1.0
    """global gradient-norm clip"""


@dataclass(frozen=True)
class FlowTrainConfig(_ConfigMixin):
    """Flow head: velocity MLP size and optimizer budget."""

    seed: int = 0
    """keys weight init, minibatch order, flow noise and times"""
    hidden: int = 512
    """MLP width"""
    n_layers: int = 3
    """hidden layers"""
    obs_embed: int = 128
    """observation embedding width"""
    time_embed: int = 64
    """sinusoidal time embedding width"""
    steps: int = 4000
    """optimizer steps"""
    batch_size: int = 128
    """demo chunks per step"""
    lr: float = 1e-3
    """peak AdamW learning rate (linear warmup, cosine decay to 10%)"""
    warmup_steps: int = 100
    """linear warmup steps"""
    weight_decay: float = 0.0
    """AdamW weight decay"""
    grad_clip: float = 1.0
    """global gradient-norm clip"""


REFERENCE_ARMS: dict[str, tuple[str, ARTrainConfig | FlowTrainConfig]] = {
    "ar": ("ar", ARTrainConfig()),
    "flow_teacher": ("flow", FlowTrainConfig()),
    "flow_short": ("flow", FlowTrainConfig(steps=FlowTrainConfig().steps // 20, warmup_steps=10)),
}
"""Registered arm name -> (head, default config) of the embedded default."""


def reference_arm(
    arm: str, overrides: Mapping[str, Any] | None = None
) -> tuple[str, ARTrainConfig | FlowTrainConfig]:
    """(head, config) of a reference arm, with prereg ``overrides`` applied."""
    if arm not in REFERENCE_ARMS:
        raise ValueError(f"unknown reference arm {arm!r} (known: {', '.join(REFERENCE_ARMS)})")
    head, config = REFERENCE_ARMS[arm]
    if overrides:
        config = type(config).from_dict({**config.to_dict(), **overrides}, where=f"arms.{arm}.train")
    return head, config


def train_arm(
    arm: str, demos: DemoArrays, out: str | Path, overrides: Mapping[str, Any] | None = None
) -> str:
    """Train a reference arm into ``out``; returns the checkpoint sha256."""
    head, config = reference_arm(arm, overrides)
    if head == "ar":
        return train_ar(demos, config, out)  # type: ignore[arg-type]
    return train_flow(demos, config, out)  # type: ignore[arg-type]


def build_ar_model(config: ARTrainConfig, obs_dim: int, tokenizer: FastTokenizer) -> ARTransformer:
    return ARTransformer(
        obs_dim=obs_dim,
        n_ids=tokenizer.n_ids,
        d_model=config.d_model,
        n_layers=config.n_layers,
        n_heads=config.n_heads,
        n_prefix=config.n_prefix,
        max_tokens=tokenizer.n_coefficients,
    )


def build_flow_model(
    config: FlowTrainConfig, obs_dim: int, chunk_length: int, action_dims: int
) -> VelocityMLP:
    return VelocityMLP(
        obs_dim=obs_dim,
        chunk_length=chunk_length,
        action_dims=action_dims,
        hidden=config.hidden,
        n_layers=config.n_layers,
        obs_embed=config.obs_embed,
        time_embed=config.time_embed,
    )


@contextlib.contextmanager
def _deterministic_torch() -> Iterator[None]:
    """Single thread and deterministic kernels for the duration of a training run."""
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
    with _deterministic_torch():
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
    with _deterministic_torch():
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
