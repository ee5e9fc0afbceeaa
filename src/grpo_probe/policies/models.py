"""What a head's network is: the configs and the builders that turn a config into an untrained network.

Why a module of its own: a checkpoint stores its config, and reading one back has to rebuild the same
network before loading the weights. Keeping configs and builders apart from the trainer lets loading a
policy for inference (:mod:`grpo_probe.policies.checkpoint`) stand on them without importing the
training loop, and lets the trainer write checkpoints without a circle back to it. A config also carries
its optimizer budget, so one mapping (a prereg's ``arms.<arm>.train``) describes a whole arm.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from grpo_probe.policies.ar_model import ARTransformer
from grpo_probe.policies.fast_tokenizer import FastTokenizer
from grpo_probe.policies.flow_head import VelocityMLP
from grpo_probe.policies.vision_flow import VisionVelocityNet

__all__ = [
    "ARTrainConfig",
    "FlowTrainConfig",
    "VisionFlowTrainConfig",
    "build_ar_model",
    "build_flow_model",
    "build_vision_flow_model",
]


class _ConfigMixin:
    ARCHITECTURE: ClassVar[tuple[str, ...]] = ()
    """The fields that size the head's network, under the names its constructor takes."""

    def architecture(self) -> dict[str, Any]:
        """The :attr:`ARCHITECTURE` fields by name: what a builder passes on to the network, so each head
        lists its sizing fields once, beside their defaults."""
        return {name: getattr(self, name) for name in self.ARCHITECTURE}

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
        """The plain mapping a checkpoint stores and :meth:`from_dict` reads back."""
        return dataclasses.asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True)
class ARTrainConfig(_ConfigMixin):
    """AR head: FAST tokenizer, decoder size and optimizer budget."""

    ARCHITECTURE: ClassVar[tuple[str, ...]] = ("d_model", "n_layers", "n_heads", "n_prefix")
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

    ARCHITECTURE: ClassVar[tuple[str, ...]] = ("hidden", "n_layers", "obs_embed", "time_embed")
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


@dataclass(frozen=True)
class VisionFlowTrainConfig(FlowTrainConfig):
    """Image-conditioned flow head: the state-only head's fields, a CNN encoder, and half its batch.

    Sized for one CPU core: the encoder is four stride-2 convolutions over a 96 x 96 frame, and batches
    are half the state-only head's because the encoder dominates a step's cost. ``obs_embed`` embeds the
    state alone here.
    """

    ARCHITECTURE: ClassVar[tuple[str, ...]] = (
        *FlowTrainConfig.ARCHITECTURE,
        "image_height",
        "image_width",
        "channels",
        "image_embed",
    )
    batch_size: int = 64
    """demo chunks (with their frames) per step"""
    image_embed: int = 128
    """image embedding width (the encoder's last Linear)"""
    channels: int = 32
    """encoder conv width (the first conv has half of it)"""
    image_height: int = 96
    """frame height the encoder is built for (the registered camera's)"""
    image_width: int = 96
    """frame width the encoder is built for (the registered camera's)"""


def build_ar_model(config: ARTrainConfig, obs_dim: int, tokenizer: FastTokenizer) -> ARTransformer:
    """The untrained AR decoder a config describes, sized to the fitted tokenizer's ids and length."""
    return ARTransformer(
        obs_dim=obs_dim, n_ids=tokenizer.n_ids, max_tokens=tokenizer.n_coefficients, **config.architecture()
    )


def build_flow_model(
    config: FlowTrainConfig, obs_dim: int, chunk_length: int, action_dims: int
) -> VelocityMLP:
    """The untrained velocity MLP a config describes, for chunks of ``chunk_length`` x ``action_dims``."""
    return VelocityMLP(
        obs_dim=obs_dim, chunk_length=chunk_length, action_dims=action_dims, **config.architecture()
    )


def build_vision_flow_model(
    config: VisionFlowTrainConfig, obs_dim: int, chunk_length: int, action_dims: int
) -> VisionVelocityNet:
    """The untrained image-conditioned velocity net a config describes, for frames of the config's size."""
    return VisionVelocityNet(
        obs_dim=obs_dim, chunk_length=chunk_length, action_dims=action_dims, **config.architecture()
    )
