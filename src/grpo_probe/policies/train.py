"""Behaviour cloning of the heads from scripted-expert demos, deterministic to the byte.

Why deterministic: an auditor reruns a training rule and must get the same checkpoint sha256. So every
random number (weight init, minibatch indices, flow noise and times) comes from a keyed generator, torch
runs single-threaded with deterministic algorithms, and the checkpoint is serialized canonically.

Which head an arm has and its budget are registered (``arms.<id>.head`` and ``training.arms.<id>`` in
the prereg), so an arm may have any id. On one CPU core the registered probe's arms train in about 80 s
(AR, 800 steps), 70-110 s (flow teacher, 4000 steps) and 5 s (flow short: the teacher's recipe with
1/20 of its optimizer steps, the ratio of the research team's ftrig4k to teacher80k).

An arm whose registered inputs include a camera (``observation.images.<camera>``) and whose head is
``flow`` trains the image-conditioned flow head (:mod:`grpo_probe.policies.vision_flow`) on demos that
recorded that camera's frames; its budget validates against :class:`VisionFlowTrainConfig`.

The configs and the networks they describe live in :mod:`grpo_probe.policies.models`; this module only
trains and writes checkpoints, so reading a checkpoint for inference never imports it.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from grpo_probe.envs.observation import (
    OBSERVATION_ENVIRONMENT_STATE,
    OBSERVATION_STATE,
    TASK,
    camera_of,
    image_key,
)
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies.adam import Adam
from grpo_probe.policies.checkpoint import Checkpoint, write_checkpoint
from grpo_probe.policies.fast_tokenizer import FastTokenizer
from grpo_probe.policies.keyed_torch import torch_generator
from grpo_probe.policies.models import (
    ARTrainConfig,
    FlowTrainConfig,
    VisionFlowTrainConfig,
    build_ar_model,
    build_flow_model,
    build_vision_flow_model,
)

__all__ = [
    "DemoArrays",
    "VisionDemoArrays",
    "deterministic_torch",
    "head_config",
    "train_ar",
    "train_arm",
    "train_flow",
    "train_vision_flow",
]

TrainConfig = ARTrainConfig | FlowTrainConfig | VisionFlowTrainConfig


class DemoArrays(Protocol):
    """What training reads from ``grpo_probe.envs.boat.demos.Demos``: obs [N, obs_dim], chunks [N, 50, 6]."""

    obs: np.ndarray
    chunks: np.ndarray


class VisionDemoArrays(DemoArrays, Protocol):
    """Demos with frames: ``images[observation.images.<camera>]`` uint8 [N, H, W, 3], row-aligned with obs."""

    images: Mapping[str, np.ndarray]


def head_config(
    head: str, settings: Mapping[str, Any] | None = None, where: str = "training", *, vision: bool = False
) -> TrainConfig:
    """The training config of a ``head`` ("ar" or "flow"): its defaults with the registered ``settings``.

    ``vision``: the arm reads a camera, so a ``flow`` head is the image-conditioned one and its settings
    validate against :class:`VisionFlowTrainConfig` (the AR head has no image-conditioned variant).
    """
    defaults: dict[str, TrainConfig] = {"ar": ARTrainConfig(), "flow": FlowTrainConfig()}
    if head not in defaults:
        raise ValueError(f"{where}: unknown head {head!r} (known: {', '.join(defaults)})")
    if vision and head != "flow":
        raise ValueError(f"{where}: head {head!r} reads the state only; only a 'flow' head can read a camera")
    config = VisionFlowTrainConfig() if vision else defaults[head]
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
    inputs: Sequence[str] = (OBSERVATION_STATE,),
) -> str:
    """Train a head by behaviour cloning into ``out``; returns the checkpoint sha256.

    ``chunk_shape`` is the registered (chunk length, action dims): the demos must hold chunks of that
    shape, since the head is built for it. ``inputs`` are the observation keys the arm registers: the
    state alone, or the state and one ``observation.images.<camera>``, which trains the
    image-conditioned flow head on the demos' frames of that camera (``demos.images``). A registered
    ``task`` is left to a bound language-conditioned policy: the reference heads do not read language,
    and a policy may read a subset of what its arm registers. The frame size defaults to the demos'
    frames (the size the design registers for the camera).
    """
    inputs = [k for k in inputs if k != TASK] if not isinstance(inputs, str) else inputs
    camera = _arm_camera(head, inputs, where)
    if camera is not None:
        frames = getattr(demos, "images", {}).get(image_key(camera))
        if frames is not None and getattr(frames, "ndim", 0) == 4:
            size = {"image_height": int(frames.shape[1]), "image_width": int(frames.shape[2])}
            settings = {**size, **(settings or {})}
    config = head_config(head, settings, where, vision=camera is not None)
    if chunk_shape is not None and tuple(demos.chunks.shape[1:]) != tuple(chunk_shape):
        raise ValueError(
            f"{where}: demo chunks have shape {tuple(demos.chunks.shape[1:])}, but the environment's "
            f"registered chunk_length x action_dims is {tuple(chunk_shape)}"
        )
    if camera is not None:
        key = image_key(camera)
        recorded = getattr(demos, "images", {})
        if key not in recorded:
            raise ValueError(
                f"{where}: the arm reads {key!r}, but the demos hold no frames of it (their frames: "
                f"{', '.join(recorded) or 'none'}); collect the demos with that camera"
            )
        size = (config.image_height, config.image_width)  # type: ignore[union-attr]
        _check_frames(demos, camera, len(demos.obs), size, f"{where}: demos")  # type: ignore[arg-type]
        return train_vision_flow(demos, config, camera, out)  # type: ignore[arg-type]
    if head == "ar":
        return train_ar(demos, config, out)  # type: ignore[arg-type]
    return train_flow(demos, config, out)  # type: ignore[arg-type]


def _arm_camera(head: str, inputs: Sequence[str], where: str) -> str | None:
    """The one camera an arm's ``inputs`` read, or None for the state alone; other inputs are errors."""
    if isinstance(inputs, str):
        raise ValueError(f"{where}: inputs must be a sequence of observation keys, got the string {inputs!r}")
    if OBSERVATION_STATE not in inputs:
        raise ValueError(
            f"{where}: the reference heads always read {OBSERVATION_STATE!r}; inputs are {list(inputs)}"
        )
    cameras = [c for key in inputs if (c := camera_of(key)) is not None]
    # under LeRobot's keys the reference heads read the packed state, which holds the environment state
    packed = (OBSERVATION_STATE, OBSERVATION_ENVIRONMENT_STATE)
    others = [key for key in inputs if key not in packed and camera_of(key) is None]
    if others:
        raise ValueError(
            f"{where}: the reference heads read {OBSERVATION_STATE!r} and at most one camera frame, "
            f"not {', '.join(map(repr, others))}"
        )
    if len(cameras) > 1:
        raise ValueError(
            f"{where}: the image-conditioned flow head reads one camera, got {', '.join(cameras)}"
        )
    if cameras and head != "flow":
        raise ValueError(f"{where}: head {head!r} reads the state only; only a 'flow' head can read a camera")
    return cameras[0] if cameras else None


