"""The Gymnasium adapter's params (``env.params`` of a design that names ``make_gymnasium_env``), checked.

Why apart from the adapter: the params are the design's side of the contract, what each key of
``env.params`` means and which combinations are refused, and they are read and checked before any
environment is made (a refusal names the field, never a Gymnasium traceback). Nothing here imports
Gymnasium, MuJoCo or numpy.

A traced point (the object, the goal, the effector) is named in the design by one of several flat keys,
``<role>_body``, ``<role>_site`` or ``<role>_obs_key``, so the YAML reads as it always has; the params
turn them into one typed :class:`PointSource` per role (:meth:`GymnasiumParams.point`), which is all the
adapter looks at.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CALLABLE_NAME", "GOAL_ENV_KEYS", "POINT_PLACES", "GymnasiumParams", "PointSource"]

CALLABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_.]*$")
"""A ``module:callable`` param (a scene function, a wrapper, an expert)."""

GOAL_ENV_KEYS = ("observation", "achieved_goal", "desired_goal")
"""The entries of a goal-conditioned (``GoalEnv``) observation, in the order ``observation.state``
concatenates them when ``env.params.obs_keys`` is left out."""

POINT_PLACES: dict[str, tuple[str, ...]] = {
    "object": ("body", "site", "obs_key"),
    "goal": ("body", "site", "obs_key"),
    "effector": ("body", "site"),
}
"""Where each traced point may be read from: a MuJoCo body, a MuJoCo site, or a Dict observation entry
(the effector is drawn in the top-down figure only, and is never an observation entry)."""


@dataclass(frozen=True)
class PointSource:
    """Where the adapter reads one traced point: ``place`` is ``body``, ``site`` or ``obs_key``, and
    ``name`` the MuJoCo body or site, or the Dict observation entry (whose first two numbers are x, y).

    ``role`` (object, goal, effector) and ``place`` give the design field that named it (:attr:`field`),
    so every refusal about the point names the key the user wrote.
    """

    role: str
    place: str
    name: str

    @property
    def field(self) -> str:
        """The design field that named the point, as ``env.params.goal_site``."""
        return f"env.params.{self.role}_{self.place}"

    @property
    def in_model(self) -> bool:
        """True for a MuJoCo body or site (read from the model), False for an observation entry."""
        return self.place in ("body", "site")


@dataclass(frozen=True)
class GymnasiumParams:
    """How a Gymnasium environment becomes a registered probe environment (``env.params``).

    The object and the goal are each named exactly once: as a MuJoCo body (``*_body``), a MuJoCo site
    (``*_site``) or an entry of a Dict observation (``*_obs_key``, whose first two numbers are x, y);
    :meth:`point` gives the one that is named as a :class:`PointSource`.
    """

    gym_id: str
    """The Gymnasium id, e.g. ``Reacher-v5`` (``module:Name-v0`` imports the module that registers it,
    e.g. ``gymnasium_robotics:PointMaze_UMaze-v3``)."""
    replans: int
    chunk_length: int
    executed_actions: int
    object_body: str | None = None
    """MuJoCo body whose centre is moved toward the goal (its x, y are traced)."""
    object_site: str | None = None
    """MuJoCo site moved toward the goal (instead of ``object_body``)."""
    object_obs_key: str | None = None
    """Dict observation entry that holds the object's x, y first (``achieved_goal``)."""
    goal_body: str | None = None
    goal_site: str | None = None
    """MuJoCo site of the goal (PointMaze's ``target``, Fetch's ``target0``)."""
    goal_obs_key: str | None = None
    """Dict observation entry that holds the goal's x, y first (``desired_goal``)."""
    effector_body: str | None = None
    """MuJoCo body traced as the effector in the top-down figure (optional)."""
    effector_site: str | None = None
    """MuJoCo site traced as the effector (instead of ``effector_body``; optional)."""
    obs_keys: tuple[str, ...] = ()
    """Dict observation entries (each a Box, flattened) concatenated in this order into
    ``observation.state``; left out, a goal-conditioned Dict gives ``observation``, ``achieved_goal``,
    ``desired_goal``. Not for a Box observation, which is the state as it is."""
    distance_info_key: str | None = None
    """When set, the object-to-goal distance is ``distance_scale * info[key]`` (metres) at every tick."""
    distance_scale: float = 1.0
    success_radius_m: float = 0.05
    """Success: the final distance is within this radius."""
    engaged_info_key: str | None = None
    """Engagement: ``info[key]`` true at a tick; without a key, the distance moved by ``engaged_min_m``."""
    engaged_min_m: float = 0.001
    guard_info_keys: tuple[tuple[str, str], ...] = ()
    """(guard name, info key) pairs: the guard trips when ``info[key]`` is true at any tick."""
    gym_kwargs: tuple[tuple[str, Any], ...] = ()
    """Keyword arguments of ``gymnasium.make``. Without ``max_episode_steps`` among them, the time limit
    is the registered episode (``replans * executed_actions`` ticks), not the id's own default."""
    wrappers: tuple[str, ...] = ()
    """``module:callable`` names applied in order around the made environment, each as ``callable(env)``
    (``gymnasium.wrappers:ClipAction``); they stay on for every reset and step."""
    expert: str | None = None
    """``module:callable`` of a scripted expert, called as ``callable(adapter, noise)`` and returning an
    object with ``act(obs, key)`` (``grpo_probe.envs.point_maze:PointMazeExpert``); the workflow trains
    the reference arms on its demos. None: bind every arm to a checkpoint of your own."""
    perturb_joints: tuple[str, ...] = ()
    """Joints a replay's ``state`` perturbation shifts at spawn (slide or hinge: its coordinate; free: its
    x and y), together by ``scale`` in a keyed direction; none: the environment offers no state
    perturbation. Not with ``distance_info_key`` (the spawn distance could not be measured again)."""
    scene: str | None = None
    """``module:callable`` of a scene function (:mod:`grpo_probe.envs.scene`), called as ``scene(env)``:
    it reads the object's and the goal's x, y (and optionally shifts the state for a replay, and says
    whether the object is engaged) where the adapter cannot, in a simulator that is not MuJoCo (gym-pusht)
    or that runs MuJoCo through dm_control (gym-aloha). With it, no ``object_*`` or ``goal_*`` param."""
    tick_s: float | None = None
    """The control period in seconds, when the environment's ``dt`` is not it (gym-pusht's ``dt`` is its
    10 ms physics step; one ``step`` is ten of them); None: ``env.unwrapped.dt``."""
    version: str = "1"
    """The adapter's registration of this environment; bump it when the environment's code changes."""

    def point(self, role: str) -> PointSource | None:
        """Where ``role`` (object, goal, effector) is read; None when no field names it (a scene function
        reads the object and the goal; the effector is optional)."""
        for place in POINT_PLACES[role]:
            name = getattr(self, f"{role}_{place}")
            if name is not None:
                return PointSource(role, place, name)
        return None

    def _named(self, role: str) -> list[str]:
        """The fields that name ``role``'s point (valid params have at most one)."""
        return [f"{role}_{p}" for p in POINT_PLACES[role] if getattr(self, f"{role}_{p}") is not None]

    def __post_init__(self) -> None:
        where = "env.params"
        for name in ("replans", "chunk_length", "executed_actions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{where}.{name} must be a positive integer, got {value!r}")
        if self.executed_actions > self.chunk_length:
            raise ValueError(f"{where}.executed_actions must not exceed {where}.chunk_length")
        for name in ("success_radius_m", "engaged_min_m"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{where}.{name} must be a positive number, got {value!r}")
        if not isinstance(self.gym_id, str) or not self.gym_id:
            raise ValueError(f"{where}.gym_id must be a non-empty string, got {self.gym_id!r}")
        points = [f"{role}_{place}" for role, places in POINT_PLACES.items() for place in places]
        for name in [*points, "distance_info_key", "engaged_info_key"]:
            value = getattr(self, name, None)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{where}.{name} must be a non-empty string, got {value!r}")
        if self.scene is not None and (
            not isinstance(self.scene, str) or not CALLABLE_NAME.match(self.scene)
        ):
            raise ValueError(f"{where}.scene: {self.scene!r} is not a 'module:callable' name")
        for role in ("object", "goal"):
            named = self._named(role)
            if self.scene is not None and named:
                raise ValueError(
                    f"{where}.scene: the scene function reads the object and the goal; leave out "
                    f"{', '.join(f'{where}.{n}' for n in named)}"
                )
            if self.scene is None and len(named) != 1:
                choices = ", ".join(f"{role}_{place}" for place in POINT_PLACES[role])
                got = f"got {', '.join(named)}" if named else "got none"
                raise ValueError(
                    f"{where}: name the {role} exactly once, as one of {choices} ({got}), or name a scene "
                    f"function that reads the object and the goal ({where}.scene)"
                )
        if len(self._named("effector")) > 1:
            raise ValueError(f"{where}: name the effector once, as effector_body or effector_site (got both)")
        if self.scene is not None and self._named("effector"):
            raise ValueError(
                f"{where}.scene: the scene function traces the effector (its traces_effector and "
                "positions().effector_xy); leave out effector_body and effector_site"
            )
        if self.scene is not None and self.perturb_joints:
            raise ValueError(
                f"{where}.perturb_joints: with a scene function, a replay's state shift is the scene's "
                "perturb(rng, scale); leave perturb_joints out"
            )
        if self.tick_s is not None and (
            isinstance(self.tick_s, bool) or not isinstance(self.tick_s, (int, float)) or not self.tick_s > 0
        ):
            raise ValueError(f"{where}.tick_s must be a positive number of seconds, got {self.tick_s!r}")
        if len(set(self.obs_keys)) != len(self.obs_keys) or not all(
            isinstance(k, str) and k for k in self.obs_keys
        ):
            raise ValueError(f"{where}.obs_keys must be distinct entry names, got {list(self.obs_keys)!r}")
        for name, paths in (("wrappers", self.wrappers), ("expert", (self.expert,) if self.expert else ())):
            for path in paths:
                if not isinstance(path, str) or not CALLABLE_NAME.match(path):
                    raise ValueError(f"{where}.{name}: {path!r} is not a 'module:callable' name")
        if isinstance(self.distance_scale, bool) or not isinstance(self.distance_scale, (int, float)):
            raise ValueError(f"{where}.distance_scale must be a number, got {self.distance_scale!r}")
        if self.perturb_joints and self.distance_info_key is not None:
            raise ValueError(
                f"{where}.perturb_joints: a state perturbation needs the spawn distance measured from "
                "the object and the goal, not from distance_info_key"
            )

    @property
    def episode_ticks(self) -> int:
        """Ticks in an episode that nothing ends early: the default time limit."""
        return self.replans * self.executed_actions

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], where: str = "env.params") -> GymnasiumParams:
        """Build from a prereg mapping; an unknown or missing key is an error naming it."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(known)})")
        kwargs = dict(values)
        for name in ("guard_info_keys", "gym_kwargs"):
            if name in kwargs:
                mapping = kwargs[name]
                if not isinstance(mapping, Mapping):
                    raise ValueError(f"{where}.{name} must be a mapping, got {type(mapping).__name__}")
                kwargs[name] = tuple(sorted(mapping.items()))
        for name, what in (
            ("perturb_joints", "joint names"),
            ("obs_keys", "observation entry names"),
            ("wrappers", "'module:callable' names"),
        ):
            if name in kwargs:
                names = kwargs[name]
                if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
                    raise ValueError(f"{where}.{name} must be a list of {what}, got {names!r}")
                kwargs[name] = tuple(names)
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise ValueError(f"{where}: {exc}") from None
