"""``pusher``: Gymnasium's MuJoCo ``Pusher-v5`` (a 7-DoF arm pushes a cylinder to a goal) as a probe env.

## Description
The environment is Gymnasium's own (``gymnasium.envs.mujoco.pusher_v5``, unchanged): a 7-joint arm
under torque control, a free-sliding cylinder ("object") and a goal marker, on a table with no gravity.
Each control tick is one ``step`` (5 MuJoCo steps of 10 ms: 50 ms). The probe calls the policy once per
replan, executes ``executed_actions`` of its ``chunk_length`` actions, and ends after ``replans``.

## Action Space
``Box(-1, 1, (7,), float32)``, mapped affinely onto Pusher-v5's ``Box(-2, 2, (7,))`` joint torques (N m):
shoulder pan, shoulder lift, upper-arm roll, elbow flex, forearm roll, wrist flex, wrist roll.

## Observation Space
``observation.state``: Pusher-v5's 23 numbers as float32: joint angles (7), joint velocities (7), the
wrist's ``tips_arm`` body position (3), the object's (3) and the goal's (3), in metres and radians.

## Cameras
``default``: Pusher-v5's own viewpoint (MuJoCo's free camera at Gymnasium's ``default_camera_config``,
4 m from the scene's centre), the one camera a design can register (``observation.cameras``) for a
camera-fed policy; Pusher-v5's model names no cameras of its own.

## Metrics and guards
``progress_final_cm = 100 (d0 - d_final)`` of the object-to-goal centre distance in the table plane;
engagement is any arm-object contact at a tick boundary; success is a final distance within
``success_radius_m``. Guards: ``joint_limit`` (an arm joint reaches a range end, within
``joint_limit_margin_rad``, moving at ``joint_limit_hit_speed_rad_s`` or faster), ``off_table`` (the
object left the registered table region, a square of half-width ``table_region_half_extent_m`` around
the goal), ``away_tail`` and ``swat`` (the object's peak speed above ``analysis.swat_speed_m_s``).

## Starting State
Pusher-v5's ``reset_model`` under ``reset(seed=seed)``: the object uniformly in a region 0.17-0.36 m from
the goal, the arm at rest with joint velocities uniform in +-0.005: a pure function of the seed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pyarrow as pa

from grpo_probe.envs.protocol import (
    EnvSpec,
    Guard,
    TopDownView,
    declared_guards,
    register_shared_guards,
)
from grpo_probe.envs.push_record import push_schema
from grpo_probe.name_registry import Registry

__all__ = [
    "PUSHER_ENV",
    "PUSHER_EXPERT",
    "PUSHER_GUARDS",
    "PUSHER_ID",
    "PusherParams",
    "pusher_guards",
    "pusher_spec",
    "pusher_version",
    "register_pusher_guard",
]

PUSHER_ID = "pusher"
PUSHER_ENV = "grpo_probe.envs.pusher.environment:PusherEnv"
"""The env class, called with the params (named, not imported: building it imports Gymnasium and MuJoCo)."""
PUSHER_EXPERT = "grpo_probe.envs.pusher.expert:PusherExpert"
"""The scripted expert, called with the params and ``noise=``."""
GYM_ID = "Pusher-v5"
OBS_DIM = 23
ACTION_DIMS = 7
TICK_S = 0.05
"""Pusher-v5's ``dt``: frame_skip 5 x timestep 0.01 s (a test pins these to the live environment)."""

CAMERAS = ("default",)
"""What ``render(camera, height, width)`` draws (:data:`grpo_probe.envs.gym_adapter.DEFAULT_CAMERA`; a
test pins these to the live environment, as ``PusherEnv`` does when it is built)."""

STATE_PERTURBATION = "the object's spawn position, shifted along its slide joints"
"""What a replay's ``state`` perturbation moves in the pusher (``PusherEnv.perturb_state``)."""

CHANNELS: tuple[pa.Field, ...] = (
    pa.field("joint_limit_hits", pa.int32(), nullable=False),
    pa.field("object_off_table", pa.bool_(), nullable=False),
    pa.field("max_object_speed_m_s", pa.float64(), nullable=False),
)
"""The pusher's own record columns (after the metrics and traces): its guard channels."""


