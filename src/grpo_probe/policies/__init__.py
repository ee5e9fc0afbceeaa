"""The two reference heads (FAST-token AR and flow matching) and the policy protocol the probe calls."""

from grpo_probe.policies.protocol import (
    Policy,
    PolicyOutput,
    RowDiagnostics,
    RowKey,
    SamplingMode,
    load_policy,
)

__all__ = ["Policy", "PolicyOutput", "RowDiagnostics", "RowKey", "SamplingMode", "load_policy"]
