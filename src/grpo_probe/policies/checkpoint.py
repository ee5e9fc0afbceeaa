"""One checkpoint format for every head: weights, tokenizer, normalization statistics, config, kind.

Why one file with a content hash: an auditor's rerun of a training rule must give the same bytes, and a
probe must never run on a truncated or edited checkpoint. The payload is a ``torch.save`` of plain
containers (loaded back with ``weights_only=True``) serialized to memory, so no temporary file name
leaks into the archive, then written atomically. ``content_sha256`` covers kind, config, tokenizer and
every tensor; a mismatch on load means the file was corrupted.

Kinds: ``ar``, ``flow`` (state only) and ``vision_flow`` (state and one camera's frames), whose config
stores the camera's name beside the numeric training config: ``{"camera": "overhead", **config}``.

Reading a checkpoint back into a policy (:func:`load_policy`) needs the heads and the builders of
:mod:`grpo_probe.policies.models`, never the trainer: training depends on this module, not the reverse.

A policy read from a checkpoint declares :data:`OWN_FORMAT_CAPABILITIES` of its head: every sampling kind
of the head, the head's log-probs, and trainable parameters. Trainability is declared here rather than on
the head classes because it belongs to the format: phase 2's trainer reads and writes these files, so a
head built in memory (or wrapped by a user's adapter) does not inherit it.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from grpo_probe.atomic_io import atomic_write_bytes
from grpo_probe.envs.observation import CameraConfig
from grpo_probe.policies.ar_head import ROW_BLOCK, ARPolicy
from grpo_probe.policies.fast_tokenizer import FastTokenizer
from grpo_probe.policies.flow_head import FlowPolicy
from grpo_probe.policies.models import (
    ARTrainConfig,
    FlowTrainConfig,
    VisionFlowTrainConfig,
    build_ar_model,
    build_flow_model,
    build_vision_flow_model,
)
from grpo_probe.policies.protocol import Policy, PolicyCapabilities
from grpo_probe.policies.vision_flow import VisionFlowPolicy

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_KINDS",
    "FORMAT_VERSION",
    "OWN_FORMAT_CAPABILITIES",
    "Checkpoint",
    "file_sha256",
    "load_policy",
    "policy_from_checkpoint",
    "read_checkpoint",
    "vision_flow_config",
    "write_checkpoint",
]

CHECKPOINT_FORMAT = "grpo-probe-policy-checkpoint"
FORMAT_VERSION = 1
CHECKPOINT_KINDS = ("ar", "flow", "vision_flow")


class _OwnFormatCapabilities(Mapping[str, PolicyCapabilities]):
    """Head -> the capabilities of a policy of this format, read from the sampler registry when asked.

    Why not a dict built at import: a design may register a sampling kind of the lab's own
    (``samplers:``) after this module is imported, and the heads sample every registered kind of their
    head through its entry (:func:`grpo_probe.sampling.sampler_entry`), so they declare it too.
    """

    _HEADS = ("ar", "flow")

    def __getitem__(self, head: str) -> PolicyCapabilities:
        if head not in self._HEADS:
            raise KeyError(head)
        return PolicyCapabilities.of_head(head, logprobs=True, trainable=True)

    def __iter__(self) -> Iterator[str]:
        return iter(self._HEADS)

    def __len__(self) -> int:
        return len(self._HEADS)


OWN_FORMAT_CAPABILITIES: Mapping[str, PolicyCapabilities] = _OwnFormatCapabilities()
"""What a policy read from this format can do, by head: sample every kind of its head (the kinds registered
when it is read), record its head's log-probs, and be trained by phase 2."""
NORM_KEYS = ("obs_mean", "obs_std", "action_low", "action_high")
_REQUIRED = (
    "format",
    "format_version",
    "kind",
    "config_json",
    "tokenizer_json",
    "norm",
    "state_dict",
    "content_sha256",
)


@dataclass
class Checkpoint:
    """A head's trained state. ``tokenizer_json`` is empty for the flow heads."""

    kind: str
    config: dict[str, Any]
    tokenizer_json: str
    norm: dict[str, np.ndarray]
    state_dict: dict[str, torch.Tensor]
    path: Path | None = None


