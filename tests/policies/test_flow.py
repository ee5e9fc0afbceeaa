"""Flow head: SDE formulas against a NumPy transcription, sampler identities, keyed noise, invariance."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from grpo_probe.policies import RowKey, SamplingMode, load_policy
from grpo_probe.policies.flow_head import FlowPolicy
from grpo_probe.policies.flow_sde import (
    euler_sample,
    gaussian_logprob,
    heun_sample,
    sde_sample,
    sde_sigma,
    sde_step,
    time_grid,
)
from grpo_probe.policies.synthetic_demos import SyntheticDemos


@pytest.fixture(scope="module")
def policy(flow_checkpoint: Path) -> FlowPolicy:
    loaded = load_policy(flow_checkpoint)
    assert isinstance(loaded, FlowPolicy)
    return loaded


def _keys(n: int, draw: int = 0) -> list[RowKey]:
    return [RowKey(run_key=5, seed=200 + i, replan=2, draw=draw) for i in range(n)]


def _numpy_flow_grpo_step(x, v, t, t_next, a, noise):  # type: ignore[no-untyped-def]
    """Flow-GRPO's reference ``sde_step_with_logprob``, with sigma = t and dt = t_next - t < 0."""
    sigma_max = t_next  # second grid point, used only when t == 1
    std_dev_t = np.sqrt(t / (1 - (sigma_max if t == 1 else t))) * a
    dt = t_next - t
    mean = x * (1 + std_dev_t**2 / (2 * t) * dt) + v * (1 + std_dev_t**2 * (1 - t) / (2 * t)) * dt
    std = std_dev_t * np.sqrt(-dt)
    prev = mean + std * noise
    log_prob = -((prev - mean) ** 2) / (2 * std**2) - np.log(std) - np.log(np.sqrt(2 * np.pi))
    return prev, mean, std, log_prob.reshape(len(x), -1).sum(axis=1)


