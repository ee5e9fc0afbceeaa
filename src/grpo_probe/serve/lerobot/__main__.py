"""``python -m grpo_probe.serve.lerobot CKPT_DIR``: the same as ``grpo-probe-serve lerobot CKPT_DIR``."""

from __future__ import annotations

import sys

from grpo_probe.serve.lerobot.cli import main

if __name__ == "__main__":
    sys.exit(main())
