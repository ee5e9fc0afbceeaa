"""``grpo-probe prereg lock|check``: register a design, and refuse to run one that drifted from its lock."""

from __future__ import annotations

import argparse
from typing import Any

from grpo_probe.prereg.design import load_prereg, lock_prereg
from grpo_probe.prereg.lock import lock_path

__all__ = ["register"]


def _lock(args: argparse.Namespace) -> int:
    print(lock_prereg(args.file).message)
    return 0


def _check(args: argparse.Namespace) -> int:
    prereg = load_prereg(args.file, require_lock=True)
    if args.manifest:
        from grpo_probe.provenance.manifest import write_manifest

        write_manifest(
            args.manifest,
            outputs=[prereg.path, lock_path(prereg.path)],
            input_manifests=[],
            prereg_sha256=prereg.sha256,
            rule="prereg_check",
            extra={"name": prereg.name, "lock_date": prereg.lock_date, "amendments": len(prereg.amendments)},
            prereg_path=prereg.path,
        )
    print(f"{prereg.path}: valid and locked ({prereg.lock_date}), sha256 {prereg.sha256}")
    return 0


def register(subparsers: Any) -> None:
    """Add ``prereg lock`` and ``prereg check`` to the ``grpo-probe`` command line."""
    parser = subparsers.add_parser("prereg", help="lock or check a pre-registered design")
    commands = parser.add_subparsers(dest="prereg_command", required=True)

    lock = commands.add_parser(
        "lock",
        help="write FILE.lock (first lock, or re-lock after an appended amendment)",
        description="Validate FILE and write FILE.lock. A locked design re-locks only when its change comes "
        "with a new `amendments:` entry naming the changed fields and earlier amendments are unchanged.",
    )
    lock.add_argument("file", metavar="FILE", help="prereg YAML, e.g. prereg/smoke.yaml")
    lock.set_defaults(func=_lock)

    check = commands.add_parser(
        "check",
        help="validate FILE and check it against FILE.lock (the workflow's first rule)",
        description="Validate FILE against the schema and cross-field rules and check it against FILE.lock; "
        "exit 2 naming the file, the field or the lock on any mismatch.",
    )
    check.add_argument("file", metavar="FILE", help="prereg YAML, e.g. prereg/grpo_signal_probe.yaml")
    check.add_argument("--manifest", default=None, help="also write the chain's root manifest here")
    check.set_defaults(func=_check)
