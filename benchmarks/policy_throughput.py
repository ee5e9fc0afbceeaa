"""Chunks per second of each head at batch 1 and 8 on CPU (one thread), and AR tokens per chunk.

Run by hand: ``.venv/bin/python benchmarks/policy_throughput.py [--ar CKPT --flow CKPT]``. Without
checkpoints it trains tiny-but-default-shaped heads on synthetic demos (a few seconds), so the numbers
measure the default architectures, not their competence. Batches are padded to the fixed row block
of 8 inside each head, so batch 1 costs about as much as batch 8.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from grpo_probe.policies import Policy, RowKey, SamplingMode, load_policy
from grpo_probe.policies.synthetic_demos import synthetic_demos
from grpo_probe.policies.train import ARTrainConfig, FlowTrainConfig, train_ar, train_flow


def chunks_per_second(
    policy: Policy, obs: np.ndarray, mode: SamplingMode, batch: int, repeats: int
) -> tuple[float, float]:
    """(chunks/s, mean AR tokens per chunk or nan) over ``repeats`` calls with fresh draws."""
    policy.act(obs[:batch], [RowKey(0, seed, 0, repeats) for seed in range(batch)], mode)  # warm-up
    tokens: list[int] = []
    start = time.perf_counter()
    for r in range(repeats):
        keys = [RowKey(0, seed, 0, r) for seed in range(batch)]
        out = policy.act(obs[:batch], keys, mode)
        tokens += [len(d.token_ids) for d in out.diagnostics if d.token_ids is not None]
    elapsed = time.perf_counter() - start
    return batch * repeats / elapsed, float(np.mean(tokens)) if tokens else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ar", type=Path, default=None, help="AR checkpoint (default: train a stand-in)")
    parser.add_argument("--flow", type=Path, default=None, help="flow checkpoint (default: train a stand-in)")
    parser.add_argument("--demos", type=Path, default=None, help="demos .npz for observations")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.demos is not None:
        from grpo_probe.envs.demo_set import Demos

        obs = Demos.load(args.demos).obs
    else:
        obs = synthetic_demos(64).obs
    with tempfile.TemporaryDirectory() as tmp:
        ar_path, flow_path = args.ar, args.flow
        if ar_path is None:
            ar_path = Path(tmp) / "ar.pt"
            train_ar(synthetic_demos(400), ARTrainConfig(steps=200), ar_path)
        if flow_path is None:
            flow_path = Path(tmp) / "flow.pt"
            train_flow(synthetic_demos(400), FlowTrainConfig(steps=50), flow_path)
        ar, flow = load_policy(ar_path), load_policy(flow_path)
    rows = [
        ("ar", ar, SamplingMode("greedy")),
        ("ar", ar, SamplingMode("temperature", temperature=1.0)),
        ("ar", ar, SamplingMode("temperature", temperature=1.6)),
        ("flow", flow, SamplingMode("flow_ode")),
        ("flow", flow, SamplingMode("flow_sde", sde_a=0.5)),
    ]
    print(f"{'head':<5} {'mode':<16} {'batch':>5} {'chunks/s':>10} {'tokens/chunk':>13}")
    for head, policy, mode in rows:
        label = (
            mode.kind
            + (f" T={mode.temperature}" if mode.temperature else "")
            + (f" a={mode.sde_a}" if mode.sde_a is not None else "")
        )
        for batch in (1, 8):
            rate, tokens = chunks_per_second(policy, obs, mode, batch, args.repeats)
            print(f"{head:<5} {label:<16} {batch:>5} {rate:>10.1f} {tokens:>13.1f}")


if __name__ == "__main__":
    main()
