"""The ``grpo-probe`` command line: one subcommand group per package area.

Each area module exposes ``register(subparsers)``; it adds its subcommands and sets ``func`` on each,
a callable taking the parsed namespace and returning an exit code. A command imports only the area
module that registers it: :data:`COMMANDS` names each command's module and its one-line help, so
``grpo-probe --help`` lists every command without importing any area (the analysis package, with its
pyarrow, matplotlib and jinja2, included), and one area's imports do not slow another's commands.
A test checks that the table's help lines are the ones each module registers.

This module and the ``commands`` modules are the top layer of the package: nothing else imports them
(the import-linter contracts in pyproject.toml say so), and a command module imports only its own area
and the layers below it. That is why ``prereg lock|check``, whose ``--manifest`` writes the provenance
chain's root and whose check simulates the rule at the registered sizes, is registered by
:mod:`grpo_probe.analysis.prereg_command`, above the prereg and provenance.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from grpo_probe import numerics

__all__ = ["main"]

COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("sim", "grpo_probe.envs.boat.demo_command", "the reference simulator"),
    ("prereg", "grpo_probe.analysis.prereg_command", "lock or check a pre-registered design"),
    (
        "verify",
        "grpo_probe.provenance.verify_command",
        "re-hash every artifact from a manifest back to the prereg",
    ),
    (
        "rollout",
        "grpo_probe.rollout.rollout_command",
        "run K keyed rollouts per seed of one arm and write a rollout table",
    ),
    (
        "decide",
        "grpo_probe.analysis.decide_command",
        "apply the registered decision rule to probe and anchor tables",
    ),
    (
        "plan",
        "grpo_probe.analysis.plan_command",
        "size a design from a pilot probe: seeds, K and R for a stable arm and a low false-go rate",
    ),
    ("policy", "grpo_probe.policies.policy_command", "the reference heads (AR and flow)"),
    (
        "check-policy",
        "grpo_probe.policies.policy_command",
        "check the policy bound to an arm against the act() contract, in seconds, before any rollout",
    ),
    (
        "serve",
        "grpo_probe.policies.policy_command",
        "serve a checkpoint to arms bound with source: server (docs/serving.md)",
    ),
    (
        "expert",
        "grpo_probe.provenance.design_command",
        "measure a design's scripted expert over seeds: success, progress, the ticks it needs, and a "
        "suggested episode and success radius",
    ),
    ("design", "grpo_probe.provenance.design_command", "make a new design from another"),
    (
        "estimate",
        "grpo_probe.compute.estimate_command",
        "estimate the run's CPU cost from the parallel oracle's benchmark, against the gate",
    ),
    (
        "audit",
        "grpo_probe.audit.audit_command",
        "rerun the job that produced PATH and compare every output with its manifest",
    ),
    (
        "study",
        "grpo_probe.study.study_command",
        "a registered validation study: lock, check, verify, explore; its pilot calibration",
    ),
)
"""Each command, in ``--help``'s order: (name, the module whose ``register`` adds it, its help line)."""

COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(module for _, module, _ in COMMANDS))
"""The area modules, in :data:`COMMANDS`' order."""


def build_parser(command: str | None = None, *, every_area: bool = True) -> argparse.ArgumentParser:
    """The ``grpo-probe`` parser.

    By default every area module registers its commands (the whole parser, as the tests read it). With
    ``every_area=False`` only the module of ``command`` does (none when ``command`` is None or no known
    command); every other command is listed by its name and help line from :data:`COMMANDS`, so
    parsing a command line imports the one area it runs.
    """
    # the docstring's first line, without its reStructuredText literal marks
    description = __doc__.splitlines()[0].replace("``", "")
    parser = argparse.ArgumentParser(prog="grpo-probe", description=description)
    subparsers = parser.add_subparsers(dest="command", required=True)
    wanted = next((module for name, module, _ in COMMANDS if name == command), None)
    for name, module, help_line in COMMANDS:
        if name in subparsers.choices:
            continue  # its module registered it with an earlier command
        if every_area or module == wanted:
            importlib.import_module(module).register(subparsers)
        else:
            subparsers.add_parser(name, help=help_line)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is not an option (the top level has none
    but ``-h``)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    words = sys.argv[1:] if argv is None else list(argv)
    # before a command imports numpy or torch, which read their dispatch variables once, when they load
    numerics.apply(os.environ)
    args = build_parser(_command(words), every_area=False).parse_args(words)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as exc:
        print(f"grpo-probe: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
