"""What a training process pays for its optimizer and determinism flag: torch's against the package's.

Run by hand (not in CI timing asserts):

    .venv/bin/python benchmarks/training_start_cost.py [--head flow] [--steps 20] [--repeats 3]

Every process that trains (an arm's behaviour cloning, a phase-2 pilot's update) is a fresh workflow
job. ``torch.optim``'s optimizers import ``torch._dynamo`` when they are built, and so does
``torch.use_deterministic_algorithms``; the package's own Adam (``grpo_probe.policies.adam``) and its
direct setting of the kernels' flag (``policies.train.deterministic_torch``) load neither. Each
measurement here is a fresh process that trains one arm of ``--head`` for ``--steps`` steps on synthetic
demos (the smoke design's budget by default), either as the package does or with ``torch.optim.AdamW``
(``foreach=False``) and ``torch.use_deterministic_algorithms`` put back in, the two in turn, ``--repeats``
times. Prints each path's median wall and CPU with their range, the ratio, and whether the checkpoints'
sha256 agree (the same update must give the same bytes).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from measure import fresh_processes_in_turn, load_average, print_medians

PATHS = ("torch.optim", "package")


class _TorchAdamW:
    """``torch.optim.AdamW`` behind the package optimizer's interface (a settable ``lr``)."""

    def __init__(self, params, lr: float, *, weight_decay: float) -> None:
        import torch

        self._optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, foreach=False)

    @property
    def lr(self) -> float:
        return self._optimizer.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value: float) -> None:
        for group in self._optimizer.param_groups:
            group["lr"] = value

    def zero_grad(self) -> None:
        self._optimizer.zero_grad(set_to_none=True)

    def step(self) -> None:
        self._optimizer.step()


def _one(path: str, head: str, steps: int, out: str) -> None:
    """The measured process: train one arm on synthetic demos and print the checkpoint's sha256."""
    import torch

    from grpo_probe.policies import train
    from grpo_probe.policies.synthetic_demos import synthetic_demos

    if path == "torch.optim":
        train._optimizer = lambda model, config: _TorchAdamW(
            model.parameters(), lr=config.lr, weight_decay=config.weight_decay
        )
        train._use_deterministic_algorithms = torch.use_deterministic_algorithms
    sha = train.train_arm(head, synthetic_demos(256), out, {"steps": steps, "warmup_steps": 1})
    print(sha, "torch._dynamo" in sys.modules)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head", choices=("ar", "flow"), default="flow")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(args.one, args.head, args.steps, args.out)
        return
    print(f"load average before: {load_average()}")
    with tempfile.TemporaryDirectory() as tmp:
        one = ["--head", args.head, "--steps", str(args.steps), "--out", str(Path(tmp) / "policy.pt")]
        commands = {path: [sys.executable, __file__, "--one", path, *one] for path in PATHS}
        rows, outputs = fresh_processes_in_turn(commands, args.repeats)
    print(f"\n{args.head} head, {args.steps} steps, a fresh process per training")
    medians = print_medians(rows)
    print(
        f"  package / torch.optim: wall {medians['package'][0] / medians['torch.optim'][0]:.2f}, "
        f"CPU {medians['package'][1] / medians['torch.optim'][1]:.2f}"
    )
    shas = {line.split()[0] for lines in outputs.values() for line in lines}
    print(f"  same checkpoint bytes: {'yes' if len(shas) == 1 else 'NO'}")
    for path, lines in outputs.items():
        loaded = {line.split()[1] for line in lines}
        print(f"  {path}: torch._dynamo loaded: {', '.join(sorted(loaded))}")
    print(f"\nload average after: {load_average()}")


if __name__ == "__main__":
    main()
