"""Replay cost at the probe's K = 8: a shard's replays against its own draws, per head, on one warm pool.

Run by hand (not in CI timing asserts):

    .venv/bin/python benchmarks/replay_cost.py --seeds 2

For each head it runs, in this one process and on one warm pool of ``workers`` processes, one shard of
the workflow (``seeds_per_shard`` of config/config.yaml, 5 seeds x K = 8 episodes of the registered
length) of the head's probe cell, twice over:

- the probe shard: the draws themselves (``GroupJob(replay=None)``);
- the replays of the same seeds: every replay the design registers (``registered_replays`` of the
  ``replay:`` section of prereg/grpo_signal_probe.yaml: ``replays_per_draw`` x the perturbations, keyed
  action noise and the shifted spawn), each one run of the same job with ``replay=`` set, as
  ``write_replay_shard`` runs them.

The AR head runs its registered cell at temperature 1.0 (c1_ar_t1_0) in the row block the design gives
its arm (``arms.ar.row_block``, as many envs per worker task); the flow head runs the teacher's cell with
fresh ODE noise (c3_teacher_ode), K = 8 envs per task. Jobs are built as the workflow builds them
(registered run key, environment, observation and inputs), so a replay shard's tasks are the probe
shard's tasks.

It prints episodes/s of each run, where an episode's time goes (physics = env stepping, policy =
``policy.act`` shared evenly over the rows of its batch, overhead = the rest), and per head the replay /
probe wall time per episode (about 1.0: a replay is an episode, plus a few keyed draws), and the ratio
of the design's replay work to its probe work per cell, predicted from the measured per-episode walls:

    (len(replay.seeds) x K x R  +  len(replay.oracle_seeds) x K x P) / (len(seeds) x K)

episodes, R = replays_per_draw x P replays of each draw, P perturbations (the unperturbed replay oracle
replays each oracle draw once per perturbation, at size zero). The workflow runs replays per probe shard
that holds a replayed seed, so a shard with few replayed seeds fills its tasks less than a full one;
that granularity is not in the prediction (a line says which shards there are).

Before timing, each head replays the first seed's draws under every registered perturbation at size
zero (``Perturbation.zeroed()``) and asserts that their table bytes (``group_table`` /
``table_bytes``) equal the draws': the replay path is what is timed, and it adds nothing but the
perturbation. Pool start-up (spawning workers, importing torch and MuJoCo, loading every policy) is timed
separately. The machine's load average is printed before and after, since a shared machine slows both
sides of every ratio; ``--repeats N`` measures every run N times, the runs in turn, and reports medians.

Without ``--ar-checkpoint``/``--flow-checkpoint`` it builds checkpoints of the reference architectures
(``grpo_probe.policies.train`` defaults) trained for a few steps on synthetic demos: the compute per call
matches the reference heads, the behaviour does not (an untrained AR head emits a different number of
tokens than a trained one, which changes its cost per chunk). With a finished run, pass
results/grpo_signal_probe/arms/ar/policy.pt and results/grpo_signal_probe/arms/flow_teacher/policy.pt.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import yaml

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.registry import boat_env
from grpo_probe.prereg import Cell, Prereg, load_prereg
from grpo_probe.prereg.replay import Perturbation
from grpo_probe.rollout import GroupJob, PolicySource, Replay, RolloutPool, anchor_mode, group_table
from grpo_probe.rollout.engine import mean_timing
from grpo_probe.rollout.replay import registered_replays
from grpo_probe.rollout.results import EpisodeResult
from grpo_probe.rollout.table import table_bytes
from rollout_scaling import CONFIG, REGISTERED, _checkpoints, _load  # the same set-up, one place


def _config() -> dict[str, Any]:
    return yaml.safe_load(CONFIG.read_text())


def _cell(prereg: Prereg, head: str) -> Cell:
    """The head's probe cell: AR at temperature 1.0, flow with fresh ODE noise (the first registered)."""
    for cell in prereg.cells:
        if prereg.arms[cell.arm].head != head:
            continue
        if head == "ar" and cell.mode.kind == "temperature" and cell.mode.temperature == 1.0:
            return cell
        if head == "flow" and cell.mode.kind == "flow_ode":
            return cell
    raise SystemExit(f"{prereg.path}: no {head} cell to measure (AR at temperature 1.0, flow_ode for flow)")


def _job(prereg: Prereg, cell: Cell, path: Path, seeds: Sequence[int]) -> GroupJob:
    """The cell's group job on ``seeds`` (all K draws), built as the workflow's ``_group_job`` builds it."""
    arm = prereg.arms[cell.arm]
    return GroupJob(
        arm=cell.arm, cell=cell.id, source=PolicySource(checkpoint=str(path), row_block=arm.row_block),
        mode=cell.mode, seeds=tuple(seeds), group_size=prereg.group_size, run_key=prereg.run_key,
        env=prereg.env, observation=prereg.observation, inputs=arm.inputs, envs_per_worker=arm.row_block,
    )  # fmt: skip


