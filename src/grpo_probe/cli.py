"""The ``grpo-probe`` command line: one subcommand group per package area.

Each area module exposes ``register(subparsers)``; it adds its subcommands and sets ``func`` on each,
a callable taking the parsed namespace and returning an exit code. Areas are imported lazily by
name so ``grpo-probe --help`` stays fast and one area's heavy imports do not slow another's.

This module and the ``commands`` modules are the top layer of the package: nothing else imports them
(the import-linter contracts in pyproject.toml say so), and a command module imports only its own area
and the layers below it. That is why ``prereg lock|check``, whose ``--manifest`` writes the provenance
chain's root, is registered by :mod:`grpo_probe.provenance.lock_verify_command`, above the prereg.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]

COMMAND_MODULES: tuple[str, ...] = (
    "grpo_probe.envs.boat.demo_command",
    "grpo_probe.provenance.lock_verify_command",
    "grpo_probe.rollout.rollout_command",
    "grpo_probe.analysis.decide_command",
    "grpo_probe.analysis.plan_command",
    "grpo_probe.policies.policy_command",
    "grpo_probe.compute.estimate_command",
    "grpo_probe.audit.audit_command",
    "grpo_probe.study.study_command",
)


def build_parser() -> argparse.ArgumentParser:
    """The full ``grpo-probe`` parser, one subcommand group per module of ``COMMAND_MODULES``."""
    # the docstring's first line, without its reStructuredText literal marks
    description = __doc__.splitlines()[0].replace("``", "")
    parser = argparse.ArgumentParser(prog="grpo-probe", description=description)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as exc:
        print(f"grpo-probe: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
