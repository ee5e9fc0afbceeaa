"""Physics steps per second: the env driven by a zero policy against a raw ``mj_step`` loop, in one run.

Both loops step the same compiled model from the same spawn; they alternate in rounds so a noisy,
shared machine slows both alike, and the ratio (env / raw) is the number to read. Target: >= 0.7.

    .venv/bin/python benchmarks/sim_throughput.py [--rounds 5] [--episodes 4]
"""

from __future__ import annotations

import argparse
import statistics
import time

import mujoco
import numpy as np

from grpo_probe.envs.boat import BoatPushEnv, SimParams


def env_steps_per_s(env: BoatPushEnv, episodes: int) -> float:
    zero = np.zeros((env.params.chunk_length, env.params.action_dims))
    steps = 0
    start = time.perf_counter()
    for seed in range(episodes):
        env.reset(seed)
        while not env.done:
            env.execute_chunk(zero)
        steps += env.record().n_ticks * env.params.physics_steps_per_tick
    return steps / (time.perf_counter() - start)


def raw_steps_per_s(env: BoatPushEnv, episodes: int) -> float:
    model, data = env.model, env.data
    n = env.params.episode_ticks * env.params.physics_steps_per_tick
    steps = 0
    start = time.perf_counter()
    for seed in range(episodes):
        env.reset(seed)
        lo, hi = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
        data.ctrl[:] = 0.5 * (lo + hi)  # exactly what the zero action maps to: same contacts, same work
        for _ in range(n):
            mujoco.mj_step(model, data)
        steps += n
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=4)
    args = parser.parse_args()
    env = BoatPushEnv(SimParams())
    env_rates, raw_rates = [], []
    for _ in range(args.rounds):
        env_rates.append(env_steps_per_s(env, args.episodes))
        raw_rates.append(raw_steps_per_s(env, args.episodes))
    ratios = [e / r for e, r in zip(env_rates, raw_rates, strict=True)]
    print(f"mujoco {mujoco.__version__}, {args.rounds} rounds x {args.episodes} episodes of 4500 steps")
    print(f"env (zero policy): median {statistics.median(env_rates):,.0f} physics steps/s")
    print(f"raw mj_step loop : median {statistics.median(raw_rates):,.0f} physics steps/s")
    print(
        f"ratio env/raw    : median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
