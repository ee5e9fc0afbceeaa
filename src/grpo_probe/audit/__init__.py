"""Audits: rerun the single job that produced a result and compare its bytes with the manifest.

Why lazy (PEP 562): importing :mod:`grpo_probe.audit.audit_command` runs this file first, and the rerun
and its comparison read the prereg and parquet files (pyarrow), which building the ``grpo-probe`` parser
never needs. A name is imported from its module the first time it is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpo_probe.lazy_exports import lazy_exports

if TYPE_CHECKING:  # the exports as type checkers see them; at run time each loads on first use
    from grpo_probe.audit.across import DecisionComparison, compare_decisions, format_comparison  # noqa: F401
    from grpo_probe.audit.compare import OutputComparison, compare_output, first_difference  # noqa: F401
    from grpo_probe.audit.locate import JobRecord, find_producing_manifest, job_record, upstream_files  # noqa: F401
    from grpo_probe.audit.rerun import AuditResult, RerunFailedError, audit  # noqa: F401

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        ".across": ("DecisionComparison", "compare_decisions", "format_comparison"),
        ".compare": ("OutputComparison", "compare_output", "first_difference"),
        ".locate": ("JobRecord", "find_producing_manifest", "job_record", "upstream_files"),
        ".rerun": ("AuditResult", "RerunFailedError", "audit"),
    },
    globals(),
)
