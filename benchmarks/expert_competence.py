"""Scripted-expert competence over many seeds, with action noise off and on.

    .venv/bin/python benchmarks/expert_competence.py [--seeds 50] [--noise 0 0.05 0.1]

Prints, per noise level: success rate, contact rate, mean progress_final_cm, mean reset strikes,
knocked-off rate. The demonstrations for behaviour cloning come from this expert. The episodes are run
by the package's expert measurement (grpo_probe.envs.expert_competence, as `grpo-probe expert DESIGN`
runs any design's expert), keyed (0, seed, replan) on the boat scene's registered defaults.
"""

from __future__ import annotations

import argparse

import numpy as np

from grpo_probe.envs.expert_competence import expert_episodes
from grpo_probe.envs.registry import boat_env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.05, 0.1])
    args = parser.parse_args()
    print("| noise | seeds | success | contact | mean progress (cm) | mean strikes | knocked off |")
    print("|---|---|---|---|---|---|---|")
    for noise in args.noise:
        rows = [e.row for e in expert_episodes(boat_env(), range(args.seeds), noise, run_key=0)]
        print(
            f"| {noise:g} | {args.seeds} | {np.mean([r['success'] for r in rows]):.2f} "
            f"| {np.mean([r['contact'] for r in rows]):.2f} "
            f"| {np.mean([r['progress_final_cm'] for r in rows]):.2f} "
            f"| {np.mean([r['reset_strikes'] for r in rows]):.2f} "
            f"| {np.mean([r['knocked_off'] for r in rows]):.2f} |"
        )


if __name__ == "__main__":
    main()
