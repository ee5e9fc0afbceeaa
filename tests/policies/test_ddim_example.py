"""The example lab's DDIM sampler (examples/labpolicies): its step is DDIM's equation on the flow head's
path, its noise is the path's own posterior at eta = 1, it keeps the path's marginals, and at eta = 0 it is
the head's Euler sampler bit for bit, the equivalence its declaration hands the draw-0 oracle."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from grpo_probe.policies.check.determinism import draw0_twins_of
from grpo_probe.policies.flow_head import FlowPolicy, VelocityMLP
from grpo_probe.policies.flow_sde import euler_sample, time_grid
from grpo_probe.policies.protocol import RowKey
from grpo_probe.prereg import PreregError, load_prereg
from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.rollout.oracles import draw0_probe_mode
from grpo_probe.sampling import SamplingMode, mode_text, sampler, sampler_entry
from lab_samplers import DDIM_MODULE, EXAMPLES, ddim_cell, registered

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ddim() -> Iterator[Any]:
    """The lab's math module, with its kind registered as a design registers it."""
    with registered(DDIM_MODULE, EXAMPLES):
        sampler_entry("ddim")  # the head's first sample imports the entry module
        import labpolicies.ddim_flow as math_module

        yield math_module


def _velocity(x: torch.Tensor, t: float) -> torch.Tensor:
    """A smooth velocity field that depends on x and t (float64), standing in for a trained network."""
    return torch.sin(x) * (0.5 + t) - 0.3 * x + 0.1


def _noise(shape: tuple[int, ...], seed: int = 3):
    steps = [
        torch.randn(shape, generator=torch.Generator().manual_seed(seed + i), dtype=torch.float64)
        for i in range(16)
    ]
    return lambda i: steps[i]


def _tiny_flow_policy() -> FlowPolicy:
    torch.manual_seed(0)
    model = VelocityMLP(
        obs_dim=3, chunk_length=5, action_dims=2, hidden=16, n_layers=2, obs_embed=8, time_embed=8
    )
    return FlowPolicy(model, np.zeros(3), np.ones(3), -np.ones(2), np.ones(2))


