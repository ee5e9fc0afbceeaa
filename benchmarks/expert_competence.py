"""Scripted-expert competence over many seeds, with action noise off and on.

    .venv/bin/python benchmarks/expert_competence.py [--seeds 50] [--noise 0 0.05 0.1]

Prints, per noise level: success rate, contact rate, mean progress_final_cm, mean reset strikes,
knocked-off rate. The demonstrations for behaviour cloning come from this expert.
"""

from __future__ import annotations

import argparse

import numpy as np

from grpo_probe.envs.boat import BoatPushEnv, SimParams, run_episode
from grpo_probe.envs.boat.expert import ScriptedExpert


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.05, 0.1])
    args = parser.parse_args()
    params = SimParams()
    env = BoatPushEnv(params)
    print("| noise | seeds | success | contact | mean progress (cm) | mean strikes | knocked off |")
    print("|---|---|---|---|---|---|---|")
    for noise in args.noise:
        expert = ScriptedExpert(params, noise=noise)
        records = [
            run_episode(env, seed, lambda obs, k, seed=seed, expert=expert: expert.act(obs, (0, seed, k)))
            for seed in range(args.seeds)
        ]
        print(
            f"| {noise:g} | {args.seeds} | {np.mean([r.success for r in records]):.2f} "
            f"| {np.mean([r.contact for r in records]):.2f} "
            f"| {np.mean([r.progress_final_cm for r in records]):.2f} "
            f"| {np.mean([r.reset_strikes for r in records]):.2f} "
            f"| {np.mean([r.knocked_off for r in records]):.2f} |"
        )


if __name__ == "__main__":
    main()
