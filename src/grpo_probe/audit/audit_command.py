"""``grpo-probe audit PATH``: rerun the job that produced PATH and compare its bytes with the manifest."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpo_probe.audit.rerun import AuditResult

__all__ = ["format_result", "register"]


def _size(size: int | None) -> str:
    return "size unknown" if size is None else f"{size} bytes"


def format_result(result: AuditResult) -> str:
    """The report an auditor reads: one line per output, notes, and IDENTICAL or DIFFERS last."""
    lines = [
        f"audit: {result.target}",
        f"manifest: {result.manifest} (rule {result.rule})",
        f"rerun: {result.seconds:.1f} s, snakemake {' '.join(result.command[3:])}",
    ]
    if result.scratch is not None:
        lines.append(f"scratch: {result.scratch}")
    for out in result.outputs:
        if out.identical:
            lines.append(f"  same     {out.path}  sha256 {out.expected_sha256}  {_size(out.found_size)}")
            continue
        lines.append(f"  DIFFERS  {out.path}")
        lines.append(f"           expected sha256 {out.expected_sha256}  {_size(out.expected_size)}")
        found = "(not written)" if out.found_sha256 is None else out.found_sha256
        lines.append(f"           found    sha256 {found}  {_size(out.found_size)}")
        if out.detail:
            lines.append(f"           {out.detail}")
    lines += [f"note: {note}" for note in result.notes]
    differing = sum(not out.identical for out in result.outputs)
    if differing:
        lines.append(f"DIFFERS: {differing} of {len(result.outputs)} outputs")
    else:
        lines.append(f"IDENTICAL: all {len(result.outputs)} outputs match the manifest's sha256")
    return "\n".join(lines)


def _parse_config(values: list[str]) -> dict[str, str]:
    config = {}
    for value in values:
        key, sep, setting = value.partition("=")
        if not sep or not key:
            raise ValueError(f"--config {value!r}: expected KEY=VALUE")
        config[key] = setting
    return config


def _audit(args: argparse.Namespace) -> int:
    # imported here: the rerun reads manifests and the prereg, which the parser alone never needs
    from grpo_probe.audit.rerun import RerunFailedError, audit

    try:
        result = audit(
            args.path,
            root=args.root,
            keep=args.keep,
            cores=args.cores,
            config=_parse_config(args.config),
            scratch_parent=args.scratch,
        )
    except RerunFailedError as exc:
        print(f"RERUN FAILED: {exc}", file=sys.stderr)
        return 1
    print(format_result(result))
    return 0 if result.identical else 1


def register(subparsers: Any) -> None:
    """Add ``audit`` to the ``grpo-probe`` command line."""
    parser = subparsers.add_parser(
        "audit",
        help="rerun the job that produced PATH and compare every output with its manifest",
        description="Find the manifest that lists PATH as an output, rerun that one job in a scratch "
        "directory from its recorded inputs (Snakemake, restricted to the recorded rule), and compare each "
        "output's sha256 with the manifest. Prints IDENTICAL (exit 0) or, per differing file, the expected "
        "and found sha256 and size and where the bytes first differ (exit 1).",
    )
    parser.add_argument("path", metavar="PATH", help="an output, e.g. results/smoke/anchors/ar.parquet")
    parser.add_argument(
        "--root", default=None, help="workflow directory manifest paths are relative to (default: .)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory and print it")
    parser.add_argument("--cores", type=int, default=None, help="Snakemake --cores (default: all CPUs)")
    parser.add_argument("--scratch", default=None, help="parent of the scratch directory (default: $TMPDIR)")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a --config value the audited run set on its command line (repeatable), e.g. results=out",
    )
    parser.set_defaults(func=_audit)
