"""The cost of serving a simulator: per-tick time of Pusher-v5 served against the same env in process.

Run by hand (about 20 s on 2 cores; not in CI):

    .venv/bin/python benchmarks/served_env_overhead.py [--episodes 6] [--executed 25] [--camera 64]

One process runs both bindings, interleaved episode by episode so that load on the machine hits them
alike: Gymnasium's Pusher-v5 under the probe's adapter with a scene function in process, and the same
env and scene behind ``python -m grpo_probe.serve env`` in a second process of the same interpreter
(over the loopback WebSocket; one request per chunk of ``--executed`` ticks). It prints the median
per-tick time of each and their ratio, and checks that the two bindings' records are the same bytes.
With ``--camera N`` a camera-fed policy is mimicked: the ``default`` camera's N x N frame is drawn at the
spawn and after every chunk (in process by the adapter; served by the server, sent with each reply), and
the frames must be the same bytes too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from envs.served_scenes import PusherScene  # noqa: E402
from grpo_probe.envs.gym_adapter import GymnasiumAdapter, GymnasiumParams  # noqa: E402
from grpo_probe.envs.served import served_env, served_env_config  # noqa: E402
from serve_processes import env_server_process  # noqa: E402


def episode(env, seed: int, executed: int, camera: int | None = None) -> tuple[float, int, bytes]:
    """Seconds per tick of one episode of random chunks, its ticks and its record's bytes (then, with
    ``camera``, the bytes of the frame drawn at every replan)."""
    rng = np.random.default_rng(seed)
    frames = []
    start = time.perf_counter()
    env.reset(seed)
    while True:
        if camera is not None:
            frames.append(env.render("default", camera, camera).tobytes())
        if env.done:
            break
        env.execute(
            rng.uniform(-1, 1, (env.spec.chunk_length, env.spec.action_dims)).astype(np.float32), executed
        )
    elapsed = time.perf_counter() - start
    record = env.record()
    return elapsed / record.n_ticks, record.n_ticks, record.canonical_bytes() + b"".join(frames)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--executed", type=int, default=25, help="ticks per chunk (one request served)")
    parser.add_argument("--camera", type=int, default=None, help="draw the default camera, N x N, per replan")
    args = parser.parse_args()
    params = {
        "gym_id": "Pusher-v5",
        "replans": 4,
        "chunk_length": args.executed,
        "executed_actions": args.executed,
        "success_radius_m": 0.05,
    }
    local = GymnasiumAdapter(GymnasiumParams.from_dict({**params, "scene": "envs.served_scenes:PusherScene"}))
    assert PusherScene is not None
    log = Path("/tmp") / "served_env_overhead.log"
    with env_server_process(
        sys.executable,
        "grpo_probe.serve.env_server:gymnasium_make",
        log,
        scene="envs.served_scenes:PusherScene",
        extra_path=[REPO / "tests"],
    ) as (address, _):
        served = served_env(
            **served_env_config({"source": "server", "address": address, "params": params}, "env")
        )
        episode(local, 0, args.executed, args.camera), episode(served, 0, args.executed, args.camera)  # warm
        times: dict[str, list[float]] = {"in process": [], "served": []}
        for seed in range(1, args.episodes + 1):
            t_local, ticks, a = episode(local, seed, args.executed, args.camera)
            t_served, _, b = episode(served, seed, args.executed, args.camera)
            if a != b:
                print(
                    f"seed {seed}: the served record (or frame) differs from the in-process one",
                    file=sys.stderr,
                )
                return 1
            times["in process"].append(t_local)
            times["served"].append(t_served)
    medians = {k: statistics.median(v) for k, v in times.items()}
    for name, value in medians.items():
        print(
            f"{name:>10}: {1e6 * value:8.1f} us per tick "
            f"(median of {args.episodes} episodes of {ticks} ticks)"
        )
    print(
        f"     ratio: {medians['served'] / medians['in process']:.2f} "
        f"(served / in process), records{' and frames' if args.camera else ''} identical"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