@contextlib.contextmanager
def deterministic_torch() -> Iterator[None]:
    """Single thread and deterministic kernels for the duration of a training run (restored after)."""
    threads = torch.get_num_threads()
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    _use_deterministic_algorithms(True)
    try:
        yield
    finally:
        _use_deterministic_algorithms(was_deterministic)
        torch.set_num_threads(threads)


def _use_deterministic_algorithms(mode: bool) -> None:
    """``torch.use_deterministic_algorithms(mode)``, without loading the compiler to set its flag too.

    Why: the public call also sets the compiler's (inductor's) determinism flag, and importing its config
    imports ``torch._dynamo``, about 1.7 CPU-s in each process that trains; nothing here compiles. So the
    kernels' flag is set directly, the public call's own first step, unless the compiler is already loaded
    (by the caller), when the public call sets both. torch is pinned in pyproject.toml, and
    tests/policies/test_adam.py reads the flag back through the public getter.
    """
    if "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode)
    else:
        torch._C._set_deterministic_algorithms(mode, warn_only=False)


@torch.no_grad()
def _init_parameters(model: nn.Module, gen: torch.Generator, linear_std: float | None) -> None:
    """Keyed init (no global RNG): Linear N(0, linear_std) or U(+-1/sqrt(fan_in)); embeddings N(0, 0.02).

    Conv2d like Linear, with fan_in = in_channels * kernel area (torch's default bound for both).
    """
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            fan_in = module.in_channels // module.groups * math.prod(module.kernel_size)
            if linear_std is None:
                bound = 1.0 / math.sqrt(fan_in)
                module.weight.copy_((torch.rand(module.weight.shape, generator=gen) * 2 - 1) * bound)
                if module.bias is not None:
                    module.bias.copy_((torch.rand(module.bias.shape, generator=gen) * 2 - 1) * bound)
            else:
                module.weight.copy_(torch.randn(module.weight.shape, generator=gen) * linear_std)
                if module.bias is not None:
                    module.bias.zero_()
        elif isinstance(module, nn.Linear):
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


