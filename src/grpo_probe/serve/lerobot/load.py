"""Load a LeRobot checkpoint folder as a :class:`~grpo_probe.serve.lerobot.adapter.LeRobotAdapter`.

Why here and imported only when a checkpoint is served: LeRobot and its torch live in the lab's
environment (Python >= 3.12, torch < 2.12), never in the probe's; ``grpo_probe.serve`` installs and
imports without either. The folder is what LeRobot's ``save_pretrained`` writes: ``config.json`` (its
``type`` picks the policy class), ``model.safetensors``, and the pre- and post-processors with their
normalization statistics, which give the action bounds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import metadata as distributions
from pathlib import Path
from typing import Any

import numpy as np
import torch

from grpo_probe.serve.checkpoint import checkpoint_sha256
from grpo_probe.serve.lerobot.adapter import LeRobotAdapter, sampler_for
from grpo_probe.serve.lerobot.rows import ActionBounds, CameraMap

__all__ = ["checkpoint_sha256", "checkpoint_type", "load_checkpoint"]

PREPROCESSOR = "policy_preprocessor.json"
ACTION = "action"


def checkpoint_type(path: Path) -> str:
    """The policy ``type`` in ``path/config.json``; a ``ValueError`` naming the file and field."""
    config = path / "config.json"
    if not config.is_file():
        raise ValueError(f"{path}: not a LeRobot checkpoint folder (no config.json)")
    try:
        raw = json.loads(config.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{config}: not JSON ({exc})") from exc
    kind = raw.get("type") if isinstance(raw, dict) else None
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"{config}: field 'type' (the policy type, e.g. diffusion or act) is missing")
    return kind


def _version(distribution: str) -> str | None:
    """The installed version of ``distribution`` (None: not installed, as grpo-probe-serve is not where
    the probe's own package serves)."""
    try:
        return distributions.version(distribution)
    except distributions.PackageNotFoundError:
        return None


def _is_image(feature: Any) -> bool:
    return str(getattr(feature.type, "value", feature.type)) == "VISUAL"


def _chunk_length(config: Any, given: int | None, path: Path) -> int:
    """``--chunk-length`` where given, else the actions the type executes per chunk (``n_action_steps``;
    VQ-BeT's ``action_chunk_size``)."""
    if given is not None:
        return int(given)
    for name in ("n_action_steps", "action_chunk_size"):
        if isinstance(getattr(config, name, None), int):
            return int(getattr(config, name))
    raise ValueError(
        f"{path / 'config.json'}: no n_action_steps: give the design's chunk with --chunk-length"
    )


def _identity(value: Any) -> Any:
    return value


def _action_stats(postprocessor: Any) -> dict[str, np.ndarray] | None:
    """The action's statistics in the post-processor's unnormalizer step (None: it has none)."""
    for step in getattr(postprocessor, "steps", ()):
        stats = getattr(step, "stats", None)
        if isinstance(stats, dict) and ACTION in stats:
            return {k: np.asarray(torch.as_tensor(v).cpu().numpy()) for k, v in stats[ACTION].items()}
    return None


def load_checkpoint(
    path: str | Path,
    *,
    device: str = "cpu",
    chunk_length: int | None = None,
    cameras: Sequence[str] = (),
    action_low: Sequence[float] | None = None,
    action_high: Sequence[float] | None = None,
) -> tuple[LeRobotAdapter, dict[str, Any]]:
    """The adapter for the checkpoint folder at ``path`` on ``device``, and the metadata its server
    sends in every hello (type, versions, checkpoint hash, chunk length)."""
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    path = Path(path).resolve()
    kind = checkpoint_type(path)
    config = PreTrainedConfig.from_pretrained(str(path))
    config.device = device
    if hasattr(config, "pretrained_backbone_weights"):
        config.pretrained_backbone_weights = None  # the checkpoint holds the backbone: download nothing
    policy = get_policy_class(kind).from_pretrained(str(path), config=config)
    policy.to(device).eval()
    if (path / PREPROCESSOR).is_file():
        device_override = {"device_processor": {"device": device}}
        preprocess, postprocess = make_pre_post_processors(
            config,
            pretrained_path=str(path),
            preprocessor_overrides=device_override,
            postprocessor_overrides={"device_processor": {"device": "cpu"}},
        )
        stats = _action_stats(postprocess)
    else:  # an older checkpoint without processors: inputs and actions as the policy reads them
        preprocess, postprocess, stats = _identity, _identity, None
    action_dim = int(config.output_features[ACTION].shape[0])
    bounds = ActionBounds.build(action_dim, stats, action_low, action_high)
    image_features = [k for k, f in config.input_features.items() if _is_image(f)]
    adapter = LeRobotAdapter(
        policy,
        sampler_for(kind),
        preprocess=preprocess,
        postprocess=postprocess,
        cameras=CameraMap.build(image_features, cameras),
        bounds=bounds,
        chunk_length=_chunk_length(config, chunk_length, path),
        device=device,
        source=f"LeRobot {kind} checkpoint {path}",
    )
    metadata = {
        "checkpoint": str(path),
        "checkpoint_sha256": checkpoint_sha256(path),
        "lerobot_type": kind,
        # what decision.md says of the arm's stochasticity: the sampler this server draws with, not the
        # design's mode (a Diffusion checkpoint served under flow_ode draws DDPM steps)
        "sampler": dict(adapter.sampler.declared),
        "chunk_length": adapter.chunk_length,
        "device": device,
        "threads": torch.get_num_threads(),
        "versions": {name: _version(name) for name in ("lerobot", "torch", "grpo-probe-serve")},
    }
    return adapter, metadata
