"""``grpo-probe expert DESIGN`` and ``grpo-probe design new``: a design's expert measured, and a new design
made from another with the fields that measurement suggests.

Why here: both read a design (the prereg) and run its environment's expert (the environments), and
``design new`` locks what it writes as ``grpo-probe prereg lock`` does (its results folder read through
:mod:`grpo_probe.provenance.results_folder`); the provenance package sits above both and loads lazily, so
``grpo-probe --help`` imports neither. Everything is imported inside each command.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["register"]


def _measure(prereg: Any, args: argparse.Namespace) -> Any:
    """The expert of ``prereg``'s environment over the seeds, noise and keys its demonstrations use (or
    the command line's)."""
    from grpo_probe.envs.expert_competence import measure_expert

    seeds = prereg.training.demo_seeds if args.seeds is None else tuple(range(args.seeds))
    noise = prereg.training.demo_noise if args.noise is None else args.noise
    with _served(prereg):
        return measure_expert(prereg.env, seeds, noise, prereg.run_key, args.replans)


@contextlib.contextmanager
def _served(prereg: Any) -> Iterator[None]:
    """A served simulator that cannot be reached is an error naming its address and the design."""
    from grpo_probe.envs.served import ServedEnvError

    try:
        yield
    except ServedEnvError as exc:
        raise ValueError(f"{prereg.path}: {exc}") from None


def _print_report(report: Any, what: str) -> None:
    from grpo_probe.envs.expert_competence import report_lines

    seeds = report.seeds
    shown = f"{seeds[0]}..{seeds[-1]}" if seeds == tuple(range(seeds[0], seeds[0] + len(seeds))) else seeds
    print(
        f"the expert of {what}: {len(seeds)} seeds ({shown}), noise {report.noise:g}, run key "
        f"{report.run_key}, up to {report.horizon_replans} replans x {report.executed_actions} = "
        f"{report.horizon_ticks} ticks\n"
    )
    print("\n".join(report_lines(report)))


def _write_json(path: str | None, value: Any) -> None:
    if path is not None:
        from grpo_probe.atomic_io import atomic_write_json

        atomic_write_json(path, value)
        print(f"\nwrote {path}")


def _expert(args: argparse.Namespace) -> int:
    from grpo_probe.prereg.design import load_prereg

    prereg = load_prereg(args.design, require_lock=False)
    report = _measure(prereg, args)
    _print_report(report, f"{args.design} ({_env_name(prereg)})")
    _write_json(args.json, {"design": str(args.design), **report.to_dict()})
    return 0


def _env_name(prereg: Any) -> str:
    params = prereg.env.params
    task = params.get("gym_id") if isinstance(params, dict) else None
    return f"{prereg.env.id}, {task}" if task else prereg.env.id


def _new(args: argparse.Namespace) -> int:
    from grpo_probe.atomic_io import atomic_write_text
    from grpo_probe.prereg.canonical import read_yaml
    from grpo_probe.prereg.design import load_prereg, lock_prereg, prereg_from_mapping
    from grpo_probe.prereg.env_check import check_built_environment
    from grpo_probe.prereg.lock import lock_path
    from grpo_probe.prereg.names import check_one_folder_per_design
    from grpo_probe.prereg.new_design import design_text, episode_field, radius_field, set_field, start_from
    from grpo_probe.provenance.results_folder import results_hashes, results_root

    source = Path(args.source)
    target = Path(args.out) if args.out else source.parent / f"{args.name}.yaml"
    for path in (target, lock_path(target)):
        if path.exists():
            raise ValueError(f"{path} exists: a new design gets a file of its own (--out PATH)")
    design = start_from(read_yaml(source), str(source), args.name, args.task)
    prereg = prereg_from_mapping(design, target)
    with _served(prereg):
        check_built_environment(prereg)  # the new task serves what the design reads, before it is measured
    report = _measure(prereg, args)
    what = f"{args.name} ({_env_name(prereg)})"
    _print_report(report, what)
    changes = []
    suggested = report.suggested
    for path, value in (
        (episode_field(design, prereg.env), suggested.replans),
        (radius_field(design, prereg.env), suggested.radius_m),
    ):
        if path is not None:
            before = set_field(design, path, value)
            was = f" (was {before:g})" if before is not None else ""
            changes.append(f"{'.'.join(path)} {value:g}{was}")
    prereg_from_mapping(design, target)  # still valid with the measured fields
    results = results_root(args.results)
    header = _header(args, source, report, changes)
    atomic_write_text(target, design_text(design, header))
    check_one_folder_per_design(target, results)
    outcome = lock_prereg(target, results_hashes=results_hashes(results, args.name), keep_amendments=False)
    locked = load_prereg(target)
    print(f"\nwrote {target}: {'; '.join(changes) or 'no measured field to write'}")
    print(outcome.message)
    print(f"{locked.path}: valid and locked ({locked.lock_date}), sha256 {locked.sha256}")
    _write_json(args.json, {"design": str(target), "source": str(source), **report.to_dict()})
    return 0


