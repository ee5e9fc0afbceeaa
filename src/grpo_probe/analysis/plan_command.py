"""``grpo-probe plan``: how many seeds, draws and replays a design needs, from a pilot's measured levels."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def _sizes(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def register(subparsers: argparse._SubParsersAction) -> None:
    plan = subparsers.add_parser(
        "plan",
        help="size a design from a pilot probe: seeds, K and R for a stable arm and a low false-go rate",
        description="From a finished probe (or a small pilot) of the design, simulate its registered rule at "
        "other sizes with the measured choice and chaos levels of each cell, and print, per option, how "
        "often the pilot's arm is named, the false-go rate at the bar (every cell's true value at its "
        "threshold), and the rollouts' CPU cost (priced from the pilot's parallel-oracle benchmark). "
        "Recommends the cheapest option whose arm rate has its Wilson lower end at >= 95 %% with a false-go "
        "rate within the design's target. Exit 0 when one does, 1 when none does.",
    )
    plan.add_argument("--prereg", required=True, help="the registered design the pilot ran")
    plan.add_argument(
        "--results", default="results", help="results directory of the pilot (config `results:`)"
    )
    plan.add_argument("--seeds", type=_sizes, default=None, help="seed counts to try (default 5,10,15,20,30)")
    plan.add_argument(
        "--draws", type=_sizes, default=None, help="group sizes K to try (default: the design's)"
    )
    plan.add_argument(
        "--replays", type=_sizes, default=None, help="replays R of each draw to try (default 2,4,8)"
    )
    plan.add_argument(
        "--simulations", type=int, default=400, help="simulated runs per option and scenario (default 400)"
    )
    plan.add_argument("--json", default=None, metavar="PATH", help="also write the options as JSON")
    plan.set_defaults(func=run_plan)


def run_plan(args: argparse.Namespace) -> int:
    import dataclasses
    import json
    from pathlib import Path

    from grpo_probe.analysis.error_rates.plan import (
        DEFAULT_REPLAYS,
        DEFAULT_SEEDS,
        cpu_per_episode,
        plan_options,
        plan_text,
        recommended,
    )
    from grpo_probe.atomic_io import atomic_write_text
    from grpo_probe.prereg import load_prereg

    prereg = load_prereg(args.prereg)
    folder = Path(args.results) / prereg.name
    path = folder / "decision.json"
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no finished probe of {prereg.name} to plan from; run it first "
            f"(snakemake --cores 2 --config prereg={args.prereg})"
        )
    decision = json.loads(path.read_text())
    if args.simulations < 10:
        raise ValueError(f"--simulations: at least 10, got {args.simulations}")
    spec = dataclasses.replace(prereg.analysis.operating, simulations=args.simulations)
    options = plan_options(
        prereg,
        decision,
        seeds=args.seeds or DEFAULT_SEEDS,
        draws=args.draws,
        replays=args.replays or DEFAULT_REPLAYS,
        spec=spec,
        per_episode=cpu_per_episode(prereg, folder / "benchmarks"),
    )
    replay = prereg.replay
    current = None if replay is None else (len(prereg.seeds), prereg.group_size, replay.replays)
    print(plan_text(prereg, decision, options, spec, current), end="")
    if args.json:
        record = {
            "prereg": prereg.name,
            "pilot": str(path),
            "outcome": decision["outcome"]["kind"],
            "simulations": spec.simulations,
            "seed": spec.seed,
            "false_go_target": spec.false_go_target,
            "options": [o.to_dict(spec.false_go_target) for o in options],
        }
        atomic_write_text(args.json, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return 0 if recommended(options, spec.false_go_target) is not None else 1
