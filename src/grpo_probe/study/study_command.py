"""``grpo-probe study lock|check|verify``: register a validation study, and audit its page; ``grpo-probe study
explore``: an exploratory re-analysis of its tables; ``grpo-probe study calibrate lock|check|run``: the pilot
calibration run before any study.

Each command imports what it runs when it runs: the study's design reads the analysis stack (pyarrow),
which ``grpo-probe study --help`` (it builds this module's parsers) need not load.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["register"]

T = TypeVar("T")

_ANSWER_SIMULATED = {
    "pooled": "pooled (the power simulates the pooled rho's registered interval lying above zero)",
    "within_designs": "within designs (the power simulates the within-design permutation test of the mean "
    "rho inside designs, detected when its one-sided p < 1 - confidence)",
}
"""What ``study check`` says it simulates, per registered ``answer``."""


def _attempt(command: str, action: Callable[[], T]) -> T | None:
    """``action()``; or, when it refuses the file (a study or value error), None after printing
    ``<command>: <why>`` to stderr. Every study command reads its file this way and exits 1 on None."""
    from grpo_probe.study.design import StudyError

    try:
        return action()
    except (StudyError, ValueError) as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return None


def _locked(command: str, lock: Callable[[str], Path], file: str) -> int:
    """Lock ``file`` with ``lock`` (a study's or a calibration's) and say where the lock went."""
    written = _attempt(command, lambda: lock(file))
    if written is None:
        return 1
    print(f"{file}: locked in {written}")
    return 0


def _lock(args: argparse.Namespace) -> int:
    from grpo_probe.study.design import lock_study

    return _locked("study lock", lock_study, args.file)


def _check(args: argparse.Namespace) -> int:
    from grpo_probe.study.design import load_study

    study = _attempt("study check", lambda: load_study(args.file))
    if study is None:
        return 1
    arms = sum(len(m.cells) for m in study.members)
    subjects = sum(len(m.cells) for m in study.subject_members)
    print(
        f"{study.path}: valid and locked ({study.lock_date}), sha256 {study.sha256}; "
        f"{len(study.members)} member designs, {arms} arms ({subjects} subject arms)"
    )
    sizes = [len(m.cells) for m in study.subject_members]
    power = None
    if study.power is not None:
        from grpo_probe.study.power import registered_power  # scipy's ranks: imported when a power is asked

        power = registered_power(study, sizes)
    if study.power is not None:
        print(f"answer: {_ANSWER_SIMULATED[study.answer]}")
    if power is not None:
        print(
            f"power at the registered size ({' + '.join(map(str, sizes))} subject arms, every one engaging "
            f"and moved): a true rho of {power.rho:g} at gain reliability {power.reliability:g} is detected "
            f"in {power.power:.0%} [{power.ci_low:.0%}, {power.ci_high:.0%}] of {power.simulations} "
            "simulated studies"
            + (
                f" (each tested with {power.permutations} within-design permutations)"
                if power.permutations is not None
                else ""
            )
        )
    elif study.power is not None:
        print(
            "power: not simulated at the registered size: "
            + (
                "no subject design has three arms, so none orders arms of its own"
                if study.answer == "within_designs"
                else "fewer than two subject designs, so the nested interval has no designs to resample"
            )
        )
    if study.power is not None and study.replicates > 1:
        from grpo_probe.study.reliability import replicate_note

        print(f"replicates: {replicate_note(study.replicates, study.power.reliability)}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from grpo_probe.provenance.chain import BrokenLinkError
    from grpo_probe.study.design import StudyError
    from grpo_probe.study.jobs import verify_study  # the study's jobs and figures

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


def _explore(args: argparse.Namespace) -> int:
    from grpo_probe.study.design import load_study
    from grpo_probe.study.explore import build_explore  # the reads' tables and the statistics

    def run() -> Path:
        return build_explore(load_study(args.file), args.results)

    try:
        page = _attempt("study explore", run)
    except FileNotFoundError as exc:  # a member's record or table: the message names the file
        print(f"study explore: {exc}", file=sys.stderr)
        return 1
    if page is None:
        return 1
    print(f"study explore: {page} (exploratory, not a registered answer)")
    return 0


def _calibrate_lock(args: argparse.Namespace) -> int:
    from grpo_probe.study.calibration import lock_calibration

    return _locked("study calibrate lock", lock_calibration, args.file)


def _calibrate_check(args: argparse.Namespace) -> int:
    from grpo_probe.study.calibration import load_calibration

    calibration = _attempt("study calibrate check", lambda: load_calibration(args.file))
    if calibration is None:
        return 1
    episodes = calibration.iterations * calibration.seeds_per_iteration * calibration.rollouts_per_seed
    print(
        f"{calibration.path}: valid and locked ({calibration.lock_date}), sha256 {calibration.sha256}; "
        f"{len(calibration.candidates)} candidates of {episodes} training episodes each:"
    )
    for candidate_id in calibration.ids:
        print(f"  {candidate_id}")
    return 0


def _calibrate_run(args: argparse.Namespace) -> int:
    """Every candidate (or the one named) in turn, then the page; the arms' checkpoints must exist."""
    from tqdm import tqdm

    from grpo_probe.study.calibration import load_calibration
    from grpo_probe.study.calibration_report import build_calibration_report, read_records
    from grpo_probe.study.calibration_run import run_candidate
    from grpo_probe.study.design import StudyError

    try:
        calibration = load_calibration(args.file)
        folder = calibration.folder(args.results)
        chosen = [calibration.candidate(args.candidate)] if args.candidate else list(calibration.candidates)
        for candidate in tqdm(chosen, desc="calibration", unit="candidate", file=sys.stderr, ascii=True):
            checkpoint = Path(args.results) / candidate.design.name / "arms" / candidate.arm / "policy.pt"
            if not checkpoint.exists():
                raise StudyError(
                    f"{checkpoint}: no checkpoint of {candidate.arm!r}; train it first "
                    f"(`snakemake --cores 2 --config calibration={args.file}` trains every arm it needs)"
                )
            run_candidate(
                calibration,
                candidate,
                checkpoint,
                folder / "work" / candidate.id,
                folder / "candidates" / f"{candidate.id}.json",
            )
        if args.candidate:
            return 0
        records = read_records([folder / "candidates" / f"{c}.json" for c in calibration.ids])
        build_calibration_report(
            calibration,
            records,
            folder / "calibration.md",
            folder / "calibration.json",
            folder / "calibration_iterations.parquet",
            folder / "calibration_candidates.parquet",
            folder / "learning_curves.png",
        )
    except (StudyError, KeyError, ValueError) as exc:
        print(f"study calibrate run: {exc}", file=sys.stderr)
        return 1
    print(f"study calibrate run: {folder / 'calibration.md'}")
    return 0


