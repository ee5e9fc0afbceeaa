"""The scripted experts' smooth keyed action noise, and the rest every expert does alike around its plan.

Why smooth: the probe executes a chunk open loop, so white noise per tick would only jitter each action
around the plan; a few control points per dimension, interpolated over the chunk, bend the whole chunk
the way a demonstrator's imperfect motion does, and the cloned arms then see varied but coherent demos.
Why keyed: a demo must be the same bytes whenever it is made, so the knots come from a generator keyed by
the expert's own stream name and the demo's key (run key, seed, replan).
Why the rest here too: every expert checks its noise level the same way, maps its plan into the policy's
[-1, 1] action range, adds this noise and hands back float32; written once, the experts differ only in
their plans.
"""

from __future__ import annotations

import math

import numpy as np

from grpo_probe.keyed_rng import numpy_generator, tag

__all__ = ["add_smooth_noise", "checked_noise", "noisy_chunk", "to_unit_range"]


def add_smooth_noise(
    actions: np.ndarray, noise: float, stream: str, key: tuple[int, ...], knots: int
) -> np.ndarray:
    """``actions`` [ticks, dims] in [-1, 1] plus smooth noise of std ``noise``, clipped to [-1, 1].

    ``knots`` control points per dimension are drawn from N(0, noise^2) by the generator keyed
    (``stream``, ``*key``) and interpolated linearly over the chunk's ticks. ``noise`` 0 returns the
    actions as they are.
    """
    if noise <= 0.0:
        return actions
    rng = numpy_generator(tag(stream), *key)
    points = rng.normal(0.0, noise, size=(knots, actions.shape[1]))
    grid = np.linspace(0.0, 1.0, actions.shape[0])
    at = np.linspace(0.0, 1.0, knots)
    smooth = np.stack([np.interp(grid, at, points[:, j]) for j in range(actions.shape[1])], axis=1)
    return np.clip(actions + smooth, -1.0, 1.0)


def checked_noise(noise: float) -> float:
    """An expert's noise level as a float, refused unless it is a finite number >= 0."""
    if not math.isfinite(noise) or noise < 0:
        raise ValueError(f"expert noise must be a finite number >= 0, got {noise!r}")
    return float(noise)


def to_unit_range(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``values`` within the environment's action bounds [``low``, ``high``] mapped onto [-1, 1], clipped."""
    return np.clip(2.0 * (values - low) / (high - low) - 1.0, -1.0, 1.0)


def noisy_chunk(
    actions: np.ndarray, noise: float, stream: str, key: tuple[int, ...], knots: int
) -> np.ndarray:
    """An expert's chunk as it acts: :func:`add_smooth_noise` on its plan ``actions`` (in [-1, 1]), as
    float32, the dtype of every policy's actions."""
    return add_smooth_noise(actions, noise, stream, key, knots).astype(np.float32)
