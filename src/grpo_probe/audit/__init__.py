"""Audits: rerun the single job that produced a result and compare its bytes with the manifest.

Why lazy (PEP 562): importing :mod:`grpo_probe.audit.audit_command` runs this file first, and the rerun
and its comparison read the prereg and parquet files (pyarrow), which building the ``grpo-probe`` parser
never needs. A name is imported from its module the first time it is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpo_probe.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from grpo_probe.audit.across import DecisionComparison, compare_decisions, format_comparison
    from grpo_probe.audit.compare import OutputComparison, compare_output, first_difference
    from grpo_probe.audit.locate import JobRecord, find_producing_manifest, job_record, upstream_files
    from grpo_probe.audit.rerun import AuditResult, RerunFailedError, audit

_WHERE: dict[str, str] = {
    "DecisionComparison": "grpo_probe.audit.across",
    "compare_decisions": "grpo_probe.audit.across",
    "format_comparison": "grpo_probe.audit.across",
    "OutputComparison": "grpo_probe.audit.compare",
    "compare_output": "grpo_probe.audit.compare",
    "first_difference": "grpo_probe.audit.compare",
    "JobRecord": "grpo_probe.audit.locate",
    "find_producing_manifest": "grpo_probe.audit.locate",
    "job_record": "grpo_probe.audit.locate",
    "upstream_files": "grpo_probe.audit.locate",
    "AuditResult": "grpo_probe.audit.rerun",
    "RerunFailedError": "grpo_probe.audit.rerun",
    "audit": "grpo_probe.audit.rerun",
}
"""Each exported name and the module it is imported from on first use."""


__getattr__ = lazy_exports(__name__, _WHERE, globals())


__all__ = [
    "AuditResult",
    "DecisionComparison",
    "JobRecord",
    "OutputComparison",
    "RerunFailedError",
    "audit",
    "compare_decisions",
    "compare_output",
    "find_producing_manifest",
    "first_difference",
    "format_comparison",
    "job_record",
    "upstream_files",
]