def _header(args: argparse.Namespace, source: Path, report: Any, changes: list[str]) -> list[str]:
    """The new design's opening comment: how it was made, and what its expert did."""
    import textwrap

    task = f" --task {args.task}" if args.task else ""
    fit = report.suggested
    text = (
        "That design with its name"
        + (" and task" if args.task else "")
        + f" changed, no amendments, and what its expert's measurement suggests ({len(report.seeds)} seeds "
        f"at noise {report.noise:g}, up to {report.horizon_ticks} ticks): {'; '.join(changes) or 'nothing'}. "
        f"The expert there: success {fit.success:.2f}, mean progress {fit.mean_progress_cm:.2f} cm, "
        f"engagement {fit.engagement:.2f}."
    )
    lines = [f"Made by: grpo-probe design new --from {source}{task} {args.name}"]
    lines += textwrap.wrap(text, 104, break_on_hyphens=False)
    for note in report.notes:
        lines += textwrap.wrap(f"Note: {note}", 104, break_on_hyphens=False)
    return lines


def register(subparsers: Any) -> None:
    """Add ``expert`` and ``design new`` to the ``grpo-probe`` command line."""
    expert = subparsers.add_parser(
        "expert",
        help="measure a design's scripted expert over seeds: success, progress, the ticks it needs, and a "
        "suggested episode and success radius",
        description="Run the design's scripted expert on seeds (by default its demonstrations' seeds, noise "
        "and run key) for longer than its episode, and print what it achieves at the registered episode "
        "and success radius and at suggested ones: the ticks it needs to reach the goal and to stay there, "
        "its success, progress and engagement. A served simulator's server must be running.",
    )
    expert.add_argument("design", metavar="DESIGN", help="a design file, e.g. prereg/smoke.yaml")
    _measure_options(expert)
    expert.set_defaults(func=_expert)

    design = subparsers.add_parser("design", help="make a new design from another")
    commands = design.add_subparsers(dest="design_command", required=True)
    new = commands.add_parser(
        "new",
        help="write a new design from another, for another task, with its expert's measured fields, locked",
        description="Write NAME.yaml beside the --from design (or at --out): the same design with name NAME, "
        "task --task (env.params.gym_id, and that id in its description), no amendments, and the episode's "
        "replans and the success radius its expert's measurement suggests (see `grpo-probe expert`); then "
        "lock it as `grpo-probe prereg lock` does.",
    )
    new.add_argument("name", metavar="NAME", help="the new design's name (its results folder)")
    new.add_argument(
        "--from", dest="source", required=True, metavar="DESIGN", help="the design to start from"
    )
    new.add_argument("--task", default=None, help="the new design's env.params.gym_id, e.g. drawer-open-v3")
    new.add_argument("--out", default=None, metavar="PATH", help="where to write it (default: beside --from)")
    new.add_argument(
        "--results",
        default=None,
        help="results folder the lock reads (default: the `results:` setting of config/config.yaml, else "
        "results)",
    )
    _measure_options(new)
    new.set_defaults(func=_new)


def _measure_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seeds",
        type=_positive,
        default=None,
        metavar="N",
        help="run seeds 0..N-1 (default: the design's demonstration seeds)",
    )
    parser.add_argument(
        "--noise", type=float, default=None, help="the expert's action noise (default: its demonstrations')"
    )
    parser.add_argument(
        "--replans",
        type=_positive,
        default=None,
        help="how many replans to run the expert for (default: 4 times the design's)",
    )
    parser.add_argument(
        "--json", default=None, metavar="PATH", help="also write the measurement as JSON here"
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value
