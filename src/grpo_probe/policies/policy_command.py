"""``grpo-probe policy train|eval``, ``check-policy`` and ``serve``: the commands about one policy.

``policy train|eval`` trains a reference arm from demos and measures a checkpoint in the sim;
``check-policy`` checks the policy a run config binds to an arm against the act() contract
(:mod:`grpo_probe.policies.check`); ``serve`` serves a checkpoint to arms bound with ``source: server``.
torch, the checks and the design are imported by the handlers, not here: every ``grpo-probe`` command
builds the whole parser.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    policy = subparsers.add_parser("policy", help="the reference heads (AR and flow)")
    sub = policy.add_subparsers(dest="policy_command", required=True)
    train = sub.add_parser("train", help="train a head by behaviour cloning; prints the sha256")
    train.add_argument("--head", required=True, choices=("ar", "flow"), help="the head to train")
    train.add_argument("--demos", required=True, help="demos .npz written by the simulator")
    train.add_argument("--out", required=True, help="checkpoint path to write")
    train.add_argument("--config", default=None, help="JSON or YAML mapping of training-config overrides")
    train.set_defaults(func=run_train)
    evaluate = sub.add_parser("eval", help="run a checkpoint on seeds 0..n-1, print mean competence (JSON)")
    evaluate.add_argument("--checkpoint", required=True)
    evaluate.add_argument("--seeds", type=int, default=20, help="episodes (seeds 0..n-1)")
    evaluate.add_argument("--temperature", type=float, default=None, help="AR: sample at T instead of greedy")
    evaluate.add_argument("--sde-a", type=float, default=None, help="flow: SDE sampler with this a")
    evaluate.add_argument("--draw", type=int, default=0, help="draw index of the keyed randomness")
    evaluate.set_defaults(func=run_eval)
    check = subparsers.add_parser(
        "check-policy",
        help="check the policy bound to an arm against the act() contract, in seconds, before any rollout",
        description="Build the policy a run config binds to one arm of a design and check it against "
        "the act() contract (docs/your-policy.md): each check prints ok, FAIL or skip, and each failure "
        "its cause and fix. Exit 0 when every check passes, 1 when one fails.",
    )
    check.add_argument("--prereg", required=True, help="the design (its lock is not required)")
    check.add_argument("--arm", required=True, help="a registered arm id")
    check.add_argument(
        "--configfile",
        action="append",
        default=[],
        metavar="FILE",
        help="run config binding the arm (arms.<id>: {source: checkpoint, path, adapter}); repeatable, "
        "merged over config/config.yaml as Snakemake merges --configfile",
    )
    check.add_argument("--device", default=None, help="torch device of the policy (default: the config's)")
    check.set_defaults(func=_check_policy)
    serve = subparsers.add_parser(
        "serve",
        help="serve a checkpoint to arms bound with source: server (docs/serving.md)",
        description="Load a checkpoint (this package's format, or through an adapter) and serve it at "
        "ws://HOST:PORT with grpo_probe.serve, declaring the checkpoint's sha256, until interrupted. torch "
        "runs on one thread, as in the rollout workers, so served rows have the in-process bytes.",
    )
    serve.add_argument("--checkpoint", required=True, help="checkpoint file or save_pretrained folder")
    serve.add_argument("--adapter", default=None, help="'module:factory' (default: this package's format)")
    serve.add_argument("--device", default="cpu", help="torch device of the policy (cpu, cuda, cuda:N)")
    serve.add_argument("--row-block", type=int, default=None, help="the arm's registered AR row block")
    serve.add_argument("--address", default="ws://127.0.0.1:8765", help="ws://HOST:PORT (port 0: a free one)")
    serve.set_defaults(func=_serve)


def run_train(args: argparse.Namespace) -> int:
    import torch
    import yaml

    from grpo_probe.envs.demo_set import Demos
    from grpo_probe.policies.train import train_arm

    torch.set_num_threads(1)
    overrides = None
    if args.config:
        overrides = yaml.safe_load(Path(args.config).read_text())
        if not isinstance(overrides, dict):
            raise ValueError(f"{args.config}: must hold a mapping of training-config fields")
    sha = train_arm(
        args.head, Demos.load(args.demos), args.out, overrides, where=str(args.config or "defaults")
    )
    print(sha)
    return 0


def run_eval(args: argparse.Namespace) -> int:
    import dataclasses

    import torch

    from grpo_probe.policies import SamplingMode, load_policy
    from grpo_probe.policies.competence import default_mode, measure_competence

    torch.set_num_threads(1)
    policy = load_policy(args.checkpoint)
    mode = default_mode(policy)
    if args.temperature is not None:
        mode = SamplingMode("temperature", temperature=args.temperature)
    if args.sde_a is not None:
        mode = SamplingMode("flow_sde", sde_a=args.sde_a)
    result = measure_competence(policy, range(args.seeds), mode, draw=args.draw)
    json.dump({"checkpoint": args.checkpoint, "mode": mode.kind, **dataclasses.asdict(result)}, sys.stdout)
    sys.stdout.write("\n")
    return 0


def _check_policy(args: argparse.Namespace) -> int:
    """Print the arm's policy check; exit 0 when it keeps the act() contract, 1 when it breaks a rule."""
    from grpo_probe.policies.check import check_arm
    from grpo_probe.policies.policy_source import resolve_device
    from grpo_probe.prereg import load_prereg
    from grpo_probe.prereg.run_config import command_sources, load_config, merged_values

    prereg = load_prereg(args.prereg, require_lock=False)  # a missing design: the designs that exist
    for path in args.configfile:
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: config file not found")
    sources = command_sources(args.configfile, args.prereg)
    run_config = load_config(merged_values(sources), sources=sources)
    device = resolve_device(args.device or run_config.device)
    report = check_arm(prereg, run_config, args.arm, device=device)
    print(report.format())
    return 0 if report.passed else 1


def _serve(args: argparse.Namespace) -> int:
    """Serve the checkpoint until interrupted; the first line printed is the address it listens on."""
    import torch

    from grpo_probe.policies.policy_source import PolicySource
    from grpo_probe.policies.protocol import RowKey
    from grpo_probe.sampling import SamplingMode
    from grpo_probe.serve import parse_address, serve_policy

    parse_address(args.address)  # a wrong address fails before the checkpoint loads
    if not Path(args.checkpoint).exists():
        raise FileNotFoundError(f"{args.checkpoint}: checkpoint to serve not found")
    if args.adapter is not None and args.row_block is not None:
        raise ValueError("--row-block is the AR row block of this package's checkpoints, not an adapter's")
    torch.set_num_threads(1)
    source = PolicySource(
        checkpoint=args.checkpoint, factory=args.adapter, device=args.device, row_block=args.row_block
    )
    # the hello declares the checkpoint and its sha256, which the arm's binding records
    serve_policy(
        source.build(), args.address, checkpoint=args.checkpoint, row_key=RowKey, sampling_mode=SamplingMode
    )
    return 0
