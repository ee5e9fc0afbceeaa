"""Audits: rerun the single job that produced a result and compare its bytes with the manifest."""

from grpo_probe.audit.compare import OutputComparison, compare_output, first_difference
from grpo_probe.audit.locate import JobRecord, find_producing_manifest, job_record, upstream_files
from grpo_probe.audit.rerun import AuditResult, RerunFailedError, audit

__all__ = [
    "AuditResult",
    "JobRecord",
    "OutputComparison",
    "RerunFailedError",
    "audit",
    "compare_output",
    "find_producing_manifest",
    "first_difference",
    "job_record",
    "upstream_files",
]
