"""``grpo-probe policy train|eval``: train a reference arm from demos; measure a checkpoint in the sim."""

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
