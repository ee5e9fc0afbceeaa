"""Compute accounting: what each stage used (Snakemake's benchmark files) against the registered gate."""

from grpo_probe.compute.accounting import (
    StageCompute,
    compute_report,
    estimate_run,
    read_benchmarks,
)

__all__ = ["StageCompute", "compute_report", "estimate_run", "read_benchmarks"]
