"""``grpo-probe prereg lock|check`` and ``grpo-probe verify``: the two ends of the manifest chain.

Why the prereg commands live here and not in the prereg package: ``prereg check --manifest`` writes the
chain's root manifest, so the command needs provenance, and provenance sits above the prereg (``verify``
ends the chain at the prereg's canonical hash and lock, read through :mod:`grpo_probe.prereg.canonical`
and :mod:`grpo_probe.prereg.lock`). A command module inside the prereg package that imported provenance
would make the two packages import each other; here every import looks down.

The prereg and provenance modules are imported inside each command, not at the top: importing
:mod:`grpo_probe.prereg` loads the environment registry and pyarrow, which ``grpo-probe prereg --help`` and
``grpo-probe verify --help`` (each builds this module's parsers first) would otherwise pay for.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def _results_hashes(results: Path, name: str) -> dict[str, list[str]]:
    """prereg sha256 -> the manifests under ``<results>/<name>/`` that carry it (what results exist)."""
    from grpo_probe.provenance.manifest import read_manifest

    found: dict[str, list[str]] = {}
    for path in sorted((results / name).rglob("*.manifest.json")):
        found.setdefault(read_manifest(path)["prereg_sha256"], []).append(str(path))
    return found


def _lock(args: argparse.Namespace) -> int:
    """Lock FILE; an amendment saying ``after_results: false`` is checked against the results folder."""
    from grpo_probe.prereg.canonical import read_yaml
    from grpo_probe.prereg.design import lock_prereg
    from grpo_probe.prereg.names import check_one_folder_per_design

    results = args.results
    if results is None:
        config = Path("config/config.yaml")
        results = read_yaml(config).get("results", "results") if config.is_file() else "results"
    check_one_folder_per_design(args.file, results)
    name = read_yaml(args.file)["name"]
    hashes = _results_hashes(Path(results), name)
    outcome = lock_prereg(
        args.file,
        earlier_locks=args.earlier_lock,
        results_hashes=hashes,
        keep_amendments=args.keep_amendments,
    )
    print(outcome.message)
    return 0


def _check(args: argparse.Namespace) -> int:
    from grpo_probe.envs.served import ServedEnvError
    from grpo_probe.prereg.design import load_prereg
    from grpo_probe.prereg.env_check import check_built_environment
    from grpo_probe.prereg.lock import lock_path
    from grpo_probe.provenance.manifest import write_manifest

    prereg = load_prereg(args.file, require_lock=True)
    try:
        check_built_environment(prereg)  # what the workflow's first rule refuses, refused here too
    except ServedEnvError as exc:  # a served simulator must answer here, as it must for the workflow
        built = "prereg check builds the design's environment, as the workflow does"
        raise ValueError(f"{exc} ({built})") from None
    if args.manifest:
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


def register(subparsers: Any) -> None:
    """Add ``prereg lock``, ``prereg check`` and ``verify`` to the ``grpo-probe`` command line."""
    _register_prereg(subparsers)
    _register_verify(subparsers)


def _register_prereg(subparsers: Any) -> None:
    parser = subparsers.add_parser("prereg", help="lock or check a pre-registered design")
    commands = parser.add_subparsers(dest="prereg_command", required=True)

    lock = commands.add_parser(
        "lock",
        help="write FILE.lock (first lock, or re-lock after an appended amendment)",
        description="Validate FILE and write FILE.lock. A locked design re-locks only when its change comes "
        "with a new `amendments:` entry naming the changed fields and recording after_results and replaces, "
        "and earlier amendments are unchanged. The lock keeps the sha256 of every registered version and "
        "checks that FILE's amendment record rebuilds each one.",
    )
    lock.add_argument("file", metavar="FILE", help="prereg YAML, e.g. prereg/smoke.yaml")
    lock.add_argument(
        "--results",
        default=None,
        help="results folder whose manifests show which versions have results (default: the `results:` "
        "setting of config/config.yaml, else results)",
    )
    lock.add_argument(
        "--earlier-lock",
        action="append",
        default=[],
        metavar="LOCK",
        help="an older lock file of FILE (e.g. from version control); its version enters the lock's "
        "history after FILE's amendment record rebuilds it to the same sha256 (repeatable)",
    )
    lock.add_argument(
        "--keep-amendments",
        action="store_true",
        help="lock a design that lists amendments although it has no lock and no results yet (a copy of "
        "another design keeps the original's amendments as its history; without this flag such a first "
        "lock is refused, and `amendments: []` starts the copy clean)",
    )
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
