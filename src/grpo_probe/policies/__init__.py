"""The reference heads (FAST-token AR, flow matching, image-conditioned flow) and the policy protocol.

``load_policy`` and ``VisionFlowPolicy`` are resolved on first use: importing this package (as a user's
adapter does for ``PolicyOutput`` and ``RowDiagnostics``) then loads only the protocol, not torch and
the heads.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from grpo_probe.policies.protocol import (
    Policy,
    PolicyCapabilities,
    PolicyOutput,
    RowDiagnostics,
    RowKey,
    SamplingMode,
)

if TYPE_CHECKING:
    from grpo_probe.policies.checkpoint import load_policy
    from grpo_probe.policies.vision_flow import VisionFlowPolicy

__all__ = [
    "Policy",
    "PolicyCapabilities",
    "PolicyOutput",
    "RowDiagnostics",
    "RowKey",
    "SamplingMode",
    "VisionFlowPolicy",
    "load_policy",
]

_LAZY = {
    "load_policy": "grpo_probe.policies.checkpoint",
    "VisionFlowPolicy": "grpo_probe.policies.vision_flow",
}


def __getattr__(name: str) -> Any:
    """Import :func:`~grpo_probe.policies.checkpoint.load_policy` or
    :class:`~grpo_probe.policies.vision_flow.VisionFlowPolicy` (and torch) only when it is asked for."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
