"""``grpo-probe audit PATH``: rerun the job that produced PATH and compare its bytes with the manifest;
``grpo-probe audit --against OTHER [THIS]``: compare two decision records across environments."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpo_probe.audit.rerun import AuditResult

__all__ = ["format_result", "register"]


def _size(size: int | None) -> str:
    return "size unknown" if size is None else f"{size} bytes"


def format_result(result: AuditResult) -> str:
    """The report an auditor reads: one line per output, notes, and IDENTICAL or DIFFERS last.

    When bytes differ and the manifest's environment is not byte-compatible with this machine's, that is
    said before any DIFFERS line, with the decision records compared as across environments allow."""
    # imported here: building the parser (``grpo-probe audit --help``) needs none of the report's modules
    from grpo_probe.provenance.environments import environment_line, environment_value_lines

    lines = [
        f"audit: {result.target}",
        f"manifest: {result.manifest} (rule {result.rule})",
        f"rerun: {result.seconds:.1f} s, snakemake {' '.join(result.command[3:])}",
    ]
    if result.scratch is not None:
        lines.append(f"scratch: {result.scratch}")
    elsewhere = result.another_environment and not result.identical
    if elsewhere:  # said before any DIFFERS line: these bytes need not match here
        lines.append(environment_line(result.environment_differs))
        lines += [
            f"  {line}"
            for line in environment_value_lines(
                *result.environments, ("recorded", "this machine"), result.environment_differs
            )
        ]
        lines.append(
            "  bytes may differ in another environment without anything having changed; a decision "
            "record the job wrote is compared as across environments allow (lines starting decision:)"
        )
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
    if result.across is not None:
        from grpo_probe.audit.across import format_comparison

        lines += [f"decision: {line}" for line in format_comparison(result.across).splitlines()]
    lines += [f"note: {note}" for note in result.notes]
    differing = sum(not out.identical for out in result.outputs)
    if differing and elsewhere:
        verdict = f"; the decision record: {result.across.headline}" if result.across is not None else ""
        lines.append(
            f"DIFFERS: {differing} of {len(result.outputs)} outputs, in "
            f"{environment_line(result.environment_differs)}{verdict}"
        )
    elif differing:
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


def _read_record(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a JSON decision record ({exc})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: a decision record is a JSON object, got {type(record).__name__}")
    return record


def _against(args: argparse.Namespace) -> int:
    """Compare THIS decision record with OTHER, as their environments allow; exit 0 when identical, or
    from another environment with the same decision and every interval overlapping."""
    from grpo_probe.audit.across import compare_decisions, format_comparison
    from grpo_probe.audit.locate import configured_results_dir

    other_path = Path(args.against)
    if not other_path.is_file():
        raise FileNotFoundError(f"{other_path}: no such decision record")
    other = _read_record(other_path)
    if args.path is not None:
        this_path = Path(args.path)
    else:  # this workflow's own record of the same design: <results>/<prereg name>/decision.json
        root = Path(args.root or ".")
        name = (other.get("prereg") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{other_path}: names no prereg, so give THIS_DECISION_JSON")
        this_path = root / configured_results_dir(root) / name / "decision.json"
    if not this_path.is_file():
        raise FileNotFoundError(f"{this_path}: no such decision record (give THIS_DECISION_JSON)")
    result = compare_decisions(_read_record(this_path), other, ("this", "other"))
    print(f"this:  {this_path}\nother: {other_path}")
    print(format_comparison(result))
    return 0 if result.passed else 1


def _audit(args: argparse.Namespace) -> int:
    if args.against is not None:
        return _against(args)
    if args.path is None:
        raise ValueError("audit: give PATH (an output to rerun) or --against OTHER_DECISION_JSON")
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
        "and found sha256 and size and where the bytes first differ (exit 1); when the manifest's "
        "environment is not byte-compatible with this machine's, it says so first. With --against, "
        "compares two decision records instead: exactly in the same environment, else the design, the "
        "decision and every interval (exit 0 when identical, or same decision and every interval "
        "overlapping; 1 otherwise).",
    )
    parser.add_argument(
        "path",
        metavar="PATH",
        nargs="?",
        default=None,
        help="an output, e.g. results/smoke/anchors/ar.parquet; with --against, THIS decision.json "
        "(default: <results>/<prereg name>/decision.json)",
    )
    parser.add_argument(
        "--against",
        metavar="OTHER_DECISION_JSON",
        default=None,
        help="compare a decision record (PATH) with this one, made in possibly another environment",
    )
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
