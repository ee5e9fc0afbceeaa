"""What a workflow job's pool of rollout workers costs, forked from a forkserver against spawned.

Run by hand (not in CI timing asserts), with nothing else running on the machine:

    .venv/bin/python benchmarks/pool_start_cost.py [--workers 2] [--repeats 3]

A job that starts a pool (the parallel oracle's two workers, a large shard's) is a fresh process: under
``spawn`` every worker starts Python and imports torch, MuJoCo and the package again; under
``forkserver`` (the default of ``rollout.RolloutPool``) one server process does those imports once and
each worker is forked from it. Each measurement here is such a fresh process: it imports the engine,
runs the smoke design's flow cell (2 seeds x K = 2, one task per seed) on a fresh pool of ``--workers``
and prints the sha256 of the table it wrote. The two start methods run in turn, ``--repeats`` times.

The forked workers are the server's children, not the job's, so the job's own ``getrusage`` never counts
them: the CPU here is the whole machine's (``/proc/stat``) over each process's life, which is why the
machine must be otherwise idle. Prints each method's median wall and CPU, their range, the ratio
forkserver / spawn, and whether the tables' bytes agree. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

from measure import fresh_processes_in_turn, load_average, machine_cpu_s, print_medians

METHODS = ("spawn", "forkserver")


def _one(method: str, checkpoint: str, workers: int) -> None:
    """The measured process: a job's imports, then one fresh pool."""
    from grpo_probe.envs.boat.params import SimParams
    from grpo_probe.envs.registry import boat_env
    from grpo_probe.policies.protocol import SamplingMode
    from grpo_probe.rollout import GroupJob, PolicySource, group_table, run_parallel
    from grpo_probe.rollout.table import table_bytes

    job = GroupJob(
        arm="flow", cell="bench", source=PolicySource(checkpoint=checkpoint), mode=SamplingMode("flow_ode"),
        seeds=(0, 1), group_size=2, run_key=0, env=boat_env(SimParams(replans=3, executed_actions=10)),
        envs_per_worker=2,
    )  # fmt: skip
    results = run_parallel(job, workers=workers, start_method=method)
    print(hashlib.sha256(table_bytes(group_table(job, results))).hexdigest())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(args.one, args.checkpoint, args.workers)
        return
    import torch

    from grpo_probe.policies.synthetic_demos import synthetic_demos
    from grpo_probe.policies.train import train_arm

    print(f"load average before: {load_average()}")
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = str(Path(tmp) / "flow.ckpt")
        torch.set_num_threads(1)
        train_arm("flow", synthetic_demos(256), checkpoint, {"steps": 5, "warmup_steps": 1})
        one = ["--checkpoint", checkpoint, "--workers", str(args.workers)]
        commands = {method: [sys.executable, __file__, "--one", method, *one] for method in METHODS}
        rows, outputs = fresh_processes_in_turn(commands, args.repeats, cpu=machine_cpu_s)
    digests = set().union(*outputs.values())
    print(f"\nflow head, 4 episodes, a fresh job process with a pool of {args.workers} workers")
    medians = print_medians(rows)
    ratio_wall = medians["forkserver"][0] / medians["spawn"][0]
    ratio_cpu = medians["forkserver"][1] / medians["spawn"][1]
    print(f"  forkserver / spawn: wall {ratio_wall:.2f}, CPU {ratio_cpu:.2f}")
    print(f"  same table bytes: {'yes' if len(digests) == 1 else 'NO'}")
    print(f"\nload average after: {load_average()}")


if __name__ == "__main__":
    main()
