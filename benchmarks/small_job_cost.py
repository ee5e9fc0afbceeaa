"""What a small rollout job costs in process against on worker processes, per head, side by side.

Run by hand (not in CI timing asserts):

    .venv/bin/python benchmarks/small_job_cost.py [--seeds 2] [--draws 2] [--workers 2] [--repeats 3]

A small design's shard (the smoke design: 2 seeds x K = 2 on 3 replans x 10 executed actions) is one task
of lockstep envs. Before ``rollout.run_in_process`` a job with ``workers`` threads ran it on a fresh pool
of that many processes: each started Python, imported torch and MuJoCo and built the policy, and all but
one then had nothing to do. This benchmark runs the same job both ways in turn, ``--repeats`` times per
head, each time as a workflow job would: the in-process path builds its policy, the pool is started fresh
(``run_parallel``, spawned workers: this process reaps them, so its CPU count holds theirs; a
forkserver's workers are its own children, see pool_start_cost.py); this process has imported torch
already, as a job's own process has on both paths.
It checks that both write the same table bytes, and prints the wall time and the CPU
time of this process and its children for each path, their medians and the ratio in process / pool.
The load average is printed before and after, since a shared machine slows both sides alike.

Checkpoints of the reference architectures are trained for a few steps on synthetic demos (the compute
per call matches the reference heads; the behaviour does not).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.registry import boat_env
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.policies.synthetic_demos import synthetic_demos
from grpo_probe.policies.train import train_arm
from grpo_probe.rollout import GroupJob, PolicySource, group_table, run_in_process, run_parallel
from grpo_probe.rollout.table import table_bytes
from measure import cpu_s, load_average, print_medians

SMOKE_SIM = SimParams(replans=3, executed_actions=10)
"""The smoke design's episode: 3 replans x 10 executed actions of a 50-action chunk."""
MODES = {"ar": SamplingMode("temperature", temperature=1.0), "flow": SamplingMode("flow_ode")}
"""The smoke design's stochastic cell of each head."""


def _timed(run) -> tuple[float, float, bytes]:
    wall, cpu = time.perf_counter(), cpu_s()
    job, results = run()
    return time.perf_counter() - wall, cpu_s() - cpu, table_bytes(group_table(job, results))


def _spawned_pool(job: GroupJob, workers: int):
    return run_parallel(job, workers=workers, start_method="spawn")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--draws", type=int, default=2, help="K, draws per seed")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {load_average()}")
    with tempfile.TemporaryDirectory() as tmp:
        for head, mode in MODES.items():
            path = Path(tmp) / f"{head}.ckpt"
            torch.set_num_threads(1)
            train_arm(head, synthetic_demos(256), path, {"steps": 5, "warmup_steps": 1})
            job = GroupJob(
                arm=head, cell="bench", source=PolicySource(checkpoint=str(path)), mode=mode,
                seeds=tuple(range(args.seeds)), group_size=args.draws, run_key=0, env=boat_env(SMOKE_SIM),
            )  # fmt: skip
            rows: dict[str, list[tuple[float, float]]] = {"in process": [], "pool": []}
            for _ in range(args.repeats):
                w, c, here = _timed(lambda job=job: (job, run_in_process(job)))
                rows["in process"].append((w, c))
                w, c, pooled = _timed(lambda job=job: (job, _spawned_pool(job, args.workers)))
                rows["pool"].append((w, c))
                if here != pooled:
                    raise SystemExit(f"{head}: the two paths wrote different table bytes")
            episodes = args.seeds * args.draws
            print(f"\n{head} head, {episodes} episodes, pool of {args.workers} workers; same bytes: yes")
            medians = print_medians(rows)
            print(
                f"  in process / pool: wall {medians['in process'][0] / medians['pool'][0]:.2f}, "
                f"CPU {medians['in process'][1] / medians['pool'][1]:.2f}"
            )
    print(f"\nload average after: {load_average()}")


if __name__ == "__main__":
    main()