@pytest.mark.parametrize(
    ("t", "t_next", "a"), [(1.0, 0.9, 0.5), (0.7, 0.6, 0.3), (0.2, 0.1, 1.0), (0.1, 0.0, 0.7)]
)
def test_sde_mean_std_and_logprob_equal_a_numpy_transcription(t: float, t_next: float, a: float) -> None:
    rng = np.random.default_rng(int(t * 100))
    x, v, noise = (rng.normal(size=(3, 50, 6)) for _ in range(3))
    x_next, mean, std = sde_step(
        torch.from_numpy(x), torch.from_numpy(v), t, t_next, a, torch.from_numpy(noise)
    )
    logprob = gaussian_logprob(x_next, mean, std)
    ref_next, ref_mean, ref_std, ref_logprob = _numpy_flow_grpo_step(x, v, t, t_next, a, noise)
    np.testing.assert_allclose(mean.numpy(), ref_mean, rtol=1e-12, atol=1e-12)
    assert std == pytest.approx(ref_std, rel=1e-13)
    np.testing.assert_allclose(x_next.numpy(), ref_next, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(logprob.numpy(), ref_logprob, rtol=1e-12)


def test_sde_sigma_at_t_one_uses_the_next_grid_point() -> None:
    assert sde_sigma(0.5, 1.0, 0.9) == pytest.approx(0.5 * math.sqrt(1.0 / 0.1))
    assert sde_sigma(0.5, 0.4, 0.3) == pytest.approx(0.5 * math.sqrt(0.4 / 0.6))


def _nonlinear_field(x: torch.Tensor, t: float) -> torch.Tensor:
    return torch.sin(3 * x) * (1 + t) - 0.3 * x


def test_sde_step_at_zero_noise_equals_euler_step_bitwise() -> None:
    x0 = torch.from_numpy(np.random.default_rng(0).normal(size=(4, 50, 6)))

    def noise(step: int) -> torch.Tensor:
        return torch.from_numpy(np.random.default_rng(step + 1).normal(size=(4, 50, 6)))

    euler = euler_sample(_nonlinear_field, x0, 10)
    sde, logprobs = sde_sample(_nonlinear_field, x0, 10, 0.0, noise)
    assert sde.numpy().tobytes() == euler.numpy().tobytes()
    assert logprobs is None
    noisy, noisy_logprobs = sde_sample(_nonlinear_field, x0, 10, 0.5, noise)
    assert not torch.equal(noisy, euler)
    assert noisy_logprobs is not None
    assert noisy_logprobs.shape == (4, 10)


def test_sde_sampler_at_zero_equals_euler_with_the_trained_network(
    policy: FlowPolicy, demos: SyntheticDemos
) -> None:
    cond = torch.from_numpy(np.zeros((8, policy.obs_dim), dtype=np.float32))
    cond[:3] = torch.from_numpy((demos.obs[:3] - policy.obs_mean) / policy.obs_std)

    @torch.no_grad()
    def velocity(x: torch.Tensor, t: float) -> torch.Tensor:
        return policy.model(x.to(torch.float32), torch.full((8,), t), cond).to(torch.float64)

    x0 = torch.from_numpy(np.random.default_rng(3).normal(size=(8, 50, 6)))
    euler = euler_sample(velocity, x0, 10)
    sde, _ = sde_sample(velocity, x0, 10, 0.0, lambda step: torch.ones_like(x0))
    assert sde.numpy().tobytes() == euler.numpy().tobytes()


def test_heun_beats_euler_on_a_field_with_known_solution() -> None:
    """dx/dt = x integrated from t = 1 down to t = 0 has the exact solution x(0) = x(1) / e."""
    x1 = torch.linspace(-2.0, 2.0, 11, dtype=torch.float64)[:, None]
    exact = x1 / math.e
    euler_error = float((euler_sample(lambda x, t: x, x1, 10) - exact).abs().max())
    heun_error = float((heun_sample(lambda x, t: x, x1, 10) - exact).abs().max())
    assert heun_error < euler_error / 5


def test_time_grid_runs_from_noise_to_action() -> None:
    grid = time_grid(10)
    assert grid[0] == 1.0
    assert grid[-1] == 0.0
    assert len(grid) == 11
    assert all(a > b for a, b in itertools.pairwise(grid))


@pytest.mark.parametrize("mode", [SamplingMode("flow_ode"), SamplingMode("flow_sde", sde_a=0.5)])
def test_flow_rows_do_not_depend_on_batch_rows(
    policy: FlowPolicy, demos: SyntheticDemos, mode: SamplingMode
) -> None:
    keys = _keys(9)
    batch = policy.act(demos.obs[:9], keys, mode)
    alone = policy.act(demos.obs[6:7], keys[6:7], mode)
    assert batch.actions[6].tobytes() == alone.actions[0].tobytes()
    if mode.kind == "flow_sde":
        assert batch.diagnostics[6].step_logprobs.tobytes() == alone.diagnostics[0].step_logprobs.tobytes()
        assert batch.diagnostics[6].logprob == alone.diagnostics[0].logprob


def test_changing_the_draw_changes_the_flow_noise_and_actions(
    policy: FlowPolicy, demos: SyntheticDemos
) -> None:
    a = policy.act(demos.obs[:2], _keys(2, draw=0), SamplingMode("flow_ode"))
    b = policy.act(demos.obs[:2], _keys(2, draw=1), SamplingMode("flow_ode"))
    again = policy.act(demos.obs[:2], _keys(2, draw=0), SamplingMode("flow_ode"))
    assert not np.array_equal(a.actions, b.actions)
    assert a.actions.tobytes() == again.actions.tobytes()


def test_sde_diagnostics_sum_per_step_logprobs(policy: FlowPolicy, demos: SyntheticDemos) -> None:
    out = policy.act(demos.obs[:2], _keys(2), SamplingMode("flow_sde", sde_a=0.5, steps=6))
    for row in out.diagnostics:
        assert row.step_logprobs.shape == (6,)
        assert row.logprob == float(row.step_logprobs.sum())
    zero = policy.act(demos.obs[:2], _keys(2), SamplingMode("flow_sde", sde_a=0.0))
    assert all(row.logprob is None for row in zero.diagnostics)


def test_flow_head_rejects_ar_modes(policy: FlowPolicy, demos: SyntheticDemos) -> None:
    with pytest.raises(ValueError, match="greedy"):
        policy.act(demos.obs[:1], _keys(1), SamplingMode("greedy"))


def test_policy_sde_at_a_zero_reproduces_the_policy_euler_sampler_bitwise(
    policy: FlowPolicy, demos: SyntheticDemos
) -> None:
    keys = _keys(3, draw=2)
    euler = policy.act(demos.obs[:3], keys, SamplingMode("flow_euler", steps=10))
    sde = policy.act(demos.obs[:3], keys, SamplingMode("flow_sde", sde_a=0.0, steps=10))
    heun = policy.act(demos.obs[:3], keys, SamplingMode("flow_ode", steps=10))
    assert sde.actions.tobytes() == euler.actions.tobytes()
    assert heun.actions.tobytes() != euler.actions.tobytes()
