"""DDIM on the flow head: Song, Meng & Ermon, "Denoising Diffusion Implicit Models" (ICLR 2021,
arXiv:2010.02502), Eq. 12 and 16, on the head's own velocity field and Euler step.

The flow head's path (:mod:`grpo_probe.policies.flow_sde`) is x_t = t eps + (1 - t) a, t = 1 noise and
t = 0 the action chunk: a Gaussian path x_t = alpha_t a + s_t eps with alpha_t = 1 - t and s_t = t. The
velocity v = v(x_t, t), trained towards eps - a, predicts both ends:

    a_hat = x_t - t v                eps_hat = x_t + (1 - t) v

DDIM's step from t to t' < t (Eq. 12, their sqrt(alpha_bar) written alpha and sqrt(1 - alpha_bar) s):

    x_t' = alpha_t' a_hat + sqrt(s_t'^2 - sigma^2) eps_hat + sigma z,          z ~ N(0, I)
    sigma = eta (s_t' / s_t) sqrt(s_t^2 - (alpha_t s_t' / alpha_t')^2)

sigma / eta is the std of the path's own posterior q(x_t' | x_t, a): for their variance-preserving path
(s^2 = 1 - alpha^2) it is Eq. 16, sqrt((1 - abar_t') / (1 - abar_t)) sqrt(1 - abar_t / abar_t'). So eta = 1
is ancestral sampling and eta = 0 the deterministic DDIM; eta is at most 1, or s_t'^2 - sigma^2 < 0.

At sigma = 0, alpha_t' a_hat + s_t' eps_hat = x_t - (t - t') v, the head's Euler step. The step is
therefore written as that Euler step, computed by the function the built-in ``flow_euler`` runs
(``sde_step`` with a = 0), plus DDIM's correction and noise:

    x_t' = [x_t - (t - t') v] + (sqrt(t'^2 - sigma^2) - t') eps_hat + sigma z

and where sigma = 0 (eta = 0; and the last step, onto t' = 0, for every eta) it is the Euler step alone.
That is the kind's noise-off equivalence (:mod:`labpolicies.ddim`): at eta = 0 the sampler is
``flow_euler``, bit for bit. Arithmetic is float64, as in the head's other samplers.
"""

import math

import torch
from labpolicies.ddim import KIND

from grpo_probe.policies.flow_sde import NoiseFn, Velocity, gaussian_logprob, sde_step, time_grid
from grpo_probe.sampling import SamplingMode, register_sampler_entry


def ddim_sigma(eta: float, t: float, t_next: float) -> float:
    """sigma of the step t -> t_next (Eq. 16 on the path alpha = 1 - t, s = t); 0 at eta = 0 or t_next = 0."""
    if eta == 0.0 or t_next == 0.0:
        return 0.0
    shrink = (1.0 - t) * t_next / (1.0 - t_next)  # alpha_t s_t' / alpha_t'
    return eta * (t_next / t) * math.sqrt(t * t - shrink * shrink)


def ddim_step(
    x: torch.Tensor, v: torch.Tensor, t: float, t_next: float, sigma: float, z: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """One DDIM transition x_t -> x_t' with noise ``sigma * z``; returns (x_t', its mean). At sigma = 0
    it is the Euler step itself (``z`` unused)."""
    euler, _, _ = sde_step(x, v, t, t_next, 0.0, None)  # alpha_t' a_hat + s_t' eps_hat = x_t - (t - t') v
    if sigma == 0.0 or z is None:
        return euler, euler
    eps_hat = x + (1.0 - t) * v
    mean = euler + (math.sqrt(t_next * t_next - sigma * sigma) - t_next) * eps_hat  # Eq. 12's direction term
    return mean + sigma * z, mean


@register_sampler_entry(KIND)
def ddim_sample(
    velocity: Velocity, x: torch.Tensor, mode: SamplingMode, noise: NoiseFn
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """DDIM from x at t = 1 to t = 0 on ``time_grid(mode.steps)``, eta = ``mode.sde_a``; returns the chunk
    and the per-step log-probs of its Gaussian transitions (float64 [B, steps - 1]: the last step is
    deterministic), or None at eta = 0, where every step is a point mass and no noise is drawn."""
    eta = float(mode.sde_a)  # type: ignore[arg-type]
    grid = time_grid(mode.steps)
    step_logprobs = []
    for i in range(mode.steps):
        t, t_next = grid[i], grid[i + 1]
        sigma = ddim_sigma(eta, t, t_next)
        z = noise(i) if sigma > 0.0 else None  # the head's keyed noise of step i
        x_next, mean = ddim_step(x, velocity(x, t), t, t_next, sigma, z)
        if sigma > 0.0:
            step_logprobs.append(gaussian_logprob(x_next, mean, sigma))
        x = x_next
    return x, (torch.stack(step_logprobs, dim=1) if step_logprobs else None)
