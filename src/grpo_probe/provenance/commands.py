"""``grpo-probe verify``: re-hash a manifest chain back to the prereg."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from grpo_probe.provenance.chain import BrokenLinkError, verify_chain

__all__ = ["register"]


def _verify(args: argparse.Namespace) -> int:
    try:
        report = verify_chain(args.target, root=args.root)
    except BrokenLinkError as exc:
        print(f"verify: broken link: {exc}", file=sys.stderr)
        return 1
    for note in report.notes:
        print(f"note: {note}")
    print(
        f"verify: ok: {len(report.manifests)} manifests, {report.artifacts} artifacts re-hashed, "
        f"chain ends at {report.prereg_path} (sha256 {report.prereg_sha256})"
    )
    return 0


def register(subparsers: Any) -> None:
    """Add ``verify`` to the ``grpo-probe`` command line."""
    parser = subparsers.add_parser(
        "verify",
        help="re-hash every artifact from a manifest back to the prereg",
        description="Re-hash every artifact listed in TARGET_MANIFEST and, recursively, in its input "
        "manifests, back to the prereg and its lock; exit 1 naming the first broken link.",
    )
    parser.add_argument("target", metavar="TARGET_MANIFEST", help="e.g. results/decision.manifest.json")
    parser.add_argument("--root", default=None, help="directory manifest paths are relative to (default: .)")
    parser.set_defaults(func=_verify)
