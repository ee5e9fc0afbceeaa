"""Rollout throughput at the probe's K = 8: sequential path against the parallel path, per head.

Run by hand (not in CI timing asserts):

    .venv/bin/python benchmarks/rollout_scaling.py --seeds 2 --workers 2

For each head it runs ``seeds x K`` episodes of the registered length (15 replans x 30 ticks) on the
sequential path (one env, batch 1, this process) and on a warm pool of ``workers`` processes (each
stepping K envs in lockstep, one batched policy call per replan), checks that both produce the same
table bytes, and prints episodes/s, the speedup, and where an episode's time goes (physics = env
stepping, policy = ``policy.act`` shared evenly over the rows of its batch, overhead = the rest), with
policy / physics side by side for every head and path. Pool start-up (spawning workers, importing torch
and MuJoCo, loading the policy) is timed separately. The machine's load average is printed before and
after, since a shared machine slows both sides of every ratio.

The AR head decodes in the row block the registered design gives its AR arm (``arms.ar.row_block`` of
prereg/grpo_signal_probe.yaml), with as many envs per worker task; ``--ar-row-block 16 20`` measures
several blocks side by side in the same run (each a row of its own, ``ar@16``, ``ar@20``). The flow heads
run K = 8 envs per task. By default each head runs one shard of the workflow (``seeds_per_shard`` of
config/config.yaml, 5 seeds, 40 episodes), so a block that does not divide a shard pays for its padded
rows here as it does in the workflow.

``--heads ar`` (or ``flow``) measures one head alone, for a change that touches only that head.

``--repeats N`` measures every path N times, the paths in turn, and ends each head with the median
policy / physics per path and its range: on a shared machine one run's ratio moves by a few hundredths.

Without ``--ar-checkpoint``/``--flow-checkpoint`` it builds checkpoints of the reference architectures
(``grpo_probe.policies.train`` defaults) trained for a few steps on synthetic demos: the compute per call
matches the reference heads, the behaviour does not (an untrained AR head emits a different number of
tokens than a trained one, which changes its cost per chunk).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from pathlib import Path

import torch
import yaml

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.registry import boat_env
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.policies.synthetic_demos import synthetic_demos
from grpo_probe.policies.train import train_arm
from grpo_probe.prereg import load_prereg
from grpo_probe.rollout import GroupJob, PolicySource, RolloutPool, anchor_mode, group_table, run_sequential
from grpo_probe.rollout.engine import mean_timing
from grpo_probe.rollout.table import table_bytes
from measure import load_average

K = 8
"""The probe's group size."""
ROOT = Path(__file__).resolve().parents[1]
REGISTERED = ROOT / "prereg/grpo_signal_probe.yaml"
CONFIG = ROOT / "config/config.yaml"


def _checkpoints(args: argparse.Namespace, root: Path) -> dict[str, Path]:
    paths = {}
    for head, given in (
        ("ar", args.ar_checkpoint),
        ("flow", args.flow_checkpoint),
    ):
        if head not in args.heads:
            continue
        if given is not None:
            paths[head] = Path(given)
            continue
        path = root / f"{head}.ckpt"
        torch.set_num_threads(1)
        train_arm(head, synthetic_demos(256), path, {"steps": 5, "warmup_steps": 1})
        paths[head] = path
    return paths


def _mode(head: str) -> SamplingMode:
    """The probe's stochastic mode of each head (cells 2 and 3 of the memo)."""
    if head == "ar":
        return SamplingMode("temperature", temperature=1.6)
    return SamplingMode("flow_ode")


def _warm_pool(workers: int, checkpoints: dict[str, Path], ar_blocks: list[int]) -> tuple[RolloutPool, float]:
    """A pool whose workers have spawned, imported everything and loaded every policy; its start-up time."""
    start = time.perf_counter()
    pool = RolloutPool(workers)
    for head, path in checkpoints.items():
        for block in ar_blocks if head == "ar" else [None]:
            warm = GroupJob(
                "warm", "warm", PolicySource(checkpoint=str(path), row_block=block), anchor_mode(head),
                tuple(range(workers)), 1, 0, boat_env(SimParams(replans=1, executed_actions=1)),
            )  # fmt: skip
            pool.run(warm, envs_per_worker=1)
    return pool, time.perf_counter() - start


def _job(head: str, path: Path, block: int | None, seeds: int) -> GroupJob:
    """``seeds`` x K episodes of the registered length in the head's probe mode, ``block`` envs per task."""
    return GroupJob(
        arm=head, cell="bench", source=PolicySource(checkpoint=str(path), row_block=block), mode=_mode(head),
        seeds=tuple(range(seeds)), group_size=K, run_key=0, env=boat_env(), envs_per_worker=block,
    )  # fmt: skip


