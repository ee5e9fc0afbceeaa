"""A scripted expert that plans 50-action chunks from the observation, exactly as a policy does.

Why from the observation and per chunk: its episodes are the behaviour-cloning demonstrations, so each
(observation, chunk) pair it produces must be something a policy could have produced from the same input.
The plan is stateless: come round behind the boat on the disk line at a safe height, lower, push.

Noise is smooth (a few keyed control points per dimension, linearly interpolated over the chunk), so the
noisy chunks stay low-frequency, like a policy's, and their DCT tokens stay short.
"""

from __future__ import annotations

import math

import numpy as np

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.expert_noise import checked_noise, noisy_chunk

__all__ = ["ScriptedExpert", "targets_to_actions"]

# The pusher's actuator ranges (scene.xml) in the action order; targets map onto [-1, 1] through them.
_CTRL_LO = np.array([-0.5, -0.5, -0.08, -0.4, -0.4, -math.pi])
_CTRL_HI = np.array([0.5, 0.5, 0.25, 0.4, 0.4, math.pi])

_BEHIND_M = 0.075
"""Pusher tip centre distance behind the boat centre when pushing (boat half-length + tip radius + gap)."""
_CLEAR_HEIGHT_M = 0.085
"""Tip height that clears the boat (hull and cabin top at 0.054 m) while coming round."""
_PUSH_HEIGHT_M = 0.006
"""Tip height while pushing: low on the hull, just above the table."""
_TRAVEL_SPEED_M_S = 0.45
_LOWER_SPEED_M_S = 0.35
_PUSH_SPEED_M_S = 0.12
_ALIGNED_M = 0.02
"""The tip counts as behind the boat when within this distance of the push point in the table plane."""
_NOISE_KNOTS = 6


def targets_to_actions(targets: np.ndarray) -> np.ndarray:
    """Map joint targets (metres, radians) onto normalized actions in [-1, 1]."""
    return np.clip(2.0 * (targets - _CTRL_LO) / (_CTRL_HI - _CTRL_LO) - 1.0, -1.0, 1.0)


def _walk(points: list[np.ndarray], speeds: list[float], dt: float, n: int) -> np.ndarray:
    """Positions at n ticks along a polyline, each segment at its own speed; holds the last point."""
    out = np.empty((n, 3))
    seg, pos = 0, points[0].astype(np.float64).copy()
    for k in range(n):
        budget = speeds[min(seg, len(speeds) - 1)] * dt
        while seg < len(points) - 1 and budget > 0.0:
            goal = points[seg + 1]
            gap = goal - pos
            dist = float(np.linalg.norm(gap))
            if dist <= budget:
                pos = goal.astype(np.float64).copy()
                budget -= dist
                seg += 1
            else:
                pos = pos + gap * (budget / dist)
                budget = 0.0
        out[k] = pos
    return out


class ScriptedExpert:
    """Come round, lower, push; one chunk per replan. ``noise`` is the std of the smooth action noise."""

    def __init__(self, params: SimParams | None = None, noise: float = 0.0) -> None:
        self.params = params if params is not None else SimParams()
        self.noise = checked_noise(noise)

    def plan_targets(self, obs: np.ndarray) -> np.ndarray:
        """Joint targets [chunk_length, 6] for the noiseless plan."""
        p = self.params
        tip = obs[0:3].astype(np.float64)
        boat = obs[6:8].astype(np.float64)
        to_disk = obs[15:17].astype(np.float64)
        dist = float(np.linalg.norm(to_disk))
        n, dt = p.chunk_length, p.tick_s
        if dist < 1e-3:
            xyz = np.repeat(tip[None], n, axis=0)
        else:
            u = to_disk / dist
            push_from = boat - _BEHIND_M * u
            off_line = float(np.linalg.norm(tip[:2] - push_from))
            if off_line <= _ALIGNED_M and tip[2] <= 2 * _PUSH_HEIGHT_M + 0.01:
                # Push: slide the push point along the disk line until the boat centre reaches the disk.
                goal = boat + to_disk - _BEHIND_M * u + 0.01 * u
                path = [tip, np.array([*push_from, _PUSH_HEIGHT_M]), np.array([*goal, _PUSH_HEIGHT_M])]
                xyz = _walk(path, [_PUSH_SPEED_M_S, _PUSH_SPEED_M_S], dt, n)
            elif off_line <= _ALIGNED_M:
                low = np.array([*push_from, _PUSH_HEIGHT_M])
                xyz = _walk([tip, low], [_LOWER_SPEED_M_S], dt, n)
            else:
                up = np.array([tip[0], tip[1], max(tip[2], _CLEAR_HEIGHT_M)])
                over = np.array([*push_from, _CLEAR_HEIGHT_M])
                low = np.array([*push_from, _PUSH_HEIGHT_M])
                xyz = _walk(
                    [tip, up, over, low], [_LOWER_SPEED_M_S, _TRAVEL_SPEED_M_S, _LOWER_SPEED_M_S], dt, n
                )
        targets = np.zeros((n, 6))
        targets[:, :3] = xyz
        return targets

    def act(self, obs: np.ndarray, key: tuple[int, ...]) -> np.ndarray:
        """One normalized action chunk [chunk_length, 6]; ``key`` names the noise stream (seed, replan)."""
        actions = targets_to_actions(self.plan_targets(obs))
        return noisy_chunk(actions, self.noise, "expert_noise", key, _NOISE_KNOTS)
