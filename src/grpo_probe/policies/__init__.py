"""The reference heads (FAST-token AR, flow matching, image-conditioned flow) and the policy protocol.

Every name is resolved on first use (PEP 562): reading ``PolicyOutput`` or ``RowDiagnostics`` (as a
user's adapter does) loads only the protocol and numpy, not torch and the heads, and importing a module
of this package (``grpo-probe policy``'s command, when the command line builds its parser) loads
neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpo_probe.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from grpo_probe.policies.checkpoint import load_policy
    from grpo_probe.policies.protocol import (
        Policy,
        PolicyCapabilities,
        PolicyOutput,
        RowDiagnostics,
        RowKey,
        SamplingMode,
    )
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
    "Policy": "grpo_probe.policies.protocol",
    "PolicyCapabilities": "grpo_probe.policies.protocol",
    "PolicyOutput": "grpo_probe.policies.protocol",
    "RowDiagnostics": "grpo_probe.policies.protocol",
    "RowKey": "grpo_probe.policies.protocol",
    "SamplingMode": "grpo_probe.policies.protocol",
    "load_policy": "grpo_probe.policies.checkpoint",
    "VisionFlowPolicy": "grpo_probe.policies.vision_flow",
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())
"""Import the protocol (numpy), :func:`~grpo_probe.policies.checkpoint.load_policy` or
:class:`~grpo_probe.policies.vision_flow.VisionFlowPolicy` (torch) only when it is asked for."""
