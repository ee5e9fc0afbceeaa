"""``grpo-probe-serve lerobot CKPT_DIR --port N``: serve a LeRobot checkpoint folder, no Python written.

Why a command: a lab with a LeRobot checkpoint should not have to write the adapter (seeding every draw
from the row's key, the history, the chunk, the bounds, the camera keys); this loads the folder, builds
:class:`~grpo_probe.serve.lerobot.adapter.LeRobotAdapter` and serves it with the probe's protocol. CPU
and one torch thread by default: a served policy answers one row at a time, and more threads than the
machine's free cores slowed Diffusion's rows twentyfold.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from grpo_probe.serve.server import serve_policy

__all__ = ["build_parser", "main"]

PROG = "grpo-probe-serve lerobot"


def build_parser() -> argparse.ArgumentParser:
    """The command line (docs/lerobot.md shows every flag; a test holds the page to this parser)."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0].split(": ", 1)[1])
    parser.add_argument("checkpoint", metavar="CKPT_DIR", help="a folder LeRobot's save_pretrained wrote")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=8765, help="port to listen on (0: a free one, printed)")
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument(
        "--chunk-length",
        type=int,
        default=None,
        help="actions per chunk: the design's chunk_length (default the checkpoint's n_action_steps)",
    )
    parser.add_argument(
        "--camera",
        action="append",
        default=[],
        metavar="CAMERA=KEY",
        help="the design's camera CAMERA feeds the checkpoint's image feature KEY (repeat per camera)",
    )
    parser.add_argument(
        "--action-low",
        type=float,
        nargs="+",
        default=None,
        help="the environment's action lower bound (one value or one per dimension; default the "
        "checkpoint's action min)",
    )
    parser.add_argument(
        "--action-high",
        type=float,
        nargs="+",
        default=None,
        help="the environment's action upper bound (default the checkpoint's action max)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, load the checkpoint and serve it until interrupted."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be 0 to 65535, got {args.port}")
    if args.device.startswith("cuda"):  # deterministic cuBLAS, set before CUDA starts
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    from grpo_probe.serve.lerobot.load import load_checkpoint

    torch.set_num_threads(args.threads)
    with contextlib.suppress(RuntimeError):  # already set in this process
        torch.set_num_interop_threads(args.threads)
    if args.device.startswith("cuda"):
        torch.use_deterministic_algorithms(True)
    try:  # LeRobot prints as it loads: keep stdout for the ready line a starting script reads
        with contextlib.redirect_stdout(sys.stderr):
            adapter, metadata = load_checkpoint(
                args.checkpoint,
                device=args.device,
                chunk_length=args.chunk_length,
                cameras=args.camera,
                action_low=args.action_low,
                action_high=args.action_high,
            )
    except ValueError as exc:
        parser.error(str(exc))
    serve_policy(adapter, f"ws://{args.host}:{args.port}", metadata=metadata)
    return 0
