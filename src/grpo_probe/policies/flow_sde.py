"""Samplers of the flow head: Heun ODE decode, Euler, and the Flow-GRPO SDE with per-step log-probs.

Time runs as in openpi: x_t = t * eps + (1 - t) * a, velocity u = eps - a, t = 1 is noise and t = 0 the
action chunk, so integrating from t = 1 down to t = 0 subtracts: x_{t - delta} = x_t - delta * v.

The SDE step is Flow-GRPO's (Liu et al., arXiv:2505.05470v2, Eq. 9 as the memo cites it, with the
noise schedule sigma_t = a * sqrt(t / (1 - t)); the same step is piRL's "Flow-SDE", arXiv:2510.25889v1),
transcribed in openpi's time direction with delta = t_i - t_{i+1} > 0. The test suite checks it
against a NumPy transcription of Flow-GRPO's reference ``sde_step_with_logprob``. With a = 0 its
mean is exactly the Euler step and its std is 0, so :func:`euler_sample` and :func:`sde_sample` call
the same :func:`sde_step`, and the SDE sampler at a = 0 reproduces the Euler sampler bit for bit.

All sampler arithmetic is float64; the velocity network sees float32 inputs.

Each flow kind's sampling entry is registered here (:func:`grpo_probe.sampling.register_sampler_entry`):
the flow head calls ``entry(velocity, x, mode, noise)`` for the mode's kind and gets the chunk at t = 0 and
its per-step log-probs (None where the sampler defines none).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from grpo_probe.sampling import SamplingMode, register_sampler_entry

__all__ = [
    "FlowSampler",
    "Velocity",
    "euler_sample",
    "gaussian_logprob",
    "heun_sample",
    "sde_sample",
    "sde_sigma",
    "sde_step",
    "time_grid",
]

Velocity = Callable[[torch.Tensor, float], torch.Tensor]
"""v(x [B, ...] float64, t) -> velocity with x's shape (float64)."""

NoiseFn = Callable[[int], torch.Tensor]
"""step index -> standard normal noise with x's shape (float64), keyed per row by the caller."""

FlowSampler = Callable[
    [Velocity, torch.Tensor, SamplingMode, NoiseFn], tuple[torch.Tensor, torch.Tensor | None]
]
"""A flow kind's sampling entry: (velocity, x at t = 1, mode, step noise) -> (x at t = 0, per-step log-probs
float64 [B, steps] or None)."""


def time_grid(steps: int) -> list[float]:
    """Uniform grid 1 = t_0 > t_1 > ... > t_steps = 0 (python floats, identical on every machine)."""
    if steps < 1:
        raise ValueError(f"sampler steps must be >= 1, got {steps}")
    return [1.0 - i / steps for i in range(steps)] + [0.0]


def sde_sigma(a: float, t: float, t_next: float) -> float:
    """sigma_i = a * sqrt(t_i / (1 - t_i)); at t_i = 1 the denominator uses the next grid point.

    Flow-GRPO's reference code does the same (``1 - where(sigma == 1, sigma_max, sigma)`` with sigma_max the
    second grid point), because 1 - t_0 = 0.
    """
    denominator = 1.0 - (t_next if t == 1.0 else t)
    return a * math.sqrt(t / denominator)


def sde_step(
    x: torch.Tensor, v: torch.Tensor, t: float, t_next: float, a: float, noise: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """One transition x_{t_i} -> x_{t_{i+1}}; returns (x_next, mean, std).

    ``noise=None`` returns the mean itself (the Euler step when a = 0).
    """
    # Flow-GRPO (arXiv:2505.05470v2) Eq. 9, openpi time direction: t = 1 noise -> t = 0 action.
    delta = t - t_next  # delta > 0: we step down in t
    sigma = sde_sigma(a, t, t_next)  # sigma_t; a = 0 gives sigma = 0
    drift_correction = sigma**2 / (2 * t) * (x + (1 - t) * v)  # score term; exactly 0 (or -0) when a = 0
    mean = x - delta * (v + drift_correction)  # at a = 0 this is exactly x - delta * v
    std = sigma * math.sqrt(delta)  # std of the Gaussian transition
    x_next = mean if noise is None else mean + std * noise
    return x_next, mean, std


def gaussian_logprob(x_next: torch.Tensor, mean: torch.Tensor, std: float) -> torch.Tensor:
    """log N(x_next; mean, std^2 I) summed over all but the batch dimension (float64 [B]).

    Flow-GRPO averages over dimensions; we sum, so a chunk's log-prob is that of the whole 50 x 6 vector.
    """
    log_density = -((x_next - mean) ** 2) / (2 * std**2) - math.log(std) - 0.5 * math.log(2 * math.pi)
    return log_density.flatten(1).sum(dim=1)


def euler_sample(velocity: Velocity, x: torch.Tensor, steps: int) -> torch.Tensor:
    """Deterministic Euler from x at t = 1 to t = 0: the SDE step with a = 0 and no noise."""
    grid = time_grid(steps)
    for i in range(steps):
        x, _, _ = sde_step(x, velocity(x, grid[i]), grid[i], grid[i + 1], 0.0, None)
    return x


def sde_sample(
    velocity: Velocity, x: torch.Tensor, steps: int, a: float, noise: NoiseFn
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """SDE sampler; returns (x at t = 0, per-step log-probs float64 [B, steps], or None when a = 0).

    At a = 0 every transition is a point mass (std 0), so its log-prob is undefined and not returned; the
    trajectory then equals :func:`euler_sample` bit for bit (x + 0 * noise = x).
    """
    grid = time_grid(steps)
    step_logprobs = []
    for i in range(steps):
        x_next, mean, std = sde_step(x, velocity(x, grid[i]), grid[i], grid[i + 1], a, noise(i))
        if std > 0:
            step_logprobs.append(gaussian_logprob(x_next, mean, std))
        x = x_next
    return x, (torch.stack(step_logprobs, dim=1) if a > 0 else None)


def heun_sample(velocity: Velocity, x: torch.Tensor, steps: int) -> torch.Tensor:
    """Heun (explicit trapezoid) from t = 1 to t = 0; the last step is plain Euler.

    The last step stays Euler because it lands on t = 0, where the velocity field is least reliable
    (the network never sees t = 0 exactly in training), and it saves one network call.
    """
    grid = time_grid(steps)
    for i in range(steps):
        t, t_next = grid[i], grid[i + 1]
        v = velocity(x, t)
        x_euler, _, _ = sde_step(x, v, t, t_next, 0.0, None)
        if i == steps - 1:
            x = x_euler
        else:
            v_next = velocity(x_euler, t_next)
            x = x - (t - t_next) * (0.5 * (v + v_next))
    return x


@register_sampler_entry("flow_ode")
def _flow_ode(
    velocity: Velocity, x: torch.Tensor, mode: SamplingMode, noise: NoiseFn
) -> tuple[torch.Tensor, torch.Tensor | None]:
    return heun_sample(velocity, x, mode.steps), None


@register_sampler_entry("flow_euler")
def _flow_euler(
    velocity: Velocity, x: torch.Tensor, mode: SamplingMode, noise: NoiseFn
) -> tuple[torch.Tensor, torch.Tensor | None]:
    return euler_sample(velocity, x, mode.steps), None


@register_sampler_entry("flow_sde")
def _flow_sde(
    velocity: Velocity, x: torch.Tensor, mode: SamplingMode, noise: NoiseFn
) -> tuple[torch.Tensor, torch.Tensor | None]:
    return sde_sample(velocity, x, mode.steps, float(mode.sde_a), noise)  # type: ignore[arg-type]
