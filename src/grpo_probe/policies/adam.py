"""Adam with decoupled weight decay: the optimizer of behaviour cloning and of the phase-2 pilot.

Why not ``torch.optim``: constructing any ``torch.optim.Optimizer`` imports ``torch._dynamo`` (its
``add_param_group`` is wrapped to disable the compiler), about 1.7 CPU-s in every process that trains. The
workflow trains in many short processes (each arm's behaviour cloning, each pilot iteration), and none of
them compiles anything. This is the same update, written out: ``tests/policies/test_adam.py`` checks that
it moves parameters to the same bytes as ``torch.optim.Adam`` and ``torch.optim.AdamW`` (``foreach=False``,
their one-tensor-at-a-time path), step after step.

The update of one parameter tensor θ with gradient g at step t (Kingma & Ba 2015, Algorithm 1; weight
decay decoupled from the gradient as in Loshchilov & Hutter 2019, Algorithm 2):

    θ ← θ · (1 − lr · λ)                       decoupled weight decay (λ = 0: plain Adam)
    m ← m + (1 − β1) · (g − m)                 first moment, an exponential mean of g
    v ← β2 · v + (1 − β2) · g²                 second moment, an exponential mean of g²
    θ ← θ − lr / (1 − β1^t) · m / (√v / √(1 − β2^t) + ε)

The bias corrections 1 − β^t undo the moments' start at zero. The operations and their order are torch's,
so the rounding is too, but for one: √v is the correctly rounded square root (taken in float64, rounded
once), where torch's float32 ``sqrt`` on the CPU rounds by its processor's approximate reciprocal square
root, which differs between Intel and AMD. The update then differs from ``torch.optim.Adam``'s by at most
one unit in the last place of √v, and it is the same on every CPU (:mod:`grpo_probe.numerics`).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["Adam"]


class Adam:
    """Adam over ``params`` at learning rate ``lr`` (settable between steps: the schedule writes it), with
    decoupled weight decay ``weight_decay`` (AdamW's; 0 is Adam). Parameters without a gradient at a step
    are skipped, their moments and step count unchanged, as in torch."""

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float,
        *,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("Adam got an empty parameter list")
        for name, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            if not value >= 0.0:
                raise ValueError(f"Adam: {name} must be >= 0, got {value!r}")
        if not all(0.0 <= beta < 1.0 for beta in betas):
            raise ValueError(f"Adam: betas must be in [0, 1), got {betas!r}")
        self.lr = lr
        self.betas = betas
        self.eps = eps
        self.weight_decay = weight_decay
        self._steps = [0] * len(self.params)
        self._moments: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(self.params)

    def zero_grad(self) -> None:
        """Drop every parameter's gradient (``None``, not zeros: the next backward allocates it)."""
        for param in self.params:
            param.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient (the equations in the module docstring)."""
        beta1, beta2 = self.betas
        lr, eps, decay = self.lr, self.eps, self.weight_decay
        for i, param in enumerate(self.params):
            grad = param.grad
            if grad is None:
                continue
            if self._moments[i] is None:
                self._moments[i] = (torch.zeros_like(param), torch.zeros_like(param))
            exp_avg, exp_avg_sq = self._moments[i]  # type: ignore[misc]
            self._steps[i] += 1
            t = self._steps[i]
            if decay != 0:
                param.mul_(1 - lr * decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step_size = lr / (1 - beta1**t)
            # sqrt in float64, rounded once to float32: the correctly rounded square root. PyTorch's
            # float32 sqrt on the CPU is built on the approximate rsqrt instruction, whose last bits
            # differ between Intel and AMD processors; this one is the same on every CPU.
            root = exp_avg_sq.to(torch.float64).sqrt_().to(exp_avg_sq.dtype)
            denom = (root / (1 - beta2**t) ** 0.5).add_(eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)
