"""``grpo-probe prereg lock|check``: a design locked, and checked against its lock before a run.

Why here, in the analysis package: ``prereg check`` also says, before any CPU is spent, whether the
registered sizes can hold the design's false-go target at all (:mod:`grpo_probe.analysis.error_rates.
size_check`, which simulates the registered rule), and ``--manifest`` writes the provenance chain's root.
The analysis package sits above both the prereg and provenance, so every import here looks down.

The prereg, provenance and analysis modules are imported inside each command, not at the top: importing
them loads the environment registry, pyarrow and numpy, which ``grpo-probe prereg --help`` (and every
other command's ``--help``, which builds this module's parser first) would otherwise pay for.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpo_probe.prereg.design import Prereg

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``prereg lock`` and ``prereg check`` to the ``grpo-probe`` command line."""
    _register_prereg(subparsers)


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
        "exit 2 naming the file, the field or the lock on any mismatch. Warns (exit 0) when the registered "
        "sizes cannot hold the design's false-go target at any levels, and of a cell whose description "
        "names another sampler than its mode, or the probe's own sampler for an arm the run config serves "
        "or binds through an adapter.",
    )
    check.add_argument("file", metavar="FILE", help="prereg YAML, e.g. prereg/grpo_signal_probe.yaml")
    check.add_argument("--manifest", default=None, help="also write the chain's root manifest here")
    check.add_argument(
        "--configfile",
        action="append",
        default=[],
        metavar="FILE",
        help="run config binding the design's arms (e.g. lab.yaml binding an arm to a server), merged over "
        "config/config.yaml as Snakemake merges --configfile; a cell description that names another "
        "sampler than the one its arm's draws come from is warned of (repeatable)",
    )
    check.set_defaults(func=_check)


def _lock(args: argparse.Namespace) -> int:
    """Lock FILE; an amendment saying ``after_results: false`` is checked against the results folder."""
    from grpo_probe.prereg.canonical import read_yaml
    from grpo_probe.prereg.design import lock_prereg
    from grpo_probe.prereg.names import check_one_folder_per_design
    from grpo_probe.provenance.results_folder import results_hashes, results_root

    results = results_root(args.results)
    check_one_folder_per_design(args.file, results)
    name = read_yaml(args.file)["name"]
    hashes = results_hashes(results, name)
    outcome = lock_prereg(
        args.file,
        earlier_locks=args.earlier_lock,
        results_hashes=hashes,
        keep_amendments=args.keep_amendments,
    )
    print(outcome.message)
    return 0


def _check(args: argparse.Namespace) -> int:
    from grpo_probe.analysis.error_rates.size_check import size_check
    from grpo_probe.envs.served import ServedEnvError
    from grpo_probe.prereg.design import load_prereg
    from grpo_probe.prereg.env_check import check_built_environment
    from grpo_probe.prereg.lock import lock_path
    from grpo_probe.provenance.manifest import write_manifest

    for path in args.configfile:  # before the design's environment is built
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: config file not found")
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
    sizes = size_check(prereg)
    if sizes is not None and sizes.cannot_hold:
        print(sizes.warning(str(prereg.path)), file=sys.stderr)
    for line in _description_warnings(prereg, args.configfile):
        print(line, file=sys.stderr)
    return 0


def _description_warnings(prereg: Prereg, configfiles: list[str]) -> list[str]:
    """Each cell description that names another sampler than the one its arm's draws come from, the arm
    bound as the run config binds it (config/config.yaml where there is one, then each ``--configfile``,
    as Snakemake merges them): a description copied from a design whose arm the probe sampled itself."""
    from grpo_probe.prereg.cell_descriptions import description_warnings
    from grpo_probe.prereg.run_config import (
        WORKFLOW_CONFIG,
        binding_origins,
        command_sources,
        load_config,
        merged_values,
    )

    if not WORKFLOW_CONFIG.is_file() and not configfiles:
        return description_warnings(prereg, {})
    sources = command_sources(configfiles, str(prereg.path))
    arms = load_config(merged_values(sources), sources=sources).arms
    bindings = {arm: binding for arm, binding in arms.items() if arm in prereg.arms}
    return description_warnings(prereg, bindings, binding_origins(sources))
