"""The two reference heads (FAST-token AR and flow matching) and the policy protocol the probe calls.

``load_policy`` is resolved on first use: importing this package (as a user's adapter does for
``PolicyOutput`` and ``RowDiagnostics``) then loads only the protocol, not torch and the heads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_probe.policies.protocol import (
    Policy,
    PolicyOutput,
    RowDiagnostics,
    RowKey,
    SamplingMode,
)

if TYPE_CHECKING:
    from grpo_probe.policies.checkpoint import load_policy

__all__ = ["Policy", "PolicyOutput", "RowDiagnostics", "RowKey", "SamplingMode", "load_policy"]


def __getattr__(name: str) -> Any:
    """Import :func:`grpo_probe.policies.checkpoint.load_policy` (and torch) only when it is asked for."""
    if name == "load_policy":
        from grpo_probe.policies.checkpoint import load_policy

        return load_policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
