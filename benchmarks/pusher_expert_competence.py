"""The scripted Pusher-v5 expert's competence over many seeds, with action noise off and on.

    .venv/bin/python benchmarks/pusher_expert_competence.py [--seeds 50] [--noise 0 0.03 0.1]

Runs the registered pusher episode (prereg/designs/probes/pusher_probe.yaml's env.params: 8 replans x 25
executed actions of 50) and prints, per noise level: success rate (object within 5 cm of the goal), contact
rate, mean progress_final_cm and best point, and each guard's trip rate. The pusher design's
behaviour-cloning demonstrations come from this expert (noise 0.03).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from grpo_probe.envs.registry import make_env, make_expert
from grpo_probe.prereg import load_prereg

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.03, 0.1])
    parser.add_argument("--prereg", default=str(REPO / "prereg/designs/probes/pusher_probe.yaml"))
    args = parser.parse_args()
    config = load_prereg(args.prereg).env
    env = make_env(config)
    spec = env.spec
    guards = ", ".join(spec.guard_names)
    print(f"| noise | seeds | success | contact | mean progress (cm) | mean best point (cm) | {guards} |")
    print("|---|---|---|---|---|---|---|")
    analysis = load_prereg(args.prereg).analysis.to_dict()
    for noise in args.noise:
        expert = make_expert(config, noise)
        rows = []
        for seed in range(args.seeds):
            obs = env.reset(seed)
            while not env.done:
                obs = env.execute(expert.act(obs, (0, seed, env.replan_index)), spec.executed_actions)
            rows.append(env.record().to_row())
        trips = [np.mean(g.trips(np.array([r[g.column] for r in rows]), analysis)) for g in spec.guards]
        print(
            f"| {noise:g} | {args.seeds} | {np.mean([r['success'] for r in rows]):.2f} "
            f"| {np.mean([r['contact'] for r in rows]):.2f} "
            f"| {np.mean([r['progress_final_cm'] for r in rows]):.2f} "
            f"| {np.mean([r['best_point_cm'] for r in rows]):.2f} "
            f"| {', '.join(f'{t:.2f}' for t in trips)} |"
        )


if __name__ == "__main__":
    main()
