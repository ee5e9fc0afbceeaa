"""Seeded spawns: the whole initial state of an episode is a pure function of (spawn key, seed).

Why: a GRPO group is K rollouts from *the same* spawn, and an anchor row is joined to probe rows by seed,
so the spawn must not depend on anything but the seed (not the draw, not the process, not the order in
which episodes run). numpy's PCG64 behind a ``SeedSequence`` of (spawn key, seed) gives that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.keyed_rng import numpy_generator, tag

__all__ = ["SPAWN_STREAM", "Spawn", "draw_spawn"]

SPAWN_STREAM = tag("spawn")
"""Stream tag of the spawn stream; the seed is the only other key part."""

_DISK_MAX_RADIUS_M = 0.30
"""Disk centres stay this close to the table centre, well inside the 0.4 m half-width table."""
_PUSHER_MIN_CLEARANCE_M = 0.10
"""The pusher spawns at least this far (in the table plane) from the boat centre."""


@dataclass(frozen=True)
class Spawn:
    """Initial poses of one episode (metres, radians)."""

    seed: int
    boat_x: float
    boat_y: float
    boat_yaw: float
    disk_x: float
    disk_y: float
    pusher_x: float
    pusher_y: float


def draw_spawn(params: SimParams, seed: int) -> Spawn:
    """Draw the spawn of ``seed``; rejection loops use the same stream, so they stay deterministic."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    rng = numpy_generator(SPAWN_STREAM, seed)
    h = params.boat_spawn_half_extent_m
    boat_x, boat_y = (float(v) for v in rng.uniform(-h, h, size=2))
    boat_yaw = float(rng.uniform(-math.pi, math.pi))
    lo, hi = params.d0_range_m
    d0 = float(rng.uniform(lo, hi))
    for _ in range(1000):
        angle = float(rng.uniform(-math.pi, math.pi))
        disk_x = boat_x + d0 * math.cos(angle)
        disk_y = boat_y + d0 * math.sin(angle)
        if math.hypot(disk_x, disk_y) <= _DISK_MAX_RADIUS_M:
            break
    else:  # pragma: no cover - unreachable for registered ranges (boat within 0.17 m of centre, d0 <= 0.2)
        raise ValueError(f"seed {seed}: no disk position within {_DISK_MAX_RADIUS_M} m of the table centre")
    hp = params.pusher_spawn_half_extent_m
    for _ in range(1000):
        pusher_x, pusher_y = (float(v) for v in rng.uniform(-hp, hp, size=2))
        if math.hypot(pusher_x - boat_x, pusher_y - boat_y) >= _PUSHER_MIN_CLEARANCE_M:
            break
    else:  # pragma: no cover
        raise ValueError(f"seed {seed}: no pusher start {_PUSHER_MIN_CLEARANCE_M} m clear of the boat")
    return Spawn(seed, boat_x, boat_y, boat_yaw, disk_x, disk_y, pusher_x, pusher_y)