def _content_sha256(
    kind: str, config_json: str, tokenizer_json: str, tensors: dict[str, torch.Tensor]
) -> str:
    h = hashlib.sha256()
    for text in (kind, config_json, tokenizer_json):
        h.update(len(text.encode()).to_bytes(8, "little"))
        h.update(text.encode())
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def _all_tensors(norm: dict[str, torch.Tensor], state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {**{f"norm.{k}": v for k, v in norm.items()}, **{f"state.{k}": v for k, v in state.items()}}


def write_checkpoint(ckpt: Checkpoint, path: str | Path) -> str:
    """Write ``ckpt`` atomically to ``path``; returns the sha256 of the file bytes."""
    if ckpt.kind not in CHECKPOINT_KINDS:
        raise ValueError(f"{path}: checkpoint kind must be one of {CHECKPOINT_KINDS}, got {ckpt.kind!r}")
    config_json = json.dumps(ckpt.config, sort_keys=True)
    norm = {k: torch.from_numpy(np.ascontiguousarray(ckpt.norm[k], dtype=np.float64)) for k in NORM_KEYS}
    state = {k: v.detach().cpu().contiguous().clone() for k, v in sorted(ckpt.state_dict.items())}
    payload = {
        "format": CHECKPOINT_FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": ckpt.kind,
        "config_json": config_json,
        "tokenizer_json": ckpt.tokenizer_json,
        "norm": norm,
        "state_dict": state,
        "content_sha256": _content_sha256(
            ckpt.kind, config_json, ckpt.tokenizer_json, _all_tensors(norm, state)
        ),
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    data = buffer.getvalue()
    atomic_write_bytes(path, data)
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a checkpoint file's bytes, the hash a prereg pins and training prints."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_checkpoint(path: str | Path, expected_kind: str | None = None) -> Checkpoint:
    """Load and verify a checkpoint; every problem is a ``ValueError`` naming the file and what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: checkpoint file does not exist")
    try:
        payload = torch.load(io.BytesIO(path.read_bytes()), map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises RuntimeError, UnpicklingError, EOFError, ... on bad bytes
        raise ValueError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {exc})") from exc
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{path}: not a grpo-probe policy checkpoint (format field is not {CHECKPOINT_FORMAT!r})"
        )
    missing = [k for k in _REQUIRED if k not in payload]
    if missing:
        raise ValueError(f"{path}: checkpoint is incomplete, missing {', '.join(missing)}")
    if payload["format_version"] != FORMAT_VERSION:
        raise ValueError(
            f"{path}: format_version is {payload['format_version']!r}, this code reads {FORMAT_VERSION}"
        )
    kind = payload["kind"]
    if kind not in CHECKPOINT_KINDS:
        raise ValueError(f"{path}: kind must be one of {CHECKPOINT_KINDS}, got {kind!r}")
    if expected_kind is not None and kind != expected_kind:
        raise ValueError(f"{path}: checkpoint kind is {kind!r}, expected {expected_kind!r}")
    norm, state = payload["norm"], payload["state_dict"]
    if not isinstance(norm, dict) or not isinstance(state, dict) or not state:
        raise ValueError(f"{path}: checkpoint is incomplete, norm or state_dict is empty or not a mapping")
    missing_norm = [k for k in NORM_KEYS if k not in norm]
    if missing_norm:
        raise ValueError(f"{path}: checkpoint is incomplete, norm lacks {', '.join(missing_norm)}")
    if kind == "ar" and not payload["tokenizer_json"]:
        raise ValueError(f"{path}: checkpoint is incomplete, an 'ar' checkpoint needs tokenizer_json")
    expected = _content_sha256(
        kind, payload["config_json"], payload["tokenizer_json"], _all_tensors(norm, state)
    )
    if expected != payload["content_sha256"]:
        raise ValueError(f"{path}: checkpoint is corrupted, its content does not match content_sha256")
    try:
        config = json.loads(payload["config_json"])
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: config_json does not parse: {exc}") from exc
    return Checkpoint(
        kind=kind,
        config=config,
        tokenizer_json=payload["tokenizer_json"],
        norm={k: norm[k].numpy() for k in NORM_KEYS},
        state_dict=state,
        path=path,
    )


def _flow_chunk_length(ckpt: Checkpoint, action_dims: int, where: str) -> int:
    """The chunk length a flow checkpoint (either kind) was trained for: its velocity net's output width /
    action dims."""
    outputs = [k for k in ckpt.state_dict if k.startswith("net.") and k.endswith(".bias")]
    if not outputs or action_dims < 1:
        raise ValueError(f"{where}: not a flow velocity net (no net.*.bias weights or no action dims)")
    last = max(outputs, key=lambda k: int(k.split(".")[1]))
    width = int(ckpt.state_dict[last].shape[0])
    if width % action_dims:
        raise ValueError(f"{where}: output width {width} is not a multiple of {action_dims} action dims")
    return width // action_dims


def vision_flow_config(ckpt: Checkpoint, where: str) -> tuple[str, VisionFlowTrainConfig]:
    """The camera and training config a ``vision_flow`` checkpoint stores (``{"camera": ..., **config}``)."""
    values = dict(ckpt.config)
    camera = values.pop("camera", None)
    config = VisionFlowTrainConfig.from_dict(values, where=f"{where}: config")
    try:
        camera_config = CameraConfig(camera, config.image_height, config.image_width)
    except ValueError as exc:
        raise ValueError(f"{where}: config.camera: {exc}") from None
    return camera_config.name, config


_Model = TypeVar("_Model", bound=torch.nn.Module)


def _with_weights(model: _Model, ckpt: Checkpoint, where: str) -> _Model:
    """``model`` with the checkpoint's weights, every tensor of them; a ``ValueError`` naming the file
    says where they do not fit."""
    try:
        model.load_state_dict(ckpt.state_dict, strict=True)
    except RuntimeError as exc:
        raise ValueError(f"{where}: weights do not fit the configured model: {exc}") from exc
    return model


def policy_from_checkpoint(ckpt: Checkpoint, device: str = "cpu", row_block: int | None = None) -> Policy:
    """Build the head a checkpoint describes; raises ``ValueError`` naming the file if weights do not fit.

    ``device`` is where the network runs ("cpu", "cuda", "cuda:N"); keyed draws stay on the CPU, so noise
    does not depend on it, though float results on different devices need not be bit-identical.
    ``row_block``: the AR head's registered block of rows decoded together (None: its default); the
    flow heads compute in blocks of :data:`~grpo_probe.policies.ar_head.ROW_BLOCK` only.
    """
    where = str(ckpt.path) if ckpt.path is not None else "checkpoint"
    if row_block is not None and ckpt.kind != "ar" and row_block != ROW_BLOCK:
        raise ValueError(
            f"{where}: a {ckpt.kind!r} head computes in blocks of {ROW_BLOCK} rows; row_block {row_block} "
            "applies to the AR head only"
        )
    obs_dim = int(ckpt.norm["obs_mean"].shape[0])
    action_dims = int(ckpt.norm["action_low"].shape[0])
    stats = (ckpt.norm["obs_mean"], ckpt.norm["obs_std"])
    bounds = (ckpt.norm["action_low"], ckpt.norm["action_high"])
    policy: ARPolicy | VisionFlowPolicy | FlowPolicy
    if ckpt.kind == "ar":
        ar_config = ARTrainConfig.from_dict(ckpt.config, where=f"{where}: config")
        tokenizer = FastTokenizer.from_json(ckpt.tokenizer_json, where=f"{where}: tokenizer_json")
        ar_model = _with_weights(build_ar_model(ar_config, obs_dim, tokenizer), ckpt, where)
        block = ROW_BLOCK if row_block is None else row_block
        policy = ARPolicy(ar_model, tokenizer, *stats, device, row_block=block)
    elif ckpt.kind == "vision_flow":
        camera, vision_config = vision_flow_config(ckpt, where)
        chunk_length = _flow_chunk_length(ckpt, action_dims, where)
        vision_model = build_vision_flow_model(vision_config, obs_dim, chunk_length, action_dims)
        policy = VisionFlowPolicy(_with_weights(vision_model, ckpt, where), camera, *stats, *bounds, device)
    else:
        flow_config = FlowTrainConfig.from_dict(ckpt.config, where=f"{where}: config")
        chunk_length = _flow_chunk_length(ckpt, action_dims, where)
        flow_model = build_flow_model(flow_config, obs_dim, chunk_length, action_dims)
        policy = FlowPolicy(_with_weights(flow_model, ckpt, where), *stats, *bounds, device)
    policy.capabilities = OWN_FORMAT_CAPABILITIES[policy.head]  # type: ignore[union-attr]
    return policy


def load_policy(checkpoint: str | Path, device: str = "cpu", row_block: int | None = None) -> Policy:
    """Read a checkpoint written by :mod:`grpo_probe.policies.train` and return its policy.

    The signature is that of a checkpoint adapter (``factory(checkpoint=..., device=...)``), so
    ``grpo_probe.policies.checkpoint:load_policy`` binds one of this package's checkpoints in config.
    Raises ``ValueError`` naming the file when it is missing, corrupted, incomplete or of an unknown kind.
    ``row_block``: see :func:`policy_from_checkpoint`.
    """
    return policy_from_checkpoint(read_checkpoint(checkpoint), device=device, row_block=row_block)
