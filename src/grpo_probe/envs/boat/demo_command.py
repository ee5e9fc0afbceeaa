"""``grpo-probe sim demo``: one episode by hand, its record printed and its trajectory drawn."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    sim = subparsers.add_parser("sim", help="the reference simulator")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True)
    demo = sim_sub.add_parser("demo", help="run one episode, print its record, draw its trajectory")
    demo.add_argument("--seed", type=int, required=True, help="spawn seed")
    demo.add_argument(
        "--expert", action="store_true", help="drive with the scripted expert (default: hold still)"
    )
    demo.add_argument("--noise", type=float, default=0.0, help="expert action-noise std (normalized units)")
    demo.add_argument("--out", default=None, help="write the top-down trajectory PNG here")
    demo.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    import numpy as np

    from grpo_probe.envs.boat import BoatPushEnv, SimParams, run_episode
    from grpo_probe.envs.boat.expert import ScriptedExpert
    from grpo_probe.envs.boat.plot import plot_trajectories

    params = SimParams()
    env = BoatPushEnv(params)
    if args.expert:
        expert = ScriptedExpert(params, noise=args.noise)

        def act(obs: np.ndarray, replan: int) -> np.ndarray:
            return expert.act(obs, (0, args.seed, replan))
    else:
        if args.noise:
            raise ValueError("--noise applies to --expert only")
        hold: dict[str, np.ndarray] = {}

        def act(obs: np.ndarray, replan: int) -> np.ndarray:
            # Hold the pusher where it spawned: the "do nothing" baseline.
            from grpo_probe.envs.boat.expert import targets_to_actions

            if "chunk" not in hold:
                targets = np.zeros((params.chunk_length, 6))
                targets[:, :3] = obs[:3]
                hold["chunk"] = targets_to_actions(targets)
            return hold["chunk"]

    record = run_episode(env, args.seed, act)
    row = record.to_row()
    summary = {k: v for k, v in row.items() if not k.endswith("_trace_cm") and not k.endswith("_trace_m")}
    json.dump(summary, sys.stdout, indent=2)
    sys.stdout.write("\n")
    if args.out:
        who = f"expert, noise {args.noise}" if args.expert else "pusher held still"
        title = f"seed {args.seed} ({who}): progress {record.progress_final_cm:.1f} cm"
        plot_trajectories([row], args.out, params.disk_radius_m, title=title)
        print(f"trajectory: {args.out}", file=sys.stderr)
    return 0