def _learning_rate(step: int, config: TrainConfig) -> float:
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


def _optimizer(model: nn.Module, config: TrainConfig) -> Adam:
    """AdamW: Adam with decoupled weight decay (:mod:`grpo_probe.policies.adam` says why not torch.optim)."""
    return Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)


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
        obs_norm, actions, norm = _flow_normalization(obs, chunks)

        model = build_flow_model(config, obs.shape[1], chunks.shape[1], chunks.shape[2])
        _init_parameters(model, torch_generator(config.seed, tag("flow_init")), linear_std=None)
        _fit_flow_matching(
            model,
            config,
            actions,
            tag("flow_batch"),
            "train flow",
            lambda idx, x_t, t: model(x_t, t, obs_norm[idx]),
        )
        ckpt = Checkpoint(
            kind="flow", config=config.to_dict(), tokenizer_json="", norm=norm, state_dict=model.state_dict()
        )
        return write_checkpoint(ckpt, out)


def train_vision_flow(
    demos: VisionDemoArrays, config: VisionFlowTrainConfig, camera: str, out: str | Path
) -> str:
    """Train the image-conditioned velocity net by conditional flow matching; returns the sha256.

    The same loss, time sampling and normalization as :func:`train_flow`, on (state, frame of
    ``camera``) -> chunk; minibatches, noise and times come from their own keyed streams.
    """
    obs, chunks = _check_demos(demos)
    frames = _check_frames(demos, camera, len(obs), (config.image_height, config.image_width))
    with deterministic_torch():
        obs_norm, actions, norm = _flow_normalization(obs, chunks)
        images = torch.from_numpy(frames)

        model = build_vision_flow_model(config, obs.shape[1], chunks.shape[1], chunks.shape[2])
        _init_parameters(model, torch_generator(config.seed, tag("vision_flow_init")), linear_std=None)

        def velocity(idx: np.ndarray, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            index = torch.from_numpy(idx)
            return model(x_t, t, obs_norm[index], images[index])

        _fit_flow_matching(model, config, actions, tag("vision_flow_batch"), "train vision flow", velocity)
        ckpt = Checkpoint(
            kind="vision_flow",
            config={"camera": camera, **config.to_dict()},
            tokenizer_json="",
            norm=norm,
            state_dict=model.state_dict(),
        )
        return write_checkpoint(ckpt, out)


def _fit_flow_matching(
    model: nn.Module,
    config: FlowTrainConfig,
    actions: torch.Tensor,
    stream: int,
    desc: str,
    velocity: Callable[[np.ndarray, torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Conditional flow matching, both flow heads: minimise E ||v_theta(x_t, t | obs) - u||^2 over keyed
    minibatches (:func:`_flow_matching_batch`); ``velocity(idx, x_t, t)`` is the network on the demo rows
    ``idx``, conditioned on whatever the head reads."""
    optimizer = _optimizer(model, config)
    model.train()
    bar = _progress(config.steps, desc)
    for step in bar:
        idx, x_t, t, u = _flow_matching_batch(config.seed, stream, step, actions, config.batch_size)
        loss = ((velocity(idx, x_t, t) - u) ** 2).mean()
        _optimizer_step(model, optimizer, loss, _learning_rate(step, config), config.grad_clip)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    bar.close()


def _check_frames(
    demos: VisionDemoArrays, camera: str, n_rows: int, size: tuple[int, int], where: str = "demos"
) -> np.ndarray:
    """The demos' frames of ``camera`` as contiguous uint8 [N, H, W, 3] of the configured size."""
    key = image_key(camera)
    images = getattr(demos, "images", {})
    if key not in images:
        raise ValueError(f"{where}: no frames of {key!r} (their frames: {', '.join(images) or 'none'})")
    frames = images[key]
    if (
        not isinstance(frames, np.ndarray)
        or frames.dtype != np.uint8
        or frames.ndim != 4
        or frames.shape[3] != 3
    ):
        found = f"{getattr(frames, 'dtype', type(frames).__name__)} {getattr(frames, 'shape', '')}"
        raise ValueError(f"{where}: {key} must be uint8 [N, H, W, 3], got {found}")
    if frames.shape[0] != n_rows:
        raise ValueError(f"{where}: {key} has {frames.shape[0]} frames for {n_rows} observation rows")
    if tuple(frames.shape[1:3]) != size:
        raise ValueError(
            f"{where}: {key} frames are {frames.shape[1]}x{frames.shape[2]}, but the training config's "
            f"image_height x image_width is {size[0]}x{size[1]}"
        )
    return np.ascontiguousarray(frames)


def _flow_normalization(
    obs: np.ndarray, chunks: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor, dict[str, np.ndarray]]:
    """Both flow heads' normalization: the standardized observations (float32), the chunks in [-1, 1]
    (:func:`_normalized_actions`), and the ``norm`` record their checkpoint stores to undo both."""
    obs_mean, obs_std = _obs_stats(obs)
    obs_norm = torch.from_numpy(((obs - obs_mean) / obs_std).astype(np.float32))
    action_low, action_high, actions = _normalized_actions(chunks)
    norm = {"obs_mean": obs_mean, "obs_std": obs_std, "action_low": action_low, "action_high": action_high}
    return obs_norm, actions, norm


def _normalized_actions(chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """Per-dimension 1st / 99th percentile bounds and the chunks mapped to [-1, 1] by them (float32)."""
    flat = chunks.reshape(-1, chunks.shape[2]).astype(np.float64)
    action_low, action_high = np.percentile(flat, 1.0, axis=0), np.percentile(flat, 99.0, axis=0)
    action_high = np.where(action_high - action_low < 1e-6, action_low + 2.0, action_high)
    actions = torch.from_numpy(
        (2.0 * (chunks - action_low) / (action_high - action_low) - 1.0).astype(np.float32)
    )
    return action_low, action_high, actions


def _flow_matching_batch(
    seed: int, stream: int, step: int, actions: torch.Tensor, batch_size: int
) -> tuple[np.ndarray, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step's keyed minibatch: (row indices, x_t, t, target velocity u), openpi convention."""
    rng = numpy_generator(seed, stream, step)
    idx = rng.integers(0, len(actions), batch_size)
    a = actions[idx]
    eps = torch.from_numpy(rng.standard_normal(a.shape).astype(np.float32))
    # openpi time sampling: t ~ Beta(1.5, 1) * 0.999 + 0.001, weighted toward the noisy end
    t = torch.from_numpy((rng.beta(1.5, 1.0, batch_size) * 0.999 + 0.001).astype(np.float32))
    t_b = t[:, None, None]
    x_t = t_b * eps + (1 - t_b) * a  # openpi: x_t = t * eps + (1 - t) * a
    u = eps - a  # target velocity dx_t/dt
    return idx, x_t, t, u


def _optimizer_step(
    model: nn.Module, optimizer: Adam, loss: torch.Tensor, lr: float, grad_clip: float
) -> None:
    optimizer.lr = lr
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip, foreach=False)
    optimizer.step()