def _seeds_per_shard() -> int:
    return int(yaml.safe_load(CONFIG.read_text())["seeds_per_shard"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seeds", type=int, default=None, help="seeds per head, episodes = seeds x 8 (default: one shard)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ar-checkpoint")
    parser.add_argument("--flow-checkpoint")
    parser.add_argument(
        "--ar-row-block", type=int, nargs="+", default=None,
        help="AR rows per block, one or more (default: the registered design's)",
    )  # fmt: skip
    parser.add_argument(
        "--heads", nargs="+", choices=("ar", "flow"), default=["ar", "flow"],
        help="which heads to measure (default both); one head alone halves the run",
    )  # fmt: skip
    parser.add_argument(
        "--repeats", type=int, default=1, help="measure each path N times, in turn; medians at the end"
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    ar_blocks = args.ar_row_block or [load_prereg(REGISTERED).arms["ar"].row_block or K]
    if args.seeds is None:
        args.seeds = _seeds_per_shard()
    torch.set_num_threads(1)
    print(f"load average (1, 5, 15 min) at start: {load_average()}")
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints = _checkpoints(args, Path(tmp))
        one, startup_one = _warm_pool(1, checkpoints, ar_blocks)
        many, startup_many = _warm_pool(args.workers, checkpoints, ar_blocks)
        print(f"pool start-up incl. loading every policy: 1 worker {startup_one:.1f} s, ", end="")
        print(f"{args.workers} workers {startup_many:.1f} s (not in the walls below)")
        blocks = ", ".join(str(b) for b in ar_blocks)
        print(f"{args.seeds} seeds x K = {args.seeds * K} episodes per head and path")
        print(f"AR row block {blocks} (as many envs per worker task); flow {K} envs per task")
        paths = {"sequential": None, "parallel-1": one, f"parallel-{args.workers}": many}
        print(
            f"{'head':6} {'path':11} {'episodes':>8} {'wall s':>8} {'eps/s':>7} "
            f"{'physics ms':>11} {'policy ms':>10} {'policy/physics':>15} {'overhead ms':>12}  (per episode)"
        )
        for head, path in checkpoints.items():
            blocks_of_head = ar_blocks if head == "ar" else [None]
            labels = {b: (f"ar@{b}" if len(blocks_of_head) > 1 else head) for b in blocks_of_head}
            jobs = {b: _job(head, path, b, args.seeds) for b in blocks_of_head}
            walls: dict[tuple[int | None, str], list[float]] = {(b, n): [] for b in jobs for n in paths}
            ratios: dict[tuple[int | None, str], list[float]] = {(b, n): [] for b in jobs for n in paths}
            tables: dict[int | None, set[bytes]] = {b: set() for b in jobs}
            # Repeats outermost, then blocks, then paths: a noisy spell slows every row alike.
            for _ in range(args.repeats):
                for block, job in jobs.items():
                    for name, pool in paths.items():
                        start = time.perf_counter()
                        results = run_sequential(job) if pool is None else pool.run(job, envs_per_worker=K)
                        wall = time.perf_counter() - start
                        tables[block].add(table_bytes(group_table(job, results)))
                        timing = mean_timing(results)
                        n = len(results)
                        ms = [1e3 * timing.physics_s, 1e3 * timing.policy_s, 1e3 * timing.overhead_s]
                        walls[block, name].append(wall)
                        ratios[block, name].append(ms[1] / ms[0])
                        print(
                            f"{labels[block]:6} {name:11} {n:8d} {wall:8.1f} {n / wall:7.2f} "
                            f"{ms[0]:11.1f} {ms[1]:10.1f} {ms[1] / ms[0]:15.2f} {ms[2]:12.1f}"
                        )
            par = f"parallel-{args.workers}"
            for block in jobs:
                label = labels[block]
                if args.repeats > 1:
                    medians = ", ".join(
                        f"{name} {statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})"
                        for (b, name), r in ratios.items()
                        if b == block
                    )
                    print(f"{label:6} policy/physics, median (range) over {args.repeats} repeats: {medians}")
                wall = {name: statistics.median(walls[block, name]) for name in paths}
                print(
                    f"{label:6} speedup sequential -> {par}: {wall['sequential'] / wall[par]:.2f}x "
                    f"(batching x processes); parallel-1 -> {par}: {wall['parallel-1'] / wall[par]:.2f}x "
                    f"(processes); same bytes on every path and repeat: {len(tables[block]) == 1}"
                    f"; table sha256 {hashlib.sha256(next(iter(tables[block]))).hexdigest()[:16]}"
                )
        one.close()
        many.close()
    print(f"torch {torch.__version__}, 1 intra-op thread per process; load average at end: {load_average()}")


if __name__ == "__main__":
    main()
