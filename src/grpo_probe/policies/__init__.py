"""The reference heads (FAST-token AR, flow matching, image-conditioned flow) and the policy protocol.

Every name is resolved on first use (PEP 562): reading ``PolicyOutput`` or ``RowDiagnostics`` (as a
user's adapter does) loads only the protocol and numpy, not torch and the heads, and importing a module
of this package (``grpo-probe policy``'s command, when the command line builds its parser) loads
neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpo_probe.lazy_exports import lazy_exports

if TYPE_CHECKING:  # the exports as type checkers see them; at run time each loads on first use
    from grpo_probe.policies.checkpoint import load_policy  # noqa: F401
    from grpo_probe.policies.protocol import (  # noqa: F401
        Policy,
        PolicyCapabilities,
        PolicyOutput,
        RowDiagnostics,
        RowKey,
        SamplingMode,
    )
    from grpo_probe.policies.vision_flow import VisionFlowPolicy  # noqa: F401

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        ".checkpoint": ("load_policy",),
        ".protocol": (
            "Policy",
            "PolicyCapabilities",
            "PolicyOutput",
            "RowDiagnostics",
            "RowKey",
            "SamplingMode",
        ),
        ".vision_flow": ("VisionFlowPolicy",),
    },
    globals(),
)
"""Import the protocol (numpy), :func:`~grpo_probe.policies.checkpoint.load_policy` or
:class:`~grpo_probe.policies.vision_flow.VisionFlowPolicy` (torch) only when it is asked for."""