def register(subparsers: Any) -> None:
    """Add ``study lock``, ``study check``, ``study verify``, ``study explore`` and ``study calibrate`` to
    the ``grpo-probe`` command line."""
    study = subparsers.add_parser(
        "study", help="a registered validation study: lock, check, verify, explore; its pilot calibration"
    )
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
    explore = commands.add_parser(
        "explore",
        help="an exploratory re-analysis of a run study: every candidate read's rank correlation with the "
        "gain within designs, pooled, and beyond competence",
    )
    explore.add_argument("file", help="the study file, e.g. prereg/studies/calibrated_validation.yaml")
    explore.add_argument(
        "--results", default="results", help="the folder the members' results are in (default: results)"
    )
    explore.set_defaults(func=_explore)
    calibrate = commands.add_parser(
        "calibrate", help="a registered pilot calibration, run before any study: lock, check, run"
    )
    steps = calibrate.add_subparsers(dest="calibrate_command", required=True)
    c_lock = steps.add_parser(
        "lock", help="validate a calibration file and its candidate designs, and lock it"
    )
    c_lock.add_argument("file", help="the calibration file, e.g. prereg/calibrations/pilot_recipe.yaml")
    c_lock.set_defaults(func=_calibrate_lock)
    c_check = steps.add_parser(
        "check", help="validate a calibration file against its lock; list its candidates"
    )
    c_check.add_argument("file", help="the calibration file")
    c_check.set_defaults(func=_calibrate_check)
    c_run = steps.add_parser(
        "run", help="train and score every candidate (or one), then write calibration.md and its records"
    )
    c_run.add_argument("file", help="the calibration file")
    c_run.add_argument(
        "--results", default="results", help="where the arms' checkpoints are and the page goes"
    )
    c_run.add_argument("--candidate", default=None, help="run this candidate only (its record, no page)")
    c_run.set_defaults(func=_calibrate_run)
