"""Keyed torch generators: the torch side of :mod:`grpo_probe.keyed_rng`.

Why a module of its own: the keyed streams are used by the simulator and the prereg, which must load
without torch; only the heads and their training draw torch tensors from a key.
"""

from __future__ import annotations

import torch

from grpo_probe.keyed_rng import key_seed

__all__ = ["torch_generator"]


def torch_generator(*parts: int) -> torch.Generator:
    """A CPU torch generator keyed like :func:`grpo_probe.keyed_rng.numpy_generator` (CPU, so draws are
    device-invariant)."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(key_seed(*parts))
    return gen
