"""``grpo-probe decide``: decision.md, decision.json and the figures from probe and anchor tables, by hand.

The workflow's decision rule calls :func:`grpo_probe.analysis.page.report.build_decision` directly; this
command is the same call for a researcher with tables on disk. The prereg must match its lock.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

__all__ = ["register"]


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, sep, path = value.partition("=")
        if not sep or not key or not path:
            raise ValueError(f"{flag} takes NAME=PATH, got {value!r}")
        if key in out:
            raise ValueError(f"{flag} {key} is given twice")
        out[key] = path
    return out


def register(subparsers: argparse._SubParsersAction) -> None:
    decide = subparsers.add_parser(
        "decide",
        help="apply the registered decision rule to probe and anchor tables",
        description="Apply a locked design's decision rule to probe tables (one per cell) and anchor tables "
        "(one per arm) outside the workflow, and write decision.md, decision.json and the figures. The "
        "workflow's decision rule does the same from its own tables; this is for tables made by hand "
        "(grpo-probe rollout) or copied from a run.",
    )
    decide.add_argument("--prereg", required=True, help="the registered design (YAML, locked)")
    decide.add_argument(
        "--probe", action="append", default=[], metavar="CELL=TABLE", help="probe table per cell"
    )
    decide.add_argument(
        "--anchor", action="append", default=[], metavar="ARM=TABLE", help="anchor table per arm"
    )
    decide.add_argument("--out-md", default="decision.md", help="where decision.md goes")
    decide.add_argument("--out-json", default="decision.json", help="where decision.json goes")
    decide.add_argument("--figures-dir", default="results/figures", help="where the PNG figures go")
    decide.add_argument(
        "--artifact",
        action="append",
        default=[],
        help="a further artifact to hash into the provenance footer",
    )
    decide.add_argument(
        "--compute",
        default=None,
        help="JSON list of {stage, cpu_s, gpu_s, max_rss_mb}, shown against the gate",
    )
    decide.set_defaults(func=run_decide)


def run_decide(args: argparse.Namespace) -> int:
    from grpo_probe.analysis.page.report import build_decision
    from grpo_probe.prereg.design import load_prereg
    from grpo_probe.provenance.manifest import file_sha256

    prereg = load_prereg(args.prereg)
    probes = _pairs(args.probe, "--probe")
    anchors = _pairs(args.anchor, "--anchor")
    hashed = [args.prereg, *probes.values(), *anchors.values(), *args.artifact]
    compute = None
    if args.compute is not None:
        hashed.append(args.compute)
        compute = json.loads(Path(args.compute).read_text(encoding="utf-8"))
        if not isinstance(compute, list):
            raise ValueError(f"{args.compute}: must hold a JSON list of compute rows")
    decision = build_decision(
        probe_tables=probes,
        anchor_tables=anchors,
        prereg=prereg,
        out_md=args.out_md,
        out_json=args.out_json,
        figures_dir=args.figures_dir,
        provenance=[(p, file_sha256(p)) for p in sorted(set(hashed))],
        compute=compute,
        compute_gate={"cpu_hours": prereg.compute_gate.cpu_hours, "gpu_hours": prereg.compute_gate.gpu_hours},
    )
    print(f"{args.out_md}: {decision['outcome']['kind']}: {decision['outcome']['headline']}")
    return 0
