"""``grpo-probe rollout``: the group runner by hand, for a researcher probing one group outside the workflow.

The engine, torch and the policies are imported by the handlers, not here: ``rollout``, ``check-policy``
and ``serve`` build this module's parsers before they run, and ``grpo-probe rollout --help`` should not
pay for torch.

The memo's instrument flags: ``--ar-temperature T`` (K draws at temperature T), ``--flow-draws K`` (K
fresh ODE noises per seed), ``--sde-a A`` (K draws of the SDE sampler). With none of them the command
writes the arm's anchor rows (AR greedy, flow draw 0 with keyed noise).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpo_probe.envs.boat.params import SimParams
    from grpo_probe.policies.protocol import SamplingMode

__all__ = ["parse_seeds", "register"]

DEFAULT_DRAWS = 8
"""The probe's K."""


def parse_seeds(text: str, flag: str = "--seeds") -> tuple[int, ...]:
    """``"0-14"``, ``"3"`` or ``"0-4,10,12-13"`` -> the seeds in the order written (ranges inclusive)."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"{flag}: expected seeds like '0-14' or '0,3,5-9', got {text!r}")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ValueError(f"{flag}: range {part!r} ends before it starts")
        seeds.extend(range(first, last + 1))
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{flag}: {text!r} lists a seed twice")
    return tuple(seeds)


def _positive_float(flag: str, value: float, allow_zero: bool = False) -> float:
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{flag} must be a finite number {bound}, got {value}")
    return value


def _sim_params(path: str | None) -> SimParams:
    import yaml

    from grpo_probe.envs.boat.params import SimParams

    if path is None:
        return SimParams()
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{file}: sim parameters file not found")
    values = yaml.safe_load(file.read_text())
    if not isinstance(values, dict):
        raise ValueError(f"{file}: expected a mapping of sim parameters, got {type(values).__name__}")
    return SimParams.from_dict(values.get("sim", values), where=str(file))


def _mode_and_draws(args: argparse.Namespace, head: str) -> tuple[SamplingMode, int, str]:
    """(mode, K, default cell) from the instrument flags; a flag that the head cannot run is an error."""
    from grpo_probe.policies.protocol import SamplingMode
    from grpo_probe.rollout.oracles import anchor_mode
    from grpo_probe.rollout.table import ANCHOR_CELL

    if args.ar_temperature is not None:
        if head == "flow":
            raise ValueError("--ar-temperature needs an AR policy; this checkpoint's head is 'flow'")
        t = _positive_float("--ar-temperature", args.ar_temperature)
        return SamplingMode("temperature", temperature=t), args.draws, "adhoc"
    if args.flow_draws is not None:
        if head == "ar":
            raise ValueError("--flow-draws needs a flow policy; this checkpoint's head is 'ar'")
        if args.flow_draws < 1:
            raise ValueError(f"--flow-draws must be >= 1, got {args.flow_draws}")
        return SamplingMode("flow_ode", steps=args.sampler_steps), args.flow_draws, "adhoc"
    if args.sde_a is not None:
        if head == "ar":
            raise ValueError("--sde-a needs a flow policy; this checkpoint's head is 'ar'")
        a = _positive_float("--sde-a", args.sde_a, allow_zero=True)
        return SamplingMode("flow_sde", sde_a=a, steps=args.sampler_steps), args.draws, "adhoc"
    return anchor_mode(head, steps=args.sampler_steps), 1, ANCHOR_CELL


def _design(path: str | None) -> Any:  # -> Prereg | None
    """The design whose run key (and, without ``--sim``, environment) the rows use: ``--prereg``, else
    the one config/config.yaml runs, else none (run key 0 on the default boat scene)."""
    from grpo_probe.prereg import load_prereg
    from grpo_probe.prereg.canonical import read_yaml
    from grpo_probe.prereg.run_config import WORKFLOW_CONFIG

    if path is None:
        config = WORKFLOW_CONFIG
        configured = read_yaml(config).get("prereg") if config.is_file() else None
        if not configured or not Path(configured).is_file():
            return None
        path = configured
    return load_prereg(path, require_lock=False)


def _run(args: argparse.Namespace) -> int:
    from grpo_probe.envs.registry import boat_env
    from grpo_probe.policies.policy_source import PolicySource
    from grpo_probe.rollout.job import DEFAULT_ENVS_PER_WORKER, GroupJob, RolloutWorkerError
    from grpo_probe.rollout.shards import write_shard

    seeds = parse_seeds(args.seeds)
    if args.draws < 1:
        raise ValueError(f"--draws must be >= 1, got {args.draws}")
    if args.workers < 0:
        raise ValueError(f"--workers must be >= 0 (0 = sequential in this process), got {args.workers}")
    design = _design(args.prereg)
    env = boat_env(_sim_params(args.sim)) if args.sim or design is None else design.env
    run_key = args.run_key if args.run_key is not None else (design.run_key if design else 0)
    source = PolicySource(checkpoint=args.checkpoint, factory=args.factory, device=args.device)
    policy = source.build()
    mode, draws, default_cell = _mode_and_draws(args, str(policy.head))
    job = GroupJob(
        arm=args.arm,
        cell=args.cell or default_cell,
        source=source,
        mode=mode,
        seeds=seeds,
        group_size=draws,
        run_key=run_key,
        env=env,
    )
    del policy  # built only to read its head; every path builds its own from the source
    envs_per_worker = DEFAULT_ENVS_PER_WORKER if args.envs_per_worker is None else args.envs_per_worker
    try:
        summary = write_shard(job, args.out, workers=args.workers, envs_per_worker=envs_per_worker)
    except RolloutWorkerError as exc:
        print(f"grpo-probe rollout: {exc}", file=sys.stderr)
        return 1
    print(
        f"{args.out}: {summary.rows} episodes ({job.cell}/{job.arm}, mode {mode.kind}, K={draws}, "
        f"run key {run_key}, env {env.id})",
        file=sys.stderr,
    )
    return 0


def register(subparsers: Any) -> None:
    """Add ``rollout`` to the ``grpo-probe`` command line."""
    p = subparsers.add_parser(
        "rollout",
        help="run K keyed rollouts per seed of one arm and write a rollout table",
        description="Run K keyed rollouts per seed of one arm (the memo's instrument flags) and write a "
        "rollout table. Without a sampling flag it writes the arm's anchor rows.",
    )
    p.add_argument("--arm", required=True, help="arm name written into the table's 'arm' column")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="policy checkpoint written by the training rule")
    source.add_argument("--factory", help="user adapter 'package.module:function' returning a Policy")
    p.add_argument("--seeds", required=True, help="seeds, e.g. '0-14' or '0,3,5-9' (ranges inclusive)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--ar-temperature", type=float, help="AR head: sample K draws at temperature T")
    mode.add_argument("--flow-draws", type=int, help="flow head: K draws, fresh keyed ODE noise per draw")
    mode.add_argument("--sde-a", type=float, help="flow head: K draws of the SDE sampler with noise scale a")
    p.add_argument("--draws", type=int, default=DEFAULT_DRAWS, help="K for --ar-temperature and --sde-a")
    p.add_argument("--sampler-steps", type=int, default=10, help="flow sampler steps (Heun ODE and SDE)")
    p.add_argument("--workers", type=int, default=0, help="worker processes; 0 runs sequentially here")
    p.add_argument(
        "--envs-per-worker",
        type=int,
        default=None,
        help="envs a worker steps in lockstep (default: the engine's DEFAULT_ENVS_PER_WORKER)",
    )
    p.add_argument("--device", default="cpu", help="torch device of the policy: cpu, cuda or cuda:N")
    p.add_argument(
        "--prereg",
        help="design whose run key and environment the rows use (default: config/config.yaml's `prereg:`)",
    )
    p.add_argument(
        "--run-key",
        type=int,
        default=None,
        help="run key of every row's random streams (default: the design's)",
    )
    p.add_argument("--cell", help="cell label (default: 'anchor' without a sampling flag, else 'adhoc')")
    p.add_argument(
        "--sim",
        help="YAML file of boat sim parameters (a mapping, or a prereg's 'sim:'), instead of the design's",
    )
    p.add_argument("--out", required=True, help="output rollout table (.parquet), written atomically")
    p.set_defaults(func=_run)
