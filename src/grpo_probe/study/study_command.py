"""``grpo-probe study lock|check|verify``: register a validation study, and audit its page."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from grpo_probe.provenance.chain import BrokenLinkError
from grpo_probe.study.design import StudyError, load_study, lock_study

__all__ = ["register"]


def _lock(args: argparse.Namespace) -> int:
    try:
        lock = lock_study(args.file)
    except (StudyError, ValueError) as exc:
        print(f"study lock: {exc}", file=sys.stderr)
        return 1
    print(f"{args.file}: locked in {lock}")
    return 0


def _check(args: argparse.Namespace) -> int:
    try:
        study = load_study(args.file)
    except (StudyError, ValueError) as exc:
        print(f"study check: {exc}", file=sys.stderr)
        return 1
    arms = sum(len(m.cells) for m in study.members)
    subjects = sum(len(m.cells) for m in study.subject_members)
    print(
        f"{study.path}: valid and locked ({study.lock_date}), sha256 {study.sha256}; "
        f"{len(study.members)} member designs, {arms} arms ({subjects} subject arms)"
    )
    sizes = [len(m.cells) for m in study.subject_members]
    if study.power is not None and len(sizes) >= 2:
        from grpo_probe.study.power import study_power  # scipy's ranks: imported when a power is asked

        spec = study.power
        power = study_power(
            sizes,
            rho=spec.rho,
            reliability=spec.reliability,
            simulations=spec.simulations,
            resamples=spec.resamples,
            confidence=study.confidence,
            seed=spec.seed,
        )
        print(
            f"power at the registered size ({' + '.join(map(str, sizes))} subject arms, every one engaging "
            f"and moved): a true rho of {spec.rho:g} at gain reliability {spec.reliability:g} is detected in "
            f"{power.power:.0%} [{power.ci_low:.0%}, {power.ci_high:.0%}] of {power.simulations} simulated "
            "studies"
        )
    return 0


def _verify(args: argparse.Namespace) -> int:
    from grpo_probe.study.jobs import verify_study  # the study's jobs and figures: imported when used

    try:
        result = verify_study(args.manifest, root=args.root)
    except (BrokenLinkError, StudyError, ValueError) as exc:
        print(f"study verify: broken link: {exc}", file=sys.stderr)
        return 1
    manifests = sum(len(c.manifests) for c in result.chains)
    print(
        f"study verify: ok: {result.artifacts} study artifacts and {len(result.chains)} member chains "
        f"({manifests} manifests) re-hashed; study {result.study_path}"
    )
    return 0


def register(subparsers: Any) -> None:
    """Add ``study lock``, ``study check`` and ``study verify`` to the ``grpo-probe`` command line."""
    study = subparsers.add_parser("study", help="a registered validation study: lock, check, verify")
    commands = study.add_subparsers(dest="study_command", required=True)
    lock = commands.add_parser("lock", help="validate a study file and its members, and lock it")
    lock.add_argument("file", help="the study file, e.g. prereg/studies/validation.yaml")
    lock.set_defaults(func=_lock)
    check = commands.add_parser("check", help="validate a study file against its lock")
    check.add_argument("file", help="the study file")
    check.set_defaults(func=_check)
    verify = commands.add_parser(
        "verify", help="re-hash a study page's artifacts and walk every member design's manifest chain"
    )
    verify.add_argument(
        "manifest", help="the study's manifest, results/studies/<name>/validation.manifest.json"
    )
    verify.add_argument("--root", default=None, help="the folder manifest paths are relative to (default: .)")
    verify.set_defaults(func=_verify)