def _warm_pool(workers: int, jobs: dict[str, GroupJob]) -> tuple[RolloutPool, float]:
    """A pool whose workers have spawned, imported everything and loaded every policy; its start-up time."""
    start = time.perf_counter()
    pool = RolloutPool(workers)
    for head, job in jobs.items():
        warm = GroupJob(
            "warm", "warm", job.source, anchor_mode(head), tuple(range(workers)), 1, 0,
            boat_env(SimParams(replans=1, executed_actions=1)),
        )  # fmt: skip
        pool.run(warm, envs_per_worker=1)
    return pool, time.perf_counter() - start


def _bytes(job: GroupJob, results: Sequence[EpisodeResult]) -> bytes:
    return table_bytes(group_table(job, results))


def _zero_check(pool: RolloutPool, job: GroupJob, replays: Sequence[Replay]) -> dict[int, bytes]:
    """The first seed's draws replayed at size zero under each registered perturbation: slot -> bytes."""
    first = job.replace(seeds=job.seeds[:1])
    out = {}
    for replay in replays:
        if replay.index != 1:
            continue
        zero = first.replace(replay=Replay(replay.index, replay.slot, replay.perturbation.zeroed()))
        out[replay.slot] = _bytes(zero, pool.run(zero))
    return out


def _check_zero(
    head: str,
    job: GroupJob,
    results: Sequence[EpisodeResult],
    zero: dict[int, bytes],
    perturbations: Sequence[Perturbation],
) -> None:
    """The first seed's draws of a probe run have the table bytes of every zero-size replay of them."""
    first = job.replace(seeds=job.seeds[:1])
    draws = _bytes(first, [r for r in results if r.spec.seed == first.seeds[0]])
    for slot, data in zero.items():
        if data != draws:
            raise AssertionError(
                f"{head}: a zero-size replay under perturbation {slot} ({perturbations[slot].kind}) gave "
                f"other table bytes than the draws of seed {first.seeds[0]}: the replay path is not the "
                "probe path"
            )


def _label(replay: Replay | None) -> str:
    return "probe" if replay is None else replay.label()


