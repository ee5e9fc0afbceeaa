"""Every registered number of the simulator, in one frozen object.

Why: the pre-registration fills this object (its ``sim:`` section) and the lock covers it, so a number
that changes an episode cannot hide in code. Defaults follow the memo: 15 replans of 30 executed actions
out of a 50 x 6 chunk, a 20 ms control tick of 10 physics steps of 2 ms.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ACTION_DIMS", "SimParams"]

ACTION_DIMS = 6
"""x, y, z slides and roll, pitch, yaw hinges of the pusher, in that order."""


@dataclass(frozen=True)
class SimParams:
    """Registered simulator numbers. Lengths in metres, angles in degrees, forces in newtons."""

    physics_timestep_s: float = 0.002
    """MuJoCo ``opt.timestep``."""
    physics_steps_per_tick: int = 10
    """Physics steps per control tick (10 x 2 ms = one 20 ms tick)."""
    replans: int = 15
    """Policy calls per episode."""
    chunk_length: int = 50
    """Actions per chunk the policy returns."""
    executed_actions: int = 30
    """Actions of each chunk executed before the next replan (one per tick)."""
    action_dims: int = ACTION_DIMS
    """Action dimensions; the pusher has exactly six."""
    disk_radius_m: float = 0.04
    """Target disk radius; success = boat centre within it at the end."""
    d0_range_m: tuple[float, float] = (0.12, 0.20)
    """Initial boat-to-disk distance is drawn uniformly from this range."""
    boat_spawn_half_extent_m: float = 0.12
    """Boat spawn x and y are uniform in [-h, h]."""
    pusher_spawn_half_extent_m: float = 0.25
    """Pusher hover start x and y are uniform in [-h, h] (resampled away from the boat)."""
    hover_height_m: float = 0.10
    """Height of the pusher tip above the table at the hover pose (spawn and monitor reset)."""
    workspace_half_extent_m: float = 0.38
    """Pusher tip must stay within |x|, |y| <= this; leaving it is a reset strike."""
    workspace_max_height_m: float = 0.25
    """Pusher tip must stay below this height above the table."""
    table_force_limit_n: float = 25.0
    """Pusher-table normal force above this is a reset strike (pressing into the table)."""
    strike_cap: int = 3
    """The episode ends at this many reset strikes."""
    upright_max_tilt_deg: float = 30.0
    """Boat counts as upright when its up-axis is within this angle of vertical."""
    knocked_off_drop_m: float = 0.03
    """Boat is knocked off when its centre falls this far below its resting height."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first field whose value cannot describe an episode."""
        for name in ("physics_steps_per_tick", "replans", "chunk_length", "executed_actions", "strike_cap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"sim.{name} must be a positive integer, got {value!r}")
        for name in (
            "physics_timestep_s",
            "disk_radius_m",
            "boat_spawn_half_extent_m",
            "pusher_spawn_half_extent_m",
            "hover_height_m",
            "workspace_half_extent_m",
            "workspace_max_height_m",
            "table_force_limit_n",
            "upright_max_tilt_deg",
            "knocked_off_drop_m",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"sim.{name} must be a positive finite number, got {value!r}")
        if self.action_dims != ACTION_DIMS:
            raise ValueError(
                f"sim.action_dims must be {ACTION_DIMS} (the pusher's DoF), got {self.action_dims!r}"
            )
        if self.executed_actions > self.chunk_length:
            raise ValueError(
                f"sim.executed_actions ({self.executed_actions}) must not exceed "
                f"sim.chunk_length ({self.chunk_length})"
            )
        lo, hi = self.d0_range_m
        if not (0 < lo <= hi):
            raise ValueError(f"sim.d0_range_m must satisfy 0 < low <= high, got {self.d0_range_m!r}")
        if self.hover_height_m >= self.workspace_max_height_m:
            raise ValueError("sim.hover_height_m must be below sim.workspace_max_height_m")

    @property
    def tick_s(self) -> float:
        """Control tick length in seconds."""
        return self.physics_timestep_s * self.physics_steps_per_tick

    @property
    def episode_ticks(self) -> int:
        """Ticks in an episode that no strike cap cuts short."""
        return self.replans * self.executed_actions

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], where: str = "sim") -> SimParams:
        """Build from a prereg ``sim:`` mapping; unknown keys are an error naming the key."""
        known = {f.name for f in dataclasses.fields(cls)}
        for key in values:
            if key not in known:
                raise ValueError(f"{where}: unknown field {key!r} (known: {', '.join(sorted(known))})")
        kwargs = dict(values)
        if "d0_range_m" in kwargs:
            kwargs["d0_range_m"] = tuple(kwargs["d0_range_m"])
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """Plain mapping (lists for tuples), the form written into preregs and manifests."""
        out = dataclasses.asdict(self)
        out["d0_range_m"] = list(self.d0_range_m)
        return out
