"""The scripted experts' smooth keyed action noise, one piece for every expert.

Why smooth: the probe executes a chunk open loop, so white noise per tick would only jitter each action
around the plan; a few control points per dimension, interpolated over the chunk, bend the whole chunk
the way a demonstrator's imperfect motion does, and the cloned arms then see varied but coherent demos.
Why keyed: a demo must be the same bytes whenever it is made, so the knots come from a generator keyed by
the expert's own stream name and the demo's key (run key, seed, replan).
"""

from __future__ import annotations

import numpy as np

from grpo_probe.keyed_rng import numpy_generator, tag

__all__ = ["add_smooth_noise"]


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