def _shards_line(prereg: Prereg, seeds_per_shard: int) -> str:
    """Which workflow shards hold replayed seeds, and how many each."""
    seeds = list(prereg.seeds)
    shards = [seeds[i : i + seeds_per_shard] for i in range(0, len(seeds), seeds_per_shard)]
    replayed = prereg.replay.seeds if prereg.replay is not None else ()
    held = [sum(s in replayed for s in shard) for shard in shards]
    parts = [f"{shard[0]}-{shard[-1]}: {n}" for shard, n in zip(shards, held, strict=True) if n]
    return (
        "replayed seeds per workflow shard (" + ", ".join(parts) + "): a shard with fewer replayed seeds "
        "fills fewer rows per task (padded AR blocks, idle workers), which the prediction leaves out"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seeds", type=int, default=None, help="seeds per head, episodes = seeds x 8 (default: one shard)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ar-checkpoint")
    parser.add_argument("--flow-checkpoint")
    parser.add_argument(
        "--repeats", type=int, default=1, help="measure each run N times, in turn; medians at the end"
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    prereg = load_prereg(REGISTERED)
    section = prereg.replay
    if section is None:
        parser.error(f"{REGISTERED}: the design registers no replay section")
    config = _config()
    if args.seeds is None:
        args.seeds = int(config["seeds_per_shard"])
    if not 1 <= args.seeds <= len(prereg.seeds):
        parser.error(f"--seeds must be 1..{len(prereg.seeds)} (the registered seeds)")
    K = prereg.group_size
    replays = registered_replays(section)
    R, P = len(replays), len(section.perturbations)
    seeds = prereg.seeds[: args.seeds]
    began = time.perf_counter()
    torch.set_num_threads(1)
    print(f"load average (1, 5, 15 min) at start: {_load()}")
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints = _checkpoints(args, Path(tmp))
        cells = {head: _cell(prereg, head) for head in checkpoints}
        jobs = {head: _job(prereg, cells[head], path, seeds) for head, path in checkpoints.items()}
        pool, startup = _warm_pool(args.workers, jobs)
        print(f"pool start-up incl. loading every policy: {args.workers} workers {startup:.1f} s (not below)")
        print(
            f"{args.seeds} seeds ({seeds[0]}-{seeds[-1]}) x K = {args.seeds * K} episodes per run; "
            f"{R} registered replays of each draw ({section.replays_per_draw} x {P} perturbations)"
        )
        for head, job in jobs.items():
            print(
                f"  {head}: cell {job.cell} (arm {job.arm}, {job.mode.kind}"
                + (f" T={job.mode.temperature:g}" if job.mode.temperature is not None else "")
                + f"), {job.envs_per_worker or 8} envs per worker task"
                + (f", row block {job.source.row_block}" if job.source.row_block else "")
            )
        # The zero-size sanity check first (it also creates the registered envs in the workers).
        zero = {head: _zero_check(pool, job, replays) for head, job in jobs.items()}
        runs = {head: [None, *replays] for head in jobs}
        walls: dict[tuple[str, Replay | None], list[float]] = {(h, r): [] for h in jobs for r in runs[h]}
        tables: dict[tuple[str, Replay | None], set[bytes]] = {(h, r): set() for h in jobs for r in runs[h]}
        print(
            f"{'head':5} {'run':34} {'episodes':>8} {'wall s':>7} {'eps/s':>6} "
            f"{'physics ms':>10} {'policy ms':>9} {'overhead ms':>11}  (per episode)"
        )
        # Repeats outermost, then heads, then runs: a noisy spell slows every run of a head alike.
        for _ in range(args.repeats):
            for head, job in jobs.items():
                for replay in runs[head]:
                    run = job.replace(replay=replay)
                    start = time.perf_counter()
                    results = pool.run(run)
                    wall = time.perf_counter() - start
                    tables[head, replay].add(_bytes(run, results))
                    walls[head, replay].append(wall)
                    if replay is None:
                        _check_zero(head, job, results, zero[head], section.perturbations)
                    timing = mean_timing(results)
                    n = len(results)
                    print(
                        f"{head:5} {_label(replay):34} {n:8d} {wall:7.1f} {n / wall:6.2f} "
                        f"{1e3 * timing.physics_s:10.1f} {1e3 * timing.policy_s:9.1f} "
                        f"{1e3 * timing.overhead_s:11.1f}"
                    )
        pool.close()
    episodes = args.seeds * K
    n_probe = len(prereg.seeds) * K
    n_replay = len(section.seeds) * K * R
    n_oracle = len(section.oracle_seeds) * K * P
    summary = []
    print(
        f"design per cell: {n_replay} replay + {n_oracle} replay-oracle episodes against {n_probe} probe "
        f"episodes = {(n_replay + n_oracle) / n_probe:.2f} by count"
    )
    print(_shards_line(prereg, int(config["seeds_per_shard"])))
    for head, job in jobs.items():
        per_ep = {r: statistics.median(w) / episodes for (h, r), w in walls.items() if h == head}
        probe_s = per_ep[None]
        replay_s = sum(per_ep[r] for r in replays) / R
        # per-repeat ratio of all replays' wall per episode to the probe's
        per_repeat = [
            sum(walls[head, r][i] for r in replays) / R / walls[head, None][i] for i in range(args.repeats)
        ]
        per_kind = ", ".join(f"{r.perturbation.kind} {per_ep[r] / probe_s:.2f}" for r in replays)
        spread = f" (range {min(per_repeat):.2f}-{max(per_repeat):.2f})" if args.repeats > 1 else ""
        print(
            f"{head:5} replay/probe wall per episode: {per_kind}; all replays {replay_s / probe_s:.2f}"
            f"{spread}, median of {args.repeats}"
        )
        # Each slot's replays and oracle episodes at that perturbation's measured wall per episode.
        slot_s = {slot: statistics.mean(per_ep[r] for r in replays if r.slot == slot) for slot in range(P)}
        replay_work = sum(len(section.seeds) * K * per_ep[r] for r in replays)
        oracle_work = sum(len(section.oracle_seeds) * K * slot_s[slot] for slot in range(P))
        predicted = (replay_work + oracle_work) / (n_probe * probe_s)
        same = all(len(tables[head, r]) == 1 for r in runs[head])
        differ = sum(tables[head, r] != tables[head, None] for r in replays)
        print(
            f"{head:5} {job.cell}: design replay / probe work {predicted:.2f} (predicted from the walls); "
            f"zero-size replays = draws' bytes: True (asserted, {len(zero[head])} perturbations); "
            f"same bytes every repeat: {same}; perturbed replay tables that differ from the draws': "
            f"{differ}/{R}"
        )
        summary.append((head, job.cell, replay_s, probe_s, predicted))
    print()
    print(
        f"{'head':5} {'cell':15} {'probe eps/s':>11} {'replay eps/s':>12} {'replay/probe per ep':>19} "
        f"{'design replay/probe':>19}  (count {(n_replay + n_oracle) / n_probe:.2f})"
    )
    for head, cell, replay_s, probe_s, predicted in summary:
        print(
            f"{head:5} {cell:15} {1 / probe_s:11.2f} {1 / replay_s:12.2f} {replay_s / probe_s:19.2f} "
            f"{predicted:19.2f}"
        )
    print(
        f"torch {torch.__version__}, 1 intra-op thread per process, {args.workers} workers; load average at "
        f"end: {_load()}; total {time.perf_counter() - began:.0f} s"
    )


if __name__ == "__main__":
    main()
