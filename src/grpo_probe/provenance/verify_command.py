"""``grpo-probe verify``: the end of the manifest chain, every artifact re-hashed back to the prereg.

Why in provenance: ``verify`` walks the manifests the workflow's jobs wrote and ends the chain at the
prereg's canonical hash and lock (read through :mod:`grpo_probe.prereg.canonical` and
:mod:`grpo_probe.prereg.lock`), all at or below this package. The chain is imported inside the command, so
``grpo-probe verify --help`` does not load the prereg.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``verify`` to the ``grpo-probe`` command line."""
    _register_verify(subparsers)


def _register_verify(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="re-hash every artifact from a manifest back to the prereg",
        description="Re-hash every artifact listed in TARGET_MANIFEST and, recursively, in its input "
        "manifests, back to the prereg and its lock; exit 1 naming the first broken link.",
    )
    parser.add_argument(
        "target",
        metavar="TARGET_MANIFEST",
        help="e.g. results/smoke/decision.manifest.json (each design's manifests are under results/<name>/)",
    )
    parser.add_argument("--root", default=None, help="directory manifest paths are relative to (default: .)")
    parser.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    from grpo_probe.provenance.chain import BrokenLinkError, verify_chain

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
