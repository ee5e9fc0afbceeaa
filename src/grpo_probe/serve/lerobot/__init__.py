"""Serve a LeRobot checkpoint folder to the probe: ``grpo-probe-serve lerobot CKPT_DIR --port N``.

Why in the serve package: a lab whose policy is a LeRobot checkpoint writes no adapter; this one loads
the folder, dispatches on its config ``type`` (Diffusion, ACT, any other that loads offline), and keeps
the act() contract the probe's oracles check: every draw seeded from the row's key, a fresh history per
row, the chunk cut to the design's length, the mode's sampling steps, the probe's camera keys mapped onto
the checkpoint's, actions in [-1, 1] from the environment's bounds (docs/lerobot.md).

Importing this package needs numpy only: :mod:`~grpo_probe.serve.lerobot.rows` holds the rules that
need no torch, and torch and LeRobot are imported when a checkpoint is served
(:mod:`~grpo_probe.serve.lerobot.adapter`, :mod:`~grpo_probe.serve.lerobot.load`), in the lab's
environment (``tools/make_lerobot_venv.sh`` builds one).
"""

from __future__ import annotations

from grpo_probe.serve.lerobot.rows import ActionBounds, CameraMap, cut_chunk, row_seed, stack_history

__all__ = ["ActionBounds", "CameraMap", "cut_chunk", "row_seed", "stack_history"]
