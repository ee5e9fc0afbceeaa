"""Fixtures of the rollout tests: short episodes, one shared worker pool, test and tiny real policies."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grpo_probe.policies.synthetic_demos import synthetic_demos
from grpo_probe.policies.train import train_arm
from grpo_probe.rollout import RolloutPool

from .rollout_cases import TINY_AR, TINY_FLOW

# Worker processes import the keyed test policies by name ("rollout.keyed_test_policies:make_ar_policy");
# pytest runs with --import-mode=importlib, which leaves tests/ off sys.path, and spawned workers inherit
# the parent's sys.path (under forkserver and spawn alike), so put tests/ on it before any pool starts.
_TESTS_DIR = str(Path(__file__).resolve().parents[1])
if _TESTS_DIR not in sys.path:
    sys.path.append(_TESTS_DIR)


@pytest.fixture(scope="session")
def pool() -> Iterator[RolloutPool]:
    """Two workers shared by the tests (starting workers costs seconds; each caches its policies)."""
    with RolloutPool(2) as shared:
        yield shared


@pytest.fixture(scope="session")
def real_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny AR and flow checkpoints trained for three steps on synthetic demos (real heads, tiny budget)."""
    root = tmp_path_factory.mktemp("checkpoints")
    demos = synthetic_demos(64)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_arm("ar", demos, root / "ar.ckpt", TINY_AR)
        train_arm("flow", demos, root / "flow.ckpt", TINY_FLOW)
    finally:
        torch.set_num_threads(threads)
    return {"ar": root / "ar.ckpt", "flow": root / "flow.ckpt"}
