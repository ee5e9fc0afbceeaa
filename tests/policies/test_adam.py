"""The hand-written Adam moves parameters to the same bytes as torch.optim's Adam and AdamW with a
correctly rounded square root, and a training process runs without loading torch's compiler.

Why bytes: checkpoints and pilot metrics are compared byte for byte across reruns, and the optimizer was
``torch.optim.AdamW`` / ``Adam`` (``foreach=False``) before; the same update must give the same floats,
step after step, with a learning rate that changes between steps and a parameter that sometimes has no
gradient. The one difference is on purpose: torch's float32 ``sqrt`` rounds by the processor's approximate
reciprocal square root, whose bits differ between CPU vendors, so ours is correctly rounded; the reference
runs torch's own update with that square root in place of torch's.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from grpo_probe.policies.adam import Adam


def _model(seed: int) -> torch.nn.Module:
    generator = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator))
    return model


def _train(model: torch.nn.Module, optimizer, set_lr, steps: int = 25) -> list[bytes]:
    generator = torch.Generator().manual_seed(7)
    frozen_at = {3, 4, 11}  # steps where the last layer's bias gets no gradient
    seen = []
    for step in range(steps):
        set_lr(1e-2 * (1 + step) ** -0.5)
        x = torch.randn(16, 5, generator=generator)
        loss = (model(x) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        if step in frozen_at:
            model[2].bias.grad = None
        optimizer.step()
        seen.append(b"".join(p.detach().numpy().tobytes() for p in model.parameters()))
    return seen


def _correctly_rounded_sqrt(tensor: torch.Tensor) -> torch.Tensor:
    """The IEEE square root of a float32 tensor: numpy's float64 root rounded once (53 >= 2 x 24 + 2)."""
    return torch.from_numpy(np.sqrt(tensor.detach().numpy().astype(np.float64)).astype(np.float32))


@pytest.mark.parametrize(("weight_decay", "reference"), [(0.0, torch.optim.Adam), (0.05, torch.optim.AdamW)])
def test_the_updates_are_torchs_bit_for_bit(weight_decay: float, reference) -> None:
    ours, theirs = _model(0), _model(0)
    adam = Adam(ours.parameters(), lr=1e-2, weight_decay=weight_decay)
    torch_adam = reference(theirs.parameters(), lr=1e-2, weight_decay=weight_decay, foreach=False)

    def set_ours(lr: float) -> None:
        adam.lr = lr

    def set_theirs(lr: float) -> None:
        for group in torch_adam.param_groups:
            group["lr"] = lr

    mine = _train(ours, adam, set_ours)
    with pytest.MonkeyPatch.context() as patch:  # torch's update, with the correctly rounded square root
        patch.setattr(torch.Tensor, "sqrt", _correctly_rounded_sqrt)
        torchs = _train(theirs, torch_adam, set_theirs)
    assert mine[0] != b"".join(p.detach().numpy().tobytes() for p in _model(0).parameters())  # it moved
    assert mine == torchs


def test_weight_decay_shrinks_parameters_without_a_gradient_only_when_stepped() -> None:
    """A parameter without a gradient is skipped whole, decay included (torch's rule)."""
    param = torch.nn.Parameter(torch.ones(3))
    adam = Adam([param], lr=0.1, weight_decay=0.5)
    adam.step()
    assert torch.equal(param.detach(), torch.ones(3))
    param.grad = torch.zeros(3)
    adam.step()
    assert torch.equal(param.detach(), torch.full((3,), 0.95))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": -1.0}, "lr must be >= 0"),
        ({"lr": 1e-3, "eps": float("nan")}, "eps must be >= 0"),
        ({"lr": 1e-3, "betas": (0.9, 1.0)}, "betas must be in"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Adam([torch.nn.Parameter(torch.ones(1))], **kwargs)


def test_an_empty_parameter_list_is_refused() -> None:
    with pytest.raises(ValueError, match="empty parameter list"):
        Adam([], lr=1e-3)


def _fresh_process(code: str) -> list[str]:
    """The words ``code`` prints, run in a fresh interpreter (as a training job runs)."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return proc.stdout.split()


def test_a_training_process_has_deterministic_kernels_and_never_imports_the_compiler() -> None:
    """Why the optimizer (and ``deterministic_torch``'s flag) are set by hand: a process that trains never
    loads ``torch._dynamo``, and the kernels' determinism flag still reads on, then off after (checked
    in a fresh process, as a training job runs)."""
    code = (
        "import sys, torch\n"
        "from grpo_probe.policies.adam import Adam\n"
        "from grpo_probe.policies.train import deterministic_torch\n"
        "with deterministic_torch():\n"
        "    inside = torch.are_deterministic_algorithms_enabled()\n"
        "    m = torch.nn.Linear(2, 2); a = Adam(m.parameters(), lr=1e-3)\n"
        "    m(torch.ones(2)).sum().backward(); a.step()\n"
        "    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0, foreach=False)\n"
        "print(inside, torch.are_deterministic_algorithms_enabled(), 'torch._dynamo' in sys.modules)\n"
    )
    assert _fresh_process(code) == ["True", "False", "False"]


def test_with_the_compiler_loaded_its_determinism_flag_follows_too() -> None:
    code = (
        "import torch, torch._inductor.config as inductor\n"
        "from grpo_probe.policies.train import deterministic_torch\n"
        "with deterministic_torch():\n"
        "    inside = (torch.are_deterministic_algorithms_enabled(), inductor.deterministic)\n"
        "print(*inside, torch.are_deterministic_algorithms_enabled(), inductor.deterministic)\n"
    )
    assert _fresh_process(code) == ["True", "True", "False", "False"]
