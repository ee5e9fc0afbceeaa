"""``grpo-probe estimate``: price the probe from the oracle stage before launching the rollouts."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    est = subparsers.add_parser(
        "estimate",
        help="estimate the run's CPU cost from the parallel oracle's benchmark, against the gate",
        description="Price the whole probe before its rollouts run: scale the parallel oracle's measured "
        "cost (its benchmark under RESULTS/<name>/benchmarks) to every registered cell, seed and draw, and "
        "compare it with the design's compute gate. Exit 0 within the gate, 1 over it.",
    )
    est.add_argument("--prereg", default="prereg/grpo_signal_probe.yaml", help="registered design")
    est.add_argument("--results", default="results", help="results directory of the run (config `results:`)")
    est.set_defaults(func=run_estimate)


def run_estimate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from grpo_probe.compute.accounting import estimate_run, format_estimate
    from grpo_probe.prereg import load_prereg

    prereg = load_prereg(args.prereg)
    estimate = estimate_run(prereg, Path(args.results) / prereg.name / "benchmarks")
    print(format_estimate(estimate))
    return 0 if estimate["within_gate"] else 1