@dataclass(frozen=True)
class PusherParams:
    """Registered numbers of the pusher experiment (``env.params``); every field is listed in a design."""

    replans: int = 8
    """Policy calls per episode."""
    chunk_length: int = 50
    """Actions per chunk the policy returns."""
    executed_actions: int = 25
    """Actions of each chunk executed before the next replan (one per 50 ms tick)."""
    success_radius_m: float = 0.05
    """Success: the object's centre ends within this distance of the goal's in the table plane."""
    table_region_half_extent_m: float = 0.4
    """The table region: |x - goal x| and |y - goal y| at most this; leaving it trips off_table."""
    joint_limit_margin_rad: float = 0.01
    """An arm joint this close to a range end at a tick boundary is at the limit."""
    joint_limit_hit_speed_rad_s: float = 3.0
    """A joint that reaches a limit moving at least this fast (at the tick boundary before) hits it.

    The scripted expert brings the wrist to its flex limit in most episodes, at up to 2.5 rad/s over 10
    seeds; uniformly random torques reach limits at 6-8 rad/s. Only a hit counts as a guard trip."""

    def __post_init__(self) -> None:
        for name in ("replans", "chunk_length", "executed_actions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"env.params.{name} must be a positive integer, got {value!r}")
        for name in (
            "success_radius_m",
            "table_region_half_extent_m",
            "joint_limit_margin_rad",
            "joint_limit_hit_speed_rad_s",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"env.params.{name} must be a finite number, got {value!r}")
            if value <= 0:
                raise ValueError(f"env.params.{name} must be > 0, got {value!r}")
        if self.executed_actions > self.chunk_length:
            raise ValueError(
                f"env.params.executed_actions ({self.executed_actions}) must not exceed "
                f"env.params.chunk_length ({self.chunk_length})"
            )

    @property
    def tick_s(self) -> float:
        return TICK_S

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], where: str = "env.params") -> PusherParams:
        """Build from a prereg mapping: every field listed (a registered number is never implicit)."""
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(known)})")
        missing = [k for k in known if k not in values]
        if missing:
            raise ValueError(f"{where}: missing field(s) {', '.join(missing)}; a design lists every one")
        return cls(**dict(values))

    def to_dict(self) -> dict[str, Any]:
        """Plain mapping, the form written into preregs and oracle reports."""
        return dataclasses.asdict(self)


def pusher_version() -> str:
    """The environment's version: this adapter's and Gymnasium's (whose Pusher-v5 code it runs)."""
    return f"pusher/1 ({GYM_ID}, gymnasium {metadata.version('gymnasium')})"


PusherGuard = Callable[[PusherParams], Guard]

PUSHER_GUARDS: Registry[PusherGuard] = Registry("pusher guard")
"""The pusher's guards by name, in decision.md's order: each entry builds its :class:`Guard` from the
registered ``env.params``, so its glossary sentence states them."""


def register_pusher_guard(name: str) -> Callable[[PusherGuard], PusherGuard]:
    """Decorator: register ``factory(params) -> Guard`` as the pusher's guard ``name``, after the guards
    registered before it (its place in decision.md); a name taken by another factory is an error."""
    return PUSHER_GUARDS.decorator(name)


def pusher_guards(params: PusherParams) -> tuple[Guard, ...]:
    """The pusher's guard channels, in decision.md's order, worded with the registered numbers."""
    return declared_guards(PUSHER_GUARDS, params)


def pusher_spec(params: PusherParams | None = None) -> EnvSpec:
    """The pusher's spec under ``params`` (no Gymnasium or MuJoCo import)."""
    params = params if params is not None else PusherParams()
    return EnvSpec(
        id=PUSHER_ID,
        version=pusher_version(),
        action_dims=ACTION_DIMS,
        obs_dim=OBS_DIM,
        chunk_length=params.chunk_length,
        executed_actions=params.executed_actions,
        replans=params.replans,
        tick_s=TICK_S,
        episode_schema=push_schema(CHANNELS, effector=True),
        guards=pusher_guards(params),
        view=TopDownView(
            object_xy=("object_x_trace_m", "object_y_trace_m"),
            effector_xy=("effector_x_trace_m", "effector_y_trace_m"),
            target_xy=("goal_x_m", "goal_y_m"),
            target_radius_m=params.success_radius_m,
            names=("object", "fingertip", "goal"),
        ),
        engagement="any arm-object contact",
        state_perturbation=STATE_PERTURBATION,
        cameras=CAMERAS,
    )


# The pusher's guards, in decision.md's order. A new guard goes at the bottom, where it is listed last.


@register_pusher_guard("joint_limit")
def _joint_limit(params: PusherParams) -> Guard:
    return Guard(
        "joint_limit",
        "joint_limit_hits",
        ">",
        "an arm joint ran into a range end (within env.params.joint_limit_margin_rad = "
        f"{params.joint_limit_margin_rad:g} rad of it) at env.params.joint_limit_hit_speed_rad_s = "
        f"{params.joint_limit_hit_speed_rad_s:g} rad/s or faster",
        threshold=0.0,
    )


@register_pusher_guard("off_table")
def _off_table(params: PusherParams) -> Guard:
    return Guard(
        "off_table",
        "object_off_table",
        "true",
        "the object left the table region (env.params.table_region_half_extent_m = "
        f"{params.table_region_half_extent_m:g} m around the goal)",
    )


register_shared_guards(PUSHER_GUARDS, "object", "goal", "max_object_speed_m_s")
