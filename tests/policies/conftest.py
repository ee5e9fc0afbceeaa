"""Tiny trained heads shared by the policy tests (trained once per session on synthetic demos)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grpo_probe.policies.synthetic_demos import SyntheticDemos, synthetic_demos
from grpo_probe.policies.train import ARTrainConfig, FlowTrainConfig, train_ar, train_flow

TINY_AR = ARTrainConfig(
    d_model=32, n_layers=1, n_heads=2, n_prefix=2, steps=25, batch_size=16, warmup_steps=5
)
TINY_FLOW = FlowTrainConfig(
    hidden=64, n_layers=2, obs_embed=16, time_embed=16, steps=25, batch_size=32, warmup_steps=5
)


@pytest.fixture(scope="session", autouse=True)
def _single_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def demos() -> SyntheticDemos:
    return synthetic_demos(240, run_key=7)


@pytest.fixture(scope="session")
def ar_checkpoint(tmp_path_factory: pytest.TempPathFactory, demos: SyntheticDemos) -> Path:
    path = tmp_path_factory.mktemp("ar") / "ar.pt"
    train_ar(demos, TINY_AR, path)
    return path


@pytest.fixture(scope="session")
def flow_checkpoint(tmp_path_factory: pytest.TempPathFactory, demos: SyntheticDemos) -> Path:
    path = tmp_path_factory.mktemp("flow") / "flow.pt"
    train_flow(demos, TINY_FLOW, path)
    return path
