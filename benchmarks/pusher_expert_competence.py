"""The scripted Pusher-v5 expert's competence over many seeds, with action noise off and on.

    .venv/bin/python benchmarks/pusher_expert_competence.py [--seeds 50] [--noise 0 0.03 0.1]

Runs the registered pusher episode (prereg/designs/probes/pusher_probe.yaml's env.params: 8 replans x 25
executed actions of 50) and prints, per noise level: success rate (object within 5 cm of the goal), contact
rate, mean progress_final_cm and best point, and each guard's trip rate. The pusher design's
behaviour-cloning demonstrations come from this expert (noise 0.03). The episodes are run by the package's
expert measurement (grpo_probe.envs.expert_competence, as `grpo-probe expert DESIGN` runs it), keyed
(0, seed, replan).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from grpo_probe.envs.expert_competence import expert_episodes
from grpo_probe.envs.registry import env_spec
from grpo_probe.prereg import load_prereg

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.03, 0.1])
    parser.add_argument("--prereg", default=str(REPO / "prereg/designs/probes/pusher_probe.yaml"))
    args = parser.parse_args()
    config = load_prereg(args.prereg).env
    spec = env_spec(config)
    guards = ", ".join(spec.guard_names)
    print(f"| noise | seeds | success | contact | mean progress (cm) | mean best point (cm) | {guards} |")
    print("|---|---|---|---|---|---|---|")
    analysis = load_prereg(args.prereg).analysis.to_dict()
    for noise in args.noise:
        rows = [e.row for e in expert_episodes(config, range(args.seeds), noise, run_key=0)]
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
