"""``boat_push``: the reference boat scene (:mod:`grpo_probe.envs.boat`) under the environment protocol.

Why a spec built from the registered numbers rather than read off a running env: the prereg checks
a design's guard reads and chunk geometry while Snakemake parses the rules, before any job imports
MuJoCo. The env itself (:class:`grpo_probe.envs.boat.environment.BoatPush`) is
:class:`grpo_probe.envs.boat.BoatPushEnv`
with this spec attached; its record and its episode table are the ones the boat always wrote.
"""

from __future__ import annotations

from collections.abc import Callable

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.episode_table import EPISODE_SCHEMA
from grpo_probe.envs.protocol import (
    EnvSpec,
    Guard,
    TopDownView,
    declared_guards,
    register_shared_guards,
)
from grpo_probe.name_registry import Registry

__all__ = [
    "BOAT_ENV",
    "BOAT_EXPERT",
    "BOAT_GUARDS",
    "BOAT_ID",
    "BOAT_VERSION",
    "boat_guards",
    "boat_spec",
    "register_boat_guard",
]

BOAT_ID = "boat_push"
BOAT_VERSION = "boat_push/2"
"""Bump when scene.xml, the env's tick or its record change what an episode of a seed measures or shows.
2: round geoms drawn with fewer slices in camera frames (physics and state records unchanged)."""
BOAT_ENV = "grpo_probe.envs.boat.environment:BoatPush"
"""The env class, called with the params (named, not imported: building it imports MuJoCo)."""
BOAT_EXPERT = "grpo_probe.envs.boat.expert:ScriptedExpert"
"""The scripted expert, called with the params and ``noise=``."""

_OBS_DIM = 17
"""``grpo_probe.envs.boat.simulator.OBS_DIM``, restated so the spec loads without MuJoCo (a test pins the
two)."""


BoatGuard = Callable[[SimParams], Guard]

BOAT_GUARDS: Registry[BoatGuard] = Registry("boat guard")
"""The boat's guards by name, in decision.md's order: each entry builds its :class:`Guard` from the
registered ``sim:`` numbers, so its glossary sentence states them."""


def register_boat_guard(name: str) -> Callable[[BoatGuard], BoatGuard]:
    """Decorator: register ``factory(params) -> Guard`` as the boat's guard ``name``, after the guards
    registered before it (its place in decision.md). A name taken by another factory is an error naming
    both: a guard's name is the key of its rates and of its phase-2 penalty."""
    return BOAT_GUARDS.decorator(name)


def boat_guards(params: SimParams) -> tuple[Guard, ...]:
    """The boat's guard channels, in decision.md's order, worded with the registered numbers."""
    return declared_guards(BOAT_GUARDS, params)


def boat_spec(params: SimParams | None = None) -> EnvSpec:
    """The boat's spec under ``params`` (the prereg's ``sim:`` section, or ``env.params`` of boat_push)."""
    params = params if params is not None else SimParams()
    return EnvSpec(
        id=BOAT_ID,
        version=BOAT_VERSION,
        action_dims=params.action_dims,
        obs_dim=_OBS_DIM,
        chunk_length=params.chunk_length,
        executed_actions=params.executed_actions,
        replans=params.replans,
        tick_s=params.tick_s,
        episode_schema=EPISODE_SCHEMA,
        guards=boat_guards(params),
        view=TopDownView(
            object_xy=("boat_x_trace_m", "boat_y_trace_m"),
            effector_xy=("pusher_x_trace_m", "pusher_y_trace_m"),
            target_xy=("disk_x_m", "disk_y_m"),
            target_radius_m=params.disk_radius_m,
            names=("boat", "pusher", "disk"),
        ),
        engagement="any pusher-boat contact",
        cameras=("overhead",),
        state_perturbation="the boat's spawn position, shifted in the table plane",
    )


# The boat's guards, in decision.md's order. A new guard goes at the bottom, where it is listed last.


@register_boat_guard("reset_strike")
def _reset_strike(params: SimParams) -> Guard:
    return Guard(
        "reset_strike",
        "reset_strikes",
        ">",
        "the safety monitor reset the pusher at least once: it pressed into the table above "
        f"sim.table_force_limit_n = {params.table_force_limit_n:g} N or left the workspace "
        f"(sim.workspace_half_extent_m = {params.workspace_half_extent_m:g} m, up to "
        f"sim.workspace_max_height_m = {params.workspace_max_height_m:g} m); "
        f"sim.strike_cap = {params.strike_cap} strikes end the episode",
        threshold=0.0,
    )


@register_boat_guard("knocked_off")
def _knocked_off(params: SimParams) -> Guard:
    return Guard(
        "knocked_off",
        "knocked_off",
        "true",
        f"the boat ended more than sim.knocked_off_drop_m = {params.knocked_off_drop_m:g} m below its "
        "resting height: it left the table",
    )


@register_boat_guard("not_upright")
def _not_upright(params: SimParams) -> Guard:
    return Guard(
        "not_upright",
        "final_upright",
        "false",
        "the boat's up axis ended more than "
        f"sim.upright_max_tilt_deg = {params.upright_max_tilt_deg:g} degrees from vertical",
    )


register_shared_guards(BOAT_GUARDS, "boat", "disk", "max_boat_speed_m_s")
