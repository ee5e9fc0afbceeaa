"""What one row costs a served policy: wall seconds per ``act`` of one row, and the server's own CPU seconds.

Run by hand against a running server (not in CI):

    .venv/bin/python benchmarks/served_row_cost.py ws://127.0.0.1:8765 [--rows 6] [--steps 10]

Why: a served policy answers one row at a time, and every replan of every episode is a row, so a run's
wall time and its CPU (the server's counts against the design's compute gate, compute.md) follow from
the cost of a row. docs/lerobot.md quotes it for LeRobot's Diffusion Policy at its default size. The rows
are PushT's in LeRobot's keys unless ``--width KEY=N`` says otherwise (``observation.state`` takes the
hello's ``obs_dim``): uniform in 0 to 512 pixels, one key per row so that no two rows are the same call.
The first row is a warm-up and is not counted. It prints each row's seconds, their median, the server's CPU
seconds per row (its stats request, read before and after) and the load average.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from grpo_probe.envs.observation import OBSERVATION_STATE, ObservationBatch
from grpo_probe.policies.protocol import RowKey, SamplingMode
from grpo_probe.policies.served import ServedPolicy
from grpo_probe.serve.stats import fetch_server_stats
from measure import load_average

PUSHT_WIDTHS = {"observation.environment_state": 16}
"""Widths of the inputs other than ``observation.state`` (LeRobot's PushT: the T's 16 keypoint numbers)."""


def _widths(pairs: list[str]) -> dict[str, int]:
    widths = dict(PUSHT_WIDTHS)
    for pair in pairs:
        key, _, width = pair.partition("=")
        widths[key] = int(width)
    return widths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address", help="the server's ws://HOST:PORT")
    parser.add_argument("--rows", type=int, default=6, help="rows timed after the warm-up row")
    parser.add_argument("--steps", type=int, default=10, help="the flow_ode mode's steps (the design's)")
    parser.add_argument("--width", action="append", default=[], help="KEY=N: the width of input KEY")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    args = parser.parse_args()
    policy = ServedPolicy(args.address, timeout_s=args.timeout_s)
    widths = {**_widths(args.width), OBSERVATION_STATE: policy.obs_dim}
    rng = np.random.default_rng(0)
    mode = SamplingMode("flow_ode", steps=args.steps)

    def one_row(draw: int) -> float:
        if policy.input_keys is None:  # a policy of the packed state alone takes the bare array
            obs: object = rng.uniform(0, 512, (1, policy.obs_dim)).astype(np.float32)
        else:
            values = {k: rng.uniform(0, 512, (1, widths[k])).astype(np.float32) for k in policy.input_keys}
            obs = ObservationBatch(values, policy.head)
        start = time.perf_counter()
        policy.act(obs, [RowKey(13, 1000, 0, draw)], mode)
        return time.perf_counter() - start

    print(f"load average before: {load_average()}")
    one_row(0)  # warm-up: the first call pays for lazy set-up on the server
    before = fetch_server_stats(args.address)
    seconds = [one_row(draw) for draw in range(1, args.rows + 1)]
    after = fetch_server_stats(args.address)
    policy.close()
    print("s per row: " + ", ".join(f"{s:.2f}" for s in seconds))
    print(f"median {statistics.median(seconds):.2f} s, min {min(seconds):.2f}, max {max(seconds):.2f}")
    if before is not None and after is not None and after.same_process(before):
        print(f"server CPU: {(after.cpu_s - before.cpu_s) / args.rows:.2f} s per row")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