def test_eta_zero_is_the_euler_sampler_bit_for_bit(ddim: Any) -> None:
    x = torch.randn((4, 5, 2), generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    chunk, logprobs = ddim.ddim_sample(
        _velocity, x, SamplingMode("ddim", sde_a=0.0, steps=6), _noise(x.shape)
    )
    assert chunk.numpy().tobytes() == euler_sample(_velocity, x, 6).numpy().tobytes() and logprobs is None

    policy = _tiny_flow_policy()  # through the head: its keyed noise, blocks and action mapping
    obs = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    keys = [RowKey(7, seed, 0, 0) for seed in (1, 2)]
    off = policy.act(obs, keys, SamplingMode("ddim", sde_a=0.0, steps=4))
    euler = policy.act(obs, keys, SamplingMode("flow_euler", steps=4))
    assert off.actions.tobytes() == euler.actions.tobytes()
    assert all(d.logprob is None for d in off.diagnostics)
    noisy = policy.act(obs, keys, SamplingMode("ddim", sde_a=0.7, steps=4))
    assert not np.array_equal(noisy.actions, euler.actions)
    again = policy.act(
        obs, [RowKey(7, seed, 0, 1) for seed in (1, 2)], SamplingMode("ddim", sde_a=0.7, steps=4)
    )
    assert not np.array_equal(noisy.actions, again.actions)  # another draw, other keyed noise


@pytest.mark.parametrize("eta", [0.3, 1.0])
def test_each_step_is_ddims_equation_12_on_the_flow_path(ddim: Any, eta: float) -> None:
    """A transcription of Song et al. (arXiv:2010.02502) Eq. 12 with alpha_t = 1 - t, s_t = t, in NumPy."""
    steps = 5
    x = torch.randn((3, 4, 2), generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    noise = _noise(x.shape)
    chunk, logprobs = ddim.ddim_sample(_velocity, x, SamplingMode("ddim", sde_a=eta, steps=steps), noise)

    grid = time_grid(steps)
    xt = x.numpy().copy()
    expected_logprobs = []
    for i in range(steps):
        t, tn = grid[i], grid[i + 1]
        alpha, s, alpha_n, s_n = 1 - t, t, 1 - tn, tn
        v = _velocity(torch.from_numpy(xt), t).numpy()
        a_hat, eps_hat = xt - s * v, xt + alpha * v  # the path's two ends predicted from v ~ eps - a
        sigma = 0.0 if tn == 0 else eta * (s_n / s) * math.sqrt(s**2 - (alpha * s_n / alpha_n) ** 2)
        mean = alpha_n * a_hat + math.sqrt(s_n**2 - sigma**2) * eps_hat
        xt = mean + sigma * noise(i).numpy()
        if sigma > 0:
            density = -((xt - mean) ** 2) / (2 * sigma**2) - math.log(sigma) - 0.5 * math.log(2 * math.pi)
            expected_logprobs.append(density.reshape(len(xt), -1).sum(axis=1))
    np.testing.assert_allclose(chunk.numpy(), xt, rtol=1e-12, atol=1e-12)
    assert logprobs is not None and tuple(logprobs.shape) == (3, steps - 1)  # the last step is deterministic
    np.testing.assert_allclose(logprobs.numpy(), np.stack(expected_logprobs, axis=1), rtol=1e-10)


@pytest.mark.parametrize(("t", "t_next"), [(1.0, 0.8), (0.8, 0.6), (0.3, 0.1)])
def test_at_eta_one_the_noise_is_the_paths_own_posterior(ddim: Any, t: float, t_next: float) -> None:
    """The Markov process with the path's marginals N(alpha_t a, s_t^2): Var(x_t' | x_t, a), conditioned."""
    r = (1 - t) / (1 - t_next)  # x_t = r x_t' + N(0, s_t^2 - r^2 s_t'^2) given a
    covariance = np.array([[t_next**2, r * t_next**2], [r * t_next**2, t**2]])  # of (x_t', x_t) given a
    posterior = covariance[0, 0] - covariance[0, 1] ** 2 / covariance[1, 1]
    assert ddim.ddim_sigma(1.0, t, t_next) == pytest.approx(math.sqrt(posterior), rel=1e-12)
    assert ddim.ddim_sigma(0.5, t, t_next) == pytest.approx(0.5 * math.sqrt(posterior), rel=1e-12)
    assert ddim.ddim_sigma(0.5, t, 0.0) == 0.0 and ddim.ddim_sigma(0.0, t, t_next) == 0.0


def test_with_the_exact_velocity_every_step_keeps_the_paths_marginals(ddim: Any) -> None:
    """DDIM's defining property (Song et al., Sec. 4.1): x_t ~ N(alpha_t a, s_t^2) at every t, for any eta.
    For data at one point a the exact velocity is (x - a) / t."""
    a = 0.4
    x = torch.randn((40000, 1), generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    grid = time_grid(5)
    for i in range(5):
        t, tn = grid[i], grid[i + 1]
        sigma = ddim.ddim_sigma(0.6, t, tn)
        z = torch.randn(x.shape, generator=torch.Generator().manual_seed(100 + i), dtype=torch.float64)
        x, _ = ddim.ddim_step(x, (x - a) / t, t, tn, sigma, z)
        if tn > 0:
            assert float(x.mean()) == pytest.approx((1 - tn) * a, abs=4 * tn / math.sqrt(len(x)))
            assert float(x.std()) == pytest.approx(tn, rel=0.02)
    np.testing.assert_allclose(x.numpy(), a, atol=1e-12)  # t = 0: the data point


def test_the_kind_declares_its_head_parameters_and_noise_off_twin(ddim: Any, tmp_path: Path) -> None:
    mode = SamplingMode("ddim", sde_a=0.5, steps=10)
    declared = sampler("ddim")
    assert declared.head == "flow" and declared.takes == ("sde_a", "steps") and not declared.deterministic
    assert mode_text(mode) == "ddim(a=0.5, steps=10)"
    assert draw0_probe_mode(mode) == SamplingMode("ddim", sde_a=0.0, steps=10)  # the draw-0 oracle's probe
    assert draw0_twins_of(mode) == (
        SamplingMode("ddim", sde_a=0.0, steps=10),
        SamplingMode("flow_euler", steps=10),
    )
    assert declared.draw0.against == "run" and declared.draw0.reference_name == "euler"

    raw = read_yaml(REPO / "prereg" / "smoke.yaml")
    raw["samplers"] = [DDIM_MODULE]
    raw["arms"]["flow_teacher"]["anchor"] = ddim_cell()["mode"]
    path = tmp_path / "anchor.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(
        PreregError, match=r"arms\.flow_teacher\.anchor\.kind: an anchor is deterministic; 'ddim'"
    ):
        load_prereg(path, require_lock=False)


def test_the_guide_shows_the_example_as_it_is() -> None:
    """Text no test reads drifts: docs/extending.md's declaration is examples/labpolicies/ddim.py past its
    docstring, and its step is the example's ddim_sigma and ddim_step, verbatim."""
    guide = (REPO / "docs/extending.md").read_text()
    section = guide.split("## A sampler of your own, without editing the package", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python[^\n]*\n(.*?)```", section, flags=re.S)
    declaration = (EXAMPLES / "labpolicies/ddim.py").read_text().split('"""', 2)[2].lstrip("\n")
    math_source = (EXAMPLES / "labpolicies/ddim_flow.py").read_text()
    step = math_source[math_source.index("def ddim_sigma") : math_source.index("@register_sampler_entry")]
    assert blocks == [declaration, step.rstrip("\n") + "\n"]
