"""Any Gymnasium MuJoCo environment under the environment protocol, goal-conditioned ones included.

Why an adapter and not a port: the probe should measure a simulator as its authors ship it. The adapter
steps the environment through Gymnasium's own ``reset(seed=)`` and ``step`` (one ``step`` per control
tick), through every wrapper ``gymnasium.make`` (or a factory of yours) put around it, maps the heads'
normalized actions [-1, 1] affinely onto the environment's ``Box`` action bounds, and measures the
registered metric from what the environment exposes: the distance in the table plane (x, y) from the
object to the goal, each a named MuJoCo body, a named MuJoCo site, or an entry of a ``Dict``
observation (``achieved_goal``, ``desired_goal``), or, when registered, the distance an ``info`` key
reports. Guard channels are ``info`` keys that trip when true at any tick; a subclass (``pusher``) adds
channels it reads from the MuJoCo state.

Observations: a 1-D ``Box`` observation is ``observation.state`` as it is. A ``Dict`` observation (the
goal-conditioned families of Gymnasium-Robotics: Fetch, the mazes, the Shadow hand, with ``observation``,
``achieved_goal`` and ``desired_goal``) becomes ``observation.state`` by concatenating the registered
entries in the registered order (``env.params.obs_keys``; :attr:`GymnasiumAdapter.state_layout` says
which slice holds which entry). The goal is part of the state because a policy must see it to reach it,
and ``observation.state`` is the one numeric key the rollout engine, the designs and the reference heads
carry (cameras and the task string are the others).

Any simulator: where the adapter cannot read the object and the goal itself (a simulator that is not
MuJoCo, as gym-pusht's pymunk, or MuJoCo driven through dm_control, as gym-aloha's), a scene function
of the lab's (``env.params.scene``, :mod:`grpo_probe.envs.scene`) reads them from the live environment,
and may shift the state for a replay and say when the object is engaged. A param that needs a MuJoCo
model (a body, a site, a joint to perturb) on an environment without one is refused, the message saying
what to provide instead; ``Dict`` observation entries need no model.

Wrappers stay on: the adapter resets and steps the outermost environment, so an observation wrapper, a
time limit or an action wrapper acts exactly as in training. It reaches into ``.unwrapped`` (and the
MuJoCo environment that one drives, as PointMaze drives ``point_env``) only to read bodies and sites
and to shift the state for a replay's ``state`` perturbation.

Determinism comes from the environment: Gymnasium seeds its ``np_random`` from ``reset(seed=)``, and
MuJoCo steps bit-identically on one machine, so the spawn is a pure function of the seed. An
environment that reads any other randomness is caught by the parallel oracle.

Cameras: a camera-fed policy reads ``observation.images.<camera>``, so the adapter renders the scene's
MuJoCo cameras by name (every named ``<camera>`` of the model, in model order) and the environment's
own viewpoint as the camera ``default`` (MuJoCo's free camera with the environment's
``default_camera_config``, the view Gymnasium's ``render()`` opens on), at the size the design
registers (``observation.cameras``), with :func:`grpo_probe.envs.gl.make_renderer` offscreen on the CPU,
as the boat scene renders its overhead camera. ``spec.cameras`` lists them; a design that registers
another name is refused at ``prereg check`` (built-ins) or before the first rollout. The free camera's
pose is fixed by the model alone: Gymnasium centres its viewer on the geoms at the first ``render()``
call, which would make a frame depend on when rendering started. Frames are a pure function of the
MuJoCo state (shadows and multisampling off), so the oracles' frame digests match across processes.
Nothing is drawn, and no GL context made, unless a policy reads a camera; ``MUJOCO_GL`` is chosen by
:mod:`grpo_probe.envs.gl` (EGL when present) before MuJoCo is imported.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from grpo_probe.envs.episode_table import canonical_row_bytes
from grpo_probe.envs.gl import free_camera, make_renderer
from grpo_probe.envs.protocol import (
    METRIC_COLUMNS,
    EnvSpec,
    Expert,
    Guard,
    TopDownView,
    away_tail_guard,
    check_chunk,
    normalized_to_bounds,
)
from grpo_probe.envs.scene import SCENE_DOCS, SCENE_FIELD, SCENE_SIGNATURE, BoundScene, ScenePositions

__all__ = [
    "DEFAULT_CAMERA",
    "GOAL_ENV_KEYS",
    "GymnasiumAdapter",
    "GymnasiumParams",
    "PushRecord",
    "make_gymnasium_env",
    "push_schema",
]

_F64_LIST = pa.list_(pa.float64())
_CALLABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_.]*$")

GOAL_ENV_KEYS = ("observation", "achieved_goal", "desired_goal")
"""The entries of a goal-conditioned (``GoalEnv``) observation, in the order ``observation.state``
concatenates them when ``env.params.obs_keys`` is left out."""

DEFAULT_CAMERA = "default"
"""The camera name of the environment's own viewpoint (MuJoCo's free camera placed by the environment's
``default_camera_config``); a named MuJoCo camera of the same name takes precedence."""

_PLACES = ("body", "site", "obs_key")
"""Where a traced point may come from: a MuJoCo body, a MuJoCo site, or a Dict observation entry."""


@dataclass(frozen=True)
class GymnasiumParams:
    """How a Gymnasium environment becomes a registered probe environment (``env.params``).

    The object and the goal are each named exactly once: as a MuJoCo body (``*_body``), a MuJoCo site
    (``*_site``) or an entry of a Dict observation (``*_obs_key``, whose first two numbers are x, y).
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
        optional = [f"{role}_{place}" for role in ("object", "goal", "effector") for place in _PLACES]
        for name in [n for n in optional if n != "effector_obs_key"] + [
            "distance_info_key",
            "engaged_info_key",
        ]:
            value = getattr(self, name, None)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{where}.{name} must be a non-empty string, got {value!r}")
        if self.scene is not None and (not isinstance(self.scene, str) or not _CALLABLE.match(self.scene)):
            raise ValueError(f"{where}.scene: {self.scene!r} is not a 'module:callable' name")
        for role in ("object", "goal"):
            named = [f"{role}_{place}" for place in _PLACES if getattr(self, f"{role}_{place}") is not None]
            if self.scene is not None and named:
                raise ValueError(
                    f"{where}.scene: the scene function reads the object and the goal; leave out "
                    f"{', '.join(f'{where}.{n}' for n in named)}"
                )
            if self.scene is None and len(named) != 1:
                choices = ", ".join(f"{role}_{place}" for place in _PLACES)
                got = f"got {', '.join(named)}" if named else "got none"
                raise ValueError(
                    f"{where}: name the {role} exactly once, as one of {choices} ({got}), or name a scene "
                    f"function that reads the object and the goal ({where}.scene)"
                )
        if self.effector_body is not None and self.effector_site is not None:
            raise ValueError(f"{where}: name the effector once, as effector_body or effector_site (got both)")
        if self.scene is not None and (self.effector_body is not None or self.effector_site is not None):
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
                if not isinstance(path, str) or not _CALLABLE.match(path):
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


@dataclass(frozen=True)
class _Point:
    """Where one traced point is read: ``kind`` body | site | obs_key, and its name; ``field`` names the
    param that registered it (for errors)."""

    kind: str
    name: str
    field: str


def _point(params: GymnasiumParams, role: str) -> _Point | None:
    for place in _PLACES:
        name = getattr(params, f"{role}_{place}", None)
        if name is not None:
            return _Point(place, name, f"env.params.{role}_{place}")
    return None


@dataclass(frozen=True)
class PushRecord:
    """One episode of an object moved toward a goal in the table plane, as the protocol records it.

    Distances in cm unless the name says otherwise; ticks count from 1; traces hold index 0 = spawn.
    ``channels`` are the environment's own columns (its guard channels), in its schema's order.
    """

    seed: int
    n_ticks: int
    d0_cm: float
    d_final_cm: float
    progress_final_cm: float
    """100 * (d0 - d_final) in metres: how far the object moved toward the goal."""
    best_point_cm: float
    distance_trace_cm: tuple[float, ...]
    contact: bool
    first_contact_tick: int | None
    success: bool
    object_x_trace_m: tuple[float, ...]
    object_y_trace_m: tuple[float, ...]
    goal_x_m: float
    goal_y_m: float
    effector_x_trace_m: tuple[float, ...] | None = None
    effector_y_trace_m: tuple[float, ...] | None = None
    channels: tuple[tuple[str, Any], ...] = field(default=())

    def to_row(self) -> dict[str, Any]:
        """Column name -> value, lists for traces (the episode table's row form)."""
        row: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "channels":
                row.update(value)
            elif f.name.startswith("effector_") and value is None:
                continue
            else:
                row[f.name] = list(value) if isinstance(value, tuple) else value
        return row

    def canonical_bytes(self) -> bytes:
        """Exact byte form of the row (:func:`grpo_probe.envs.boat.record.canonical_row_bytes`)."""
        return canonical_row_bytes(self.to_row())


def push_schema(channels: tuple[pa.Field, ...], effector: bool) -> pa.Schema:
    """The episode schema of a :class:`PushRecord`: the metrics, the traces, then the channels."""
    traces = [pa.field("object_x_trace_m", _F64_LIST, False), pa.field("object_y_trace_m", _F64_LIST, False)]
    if effector:
        traces += [
            pa.field("effector_x_trace_m", _F64_LIST, False),
            pa.field("effector_y_trace_m", _F64_LIST, False),
        ]
    goal = [pa.field("goal_x_m", pa.float64(), False), pa.field("goal_y_m", pa.float64(), False)]
    return pa.schema([*METRIC_COLUMNS, *traces, *goal, *channels])


def _import_gymnasium() -> Any:
    try:
        import gymnasium
    except ImportError as exc:  # pragma: no cover - gymnasium is a dependency of the package
        raise ImportError(
            f"the Gymnasium adapter needs gymnasium (pip install 'gymnasium>=1.0,<2'): {exc}"
        ) from exc
    return gymnasium


def _load_callable(path: str, where: str) -> Callable[..., Any]:
    """The callable a ``module:name`` param names; an error names the field and what went wrong."""
    module_name, _, attr = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ValueError(
            f"{where}: cannot import module {module_name!r} of {path!r} ({type(exc).__name__}: {exc})"
        ) from exc
    for part in attr.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        raise ValueError(f"{where}: module {module_name!r} has no callable {attr!r}")
    return target


def _distribution_version(module: str) -> str | None:
    """``name version`` of the installed distribution that ships top-level ``module``, if one does."""
    for name in (module, module.replace("_", "-")):
        try:
            return f"{name.replace('_', '-')} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return None


def _wrapper_chain(env: Any) -> list[Any]:
    """The environments from the outermost wrapper inwards, the unwrapped one last."""
    chain = [env]
    while hasattr(chain[-1], "env") and chain[-1] is not chain[-1].unwrapped:
        chain.append(chain[-1].env)
    return chain


def _remove_generated_scene(unwrapped: Any) -> None:
    """Remove the scene file a Gymnasium-Robotics maze wrote for itself, once its model is built.

    Why: the mazes (PointMaze and AntMaze alike) write their generated MJCF to the system's temporary
    folder as ``ant_maze<time>.xml`` (``tmp_xml_file_path``) and never remove it, so every rollout job
    and every environment made in a process would leave a file behind. MuJoCo compiles the model from it
    while the environment is made and nothing reads it again (a reset moves the goal and the ball within
    the built model). Only a file of that name, directly in the temporary folder, is removed.
    """
    path = getattr(unwrapped, "tmp_xml_file_path", None)
    if not isinstance(path, str):
        return
    scene = Path(path)
    written_by_the_maze = scene.name.startswith("ant_maze") and scene.suffix == ".xml"
    if written_by_the_maze and scene.parent == Path(tempfile.gettempdir()):
        scene.unlink(missing_ok=True)


def _simulator(unwrapped: Any) -> Any | None:
    """The object holding the MuJoCo model and data (and ``set_state``): the unwrapped environment, or
    the MuJoCo environment it drives (PointMaze's ``point_env``, AntMaze's ``ant_env``); None when there
    is none the adapter can read."""

    def simulates(obj: Any) -> bool:
        return all(hasattr(obj, name) for name in ("model", "data", "set_state"))

    if simulates(unwrapped):
        return unwrapped
    for value in vars(unwrapped).values():
        if simulates(value):
            return value
    if hasattr(unwrapped, "model") and hasattr(unwrapped, "data"):
        return unwrapped
    return None


def _dm_control_physics(unwrapped: Any) -> bool:
    """True when the environment (or an object it holds) has a dm_control-style ``physics``: MuJoCo run
    through dm_control, as gym-aloha does, whose model and data the adapter does not reach."""
    if hasattr(unwrapped, "physics"):
        return True
    return any(hasattr(value, "physics") for value in vars(unwrapped).values())


def _unreadable(unwrapped: Any, gym_id: str) -> ValueError:
    """The refusal for an environment the adapter cannot read: what it is, and exactly what to provide."""
    kind = type(unwrapped).__name__
    if _dm_control_physics(unwrapped):
        what = (
            f"{kind} runs MuJoCo through dm_control (its physics object), whose bodies and joints the "
            "adapter does not look up by name"
        )
    else:
        module = type(unwrapped).__module__.split(".")[0]
        what = (
            f"{kind} (module {module}) is not a MuJoCo environment, so the adapter has no bodies, sites "
            "or joints to look up by name"
        )
    return ValueError(
        f"{gym_id}: env.params.gym_id: {what}. Bind it through a scene function of yours: "
        f'env.params.scene: "module:callable", {SCENE_SIGNATURE} (see {SCENE_DOCS})'
    )


class GymnasiumAdapter:
    """A Gymnasium environment stepped in action chunks, measured as the protocol asks.

    ``env``: an environment you built (wrapped as you like) instead of ``gymnasium.make(params.gym_id)``;
    ``params.gym_id`` still names it in messages and in the version, and ``params.wrappers`` go around
    it. Subclasses add guard channels from the simulator state by overriding :meth:`_channel_fields`,
    :meth:`_start_channels`, :meth:`_tick_channels` and :meth:`_channel_values`.

    Attributes: ``wrapped`` is the outermost environment, the one reset and stepped; ``env`` its
    ``.unwrapped`` (kept under this name for subclasses that read ``env.model`` and ``env.data``).
    """

    def __init__(self, params: GymnasiumParams, env_id: str | None = None, env: Any | None = None) -> None:
        gymnasium = _import_gymnasium()
        self.params = params
        self.wrapped = self._make(params, env)
        self.env = self.wrapped.unwrapped
        _remove_generated_scene(self.env)
        self._sim = _simulator(self.env)
        self._scene: BoundScene | None = None
        if params.scene is not None:
            self._scene = BoundScene(_load_callable(params.scene, SCENE_FIELD), params.scene, self.wrapped)
        self._positions: ScenePositions | None = None
        space = self.wrapped.action_space
        if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"{params.gym_id}: the adapter needs a 1-D Box action space, got {space}")
        self._low = space.low.astype(np.float64)
        self._high = space.high.astype(np.float64)
        if not (np.isfinite(self._low).all() and np.isfinite(self._high).all()):
            raise ValueError(f"{params.gym_id}: the action space must be bounded to map [-1, 1] onto it")
        self._action_dtype = space.dtype
        self.state_layout = self._layout(gymnasium, self.wrapped.observation_space)
        self._points = {role: _point(params, role) for role in ("object", "goal", "effector")}
        self._check_points(gymnasium, self.wrapped.observation_space)
        if self._scene is not None and self._scene.offers_engagement and params.engaged_info_key is not None:
            raise ValueError(
                f"{params.gym_id}: env.params.engaged_info_key: the scene function {params.scene!r} says "
                "when the object is engaged (its engaged(info)); name engagement once"
            )
        self._perturb_qpos = self._perturbed_coordinates(params)
        if params.expert is not None:
            self._expert_factory = _load_callable(params.expert, "env.params.expert")
            self.expert = self._make_expert
        channel_fields = tuple(pa.field(name, pa.bool_(), False) for name, _ in params.guard_info_keys)
        channel_fields += self._channel_fields()
        self._channel_names = tuple(f.name for f in channel_fields)
        effector = self._traces_effector
        self.spec = EnvSpec(
            id=env_id or params.gym_id,
            version=self._version(),
            action_dims=int(space.shape[0]),
            obs_dim=self.state_layout[-1][2],
            chunk_length=params.chunk_length,
            executed_actions=params.executed_actions,
            replans=params.replans,
            tick_s=float(params.tick_s if params.tick_s is not None else self._dt()),
            episode_schema=push_schema(channel_fields, effector),
            guards=self._guards(),
            view=TopDownView(
                object_xy=("object_x_trace_m", "object_y_trace_m"),
                effector_xy=("effector_x_trace_m", "effector_y_trace_m") if effector else None,
                target_xy=("goal_x_m", "goal_y_m"),
                target_radius_m=params.success_radius_m,
                names=("object", "effector", "goal"),
            ),
            engagement=self._engagement_text(),
            state_perturbation=self._state_perturbation_text(),
            cameras=self._camera_names(),
            state_entries=() if self.state_layout[0][0] == "" else self.state_layout,
        )
        self._renderers: dict[tuple[int, int], Any] = {}
        self._free_camera: Any = None
        self._seed: int | None = None
        self._ended = False
        self._obs: Any = None
        self.replan_index = 0

    # -- construction ----------------------------------------------------------------------------------
    @staticmethod
    def _make(params: GymnasiumParams, env: Any | None) -> Any:
        """The environment to step: ``env``, or ``gymnasium.make`` with the registered time limit, then
        ``params.wrappers`` around it in order."""
        gymnasium = _import_gymnasium()
        if env is None:
            kwargs = dict(params.gym_kwargs)
            kwargs.setdefault("max_episode_steps", params.episode_ticks)
            try:
                env = gymnasium.make(params.gym_id, **kwargs)
            except ImportError as exc:
                raise ValueError(
                    f"{params.gym_id}: env.params.gym_id: cannot import the module that registers it "
                    f"({exc}); install it (Gymnasium-Robotics: pip install 'grpo-probe[robotics]')"
                ) from exc
            except gymnasium.error.Error as exc:
                raise ValueError(
                    f"{params.gym_id}: env.params.gym_id: Gymnasium cannot make it ({type(exc).__name__}: "
                    f"{exc}); an id another package registers is named with its module, as "
                    "'gymnasium_robotics:PointMaze_UMaze-v3' (pip install 'grpo-probe[robotics]')"
                ) from exc
        elif params.gym_kwargs:
            raise ValueError(
                f"{params.gym_id}: env.params.gym_kwargs: the environment was built by your factory, "
                "so there is no gymnasium.make to pass them to"
            )
        for i, path in enumerate(params.wrappers):
            env = _load_callable(path, f"env.params.wrappers[{i}]")(env)
        return env

    def _layout(self, gymnasium: Any, space: Any) -> tuple[tuple[str, int, int], ...]:
        """(entry, start, stop) of each Dict entry in ``observation.state``; one ``("", 0, n)`` for a Box.

        An observation space the adapter cannot read as one vector is an error naming the field.
        """
        gym_id, keys = self.params.gym_id, self.params.obs_keys
        if isinstance(space, gymnasium.spaces.Box):
            if len(space.shape) != 1:
                raise ValueError(
                    f"{gym_id}: env.params.gym_id: the observation space is {space}; the adapter reads a "
                    "1-D Box, or a Dict of Box entries (env.params.obs_keys); flatten it with a wrapper "
                    "(env.params.wrappers: [gymnasium.wrappers:FlattenObservation])"
                )
            if keys:
                raise ValueError(
                    f"{gym_id}: env.params.obs_keys: the observation space is a Box, not a Dict; "
                    "leave obs_keys out"
                )
            return (("", 0, int(space.shape[0])),)
        if not isinstance(space, gymnasium.spaces.Dict):
            raise ValueError(
                f"{gym_id}: env.params.gym_id: the observation space is {space}; the adapter reads a "
                "1-D Box, or a Dict of Box entries (env.params.obs_keys); wrap it into one "
                "(env.params.wrappers)"
            )
        entries = list(space.spaces)
        if not keys:
            if set(entries) != set(GOAL_ENV_KEYS):
                raise ValueError(
                    f"{gym_id}: env.params.obs_keys: the observation space is a Dict with entries "
                    f"{', '.join(entries)}; list the ones observation.state concatenates, in order"
                )
            keys = GOAL_ENV_KEYS
        layout, start = [], 0
        for i, key in enumerate(keys):
            if key not in space.spaces:
                raise ValueError(
                    f"{gym_id}: env.params.obs_keys[{i}]: the observation Dict has no entry {key!r} "
                    f"(its entries: {', '.join(entries)})"
                )
            entry = space.spaces[key]
            if not isinstance(entry, gymnasium.spaces.Box):
                raise ValueError(
                    f"{gym_id}: env.params.obs_keys[{i}]: observation entry {key!r} is {entry}; "
                    "observation.state concatenates Box entries only"
                )
            size = int(np.prod(entry.shape, dtype=np.int64))
            layout.append((key, start, start + size))
            start += size
        return tuple(layout)

    def _check_points(self, gymnasium: Any, space: Any) -> None:
        """Each named body, site or observation entry exists; else an error naming the field."""
        for point in self._points.values():
            if point is None:
                continue
            if point.kind in ("body", "site"):
                if self._sim is None:
                    raise _unreadable(self.env, self.params.gym_id)
                try:
                    getattr(self._sim.model, point.kind)(point.name)
                except KeyError:
                    raise ValueError(
                        f"{self.params.gym_id}: no MuJoCo {point.kind} named {point.name!r} ({point.field})"
                    ) from None
                continue
            if not isinstance(space, gymnasium.spaces.Dict):
                raise ValueError(
                    f"{self.params.gym_id}: {point.field}: the observation space is {space}, not a Dict "
                    "with entries to read"
                )
            entry = space.spaces.get(point.name)
            if entry is None:
                raise ValueError(
                    f"{self.params.gym_id}: {point.field}: the observation Dict has no entry {point.name!r} "
                    f"(its entries: {', '.join(space.spaces)})"
                )
            if not isinstance(entry, gymnasium.spaces.Box) or int(np.prod(entry.shape)) < 2:
                raise ValueError(
                    f"{self.params.gym_id}: {point.field}: observation entry {point.name!r} is {entry}; "
                    "a position needs a Box of at least 2 numbers (x, y first)"
                )

    def _perturbed_coordinates(self, params: GymnasiumParams) -> np.ndarray:
        """qpos addresses a state perturbation moves; an unknown or a ball joint is an error naming it."""
        addresses: list[int] = []
        if not params.perturb_joints:
            return np.array(addresses, dtype=np.intp)
        if self._sim is None:
            raise _unreadable(self.env, params.gym_id)
        model = self._sim.model
        for name in params.perturb_joints:
            try:
                joint = model.joint(name)
            except KeyError:
                raise ValueError(
                    f"{params.gym_id}: no MuJoCo joint named {name!r} (env.params.perturb_joints)"
                ) from None
            kind, start = int(model.jnt_type[joint.id]), int(model.jnt_qposadr[joint.id])
            if kind == 0:  # mjJNT_FREE: x and y of its position
                addresses += [start, start + 1]
            elif kind in (2, 3):  # mjJNT_SLIDE, mjJNT_HINGE: their one coordinate
                addresses.append(start)
            else:
                raise ValueError(
                    f"{params.gym_id}: joint {name!r} is a ball joint; env.params.perturb_joints takes "
                    "slide, hinge or free joints"
                )
        if addresses and not self._observes_state_directly():
            raise ValueError(
                f"{params.gym_id}: env.params.perturb_joints: {type(self.env).__name__} builds its "
                "observation from its step's results, so the adapter cannot observe a shifted spawn; "
                "leave perturb_joints out (replays can perturb actions)"
            )
        return np.array(addresses, dtype=np.intp)

    def _observes_state_directly(self) -> bool:
        """True when the unwrapped environment simulates itself and ``_get_obs()`` observes its state."""
        get_obs = getattr(self.env, "_get_obs", None)
        if self._sim is not self.env or not callable(get_obs):
            return False
        required = [
            p
            for p in inspect.signature(get_obs).parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        return not required

    def _camera_names(self) -> tuple[str, ...]:
        """The cameras :meth:`render` draws: the model's named cameras in model order, then ``default``;
        none for an environment without a MuJoCo model the adapter reads (one bound by a scene function)."""
        if self._sim is None:
            return ()
        model = self._sim.model
        named = [model.camera(i).name for i in range(int(model.ncam))]
        names = [n for n in named if n]
        return (*names, *(() if DEFAULT_CAMERA in names else (DEFAULT_CAMERA,)))

    @property
    def model(self) -> Any:
        """The MuJoCo model the environment steps (for reading bodies, sites, joints and dynamics)."""
        return self._simulation().model

    @property
    def data(self) -> Any:
        """The MuJoCo data the environment steps (read it; change it only through the protocol)."""
        return self._simulation().data

    def _simulation(self) -> Any:
        if self._sim is None:
            raise AttributeError(
                f"{self.params.gym_id}: the environment has no MuJoCo model and data the adapter reads "
                f"(it is bound through {SCENE_FIELD})"
            )
        return self._sim

    @property
    def _traces_effector(self) -> bool:
        """Whether records carry the effector's traces (a named body or site, or the scene's)."""
        if self._scene is not None:
            return self._scene.traces_effector
        return self._points["effector"] is not None

    def _dt(self) -> float:
        """The environment's own control period: ``dt`` of the unwrapped environment or its simulator."""
        return float(getattr(self.env, "dt", getattr(self._sim, "dt", math.nan)))

    @property
    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The environment's action bounds (low, high) that [-1, 1] is mapped onto."""
        return self._low.copy(), self._high.copy()

    # -- what a subclass may add -----------------------------------------------------------------------
    def _version(self) -> str:
        """The id and registration version, the packages whose code steps it, and the wrapper chain."""
        gymnasium = _import_gymnasium()
        packages = [f"gymnasium {gymnasium.__version__}"]
        module = type(self.env).__module__.split(".")[0]
        if module not in ("gymnasium", "grpo_probe"):
            found = _distribution_version(module)
            packages.append(found if found is not None else module)
        wrappers = [type(w).__name__ for w in _wrapper_chain(self.wrapped)[:-1]]
        chain = f"; wrappers {' > '.join(wrappers)}" if wrappers else ""
        scene = f"; scene {self.params.scene}" if self.params.scene is not None else ""
        return f"{self.params.gym_id}/{self.params.version} ({', '.join(packages)}{chain}{scene})"

    def _state_perturbation_text(self) -> str | None:
        if self._scene is not None:
            return self._scene.state_perturbation
        joints = self.params.perturb_joints
        return f"joint(s) {', '.join(joints)} shifted at spawn" if joints else None

    def _engagement_text(self) -> str:
        if self._scene is not None and self._scene.offers_engagement:
            return f"the scene function {self.params.scene} says the object is engaged at some tick"
        if self.params.engaged_info_key is not None:
            return f"info[{self.params.engaged_info_key!r}] true at some tick"
        return f"the object-to-goal distance changed by more than {self.params.engaged_min_m:g} m"

    def _channel_fields(self) -> tuple[pa.Field, ...]:
        return ()

    def _guards(self) -> tuple[Guard, ...]:
        """``away_tail``, then one guard per registered ``info`` key."""
        return (
            away_tail_guard("object", "goal"),
            *(
                Guard(name, name, "true", f"info[{key!r}] was true at some tick")
                for name, key in self.params.guard_info_keys
            ),
        )

    def _start_channels(self) -> None:
        """Called after each reset."""

    def _tick_channels(self, tick: int, info: Mapping[str, Any]) -> None:
        """Called after each tick (``tick`` counts from 1)."""

    def _channel_values(self) -> dict[str, Any]:
        return {}

    def _engaged(self, info: Mapping[str, Any], distance: float) -> bool:
        if self._scene is not None and self._scene.offers_engagement:
            return self._scene.engaged(info)
        if self.params.engaged_info_key is not None:
            return bool(info.get(self.params.engaged_info_key, False))
        return abs(distance - self._trace[0]) > self.params.engaged_min_m

    def _make_expert(self, noise: float) -> Expert:
        """The scripted expert ``env.params.expert`` names, for this environment (``env.expert(noise)``)."""
        return self._expert_factory(self, noise)

    # -- the protocol ----------------------------------------------------------------------------------
    def _xy(self, body: str) -> tuple[float, float]:
        """A MuJoCo body's centre in the table plane (kept for subclasses that trace bodies by name)."""
        pos = self._simulation().data.body(body).xpos
        return float(pos[0]), float(pos[1])

    def _read_scene(self) -> None:
        """Ask the scene function where things are now (after a reset, a tick or a state shift)."""
        if self._scene is not None:
            self._positions = self._scene.positions()

    def _point_xy(self, role: str) -> tuple[float, float]:
        """The object's, the goal's or the effector's x, y from where the params say it is read."""
        if self._scene is not None:
            assert self._positions is not None
            xy = getattr(self._positions, f"{role}_xy")
            assert xy is not None
            return xy
        point = self._points[role]
        assert point is not None
        if point.kind == "obs_key":
            pos = np.asarray(self._obs[point.name], dtype=np.float64).ravel()
        else:
            pos = getattr(self._sim.data, point.kind)(point.name).xpos
        return float(pos[0]), float(pos[1])

    def _state(self, obs: Any) -> np.ndarray:
        """``observation.state`` of an observation: the Box as float32, or the Dict entries concatenated."""
        if self.state_layout[0][0] == "":
            return np.asarray(obs, dtype=np.float32)
        parts = []
        for key, start, stop in self.state_layout:
            part = np.asarray(obs[key], dtype=np.float32).ravel()
            if part.size != stop - start:
                raise ValueError(
                    f"{self.spec.id} seed {self._seed}: observation entry {key!r} holds {part.size} numbers, "
                    f"its observation space {stop - start}"
                )
            parts.append(part)
        return np.concatenate(parts)

    def _distance(self, info: Mapping[str, Any]) -> float:
        key = self.params.distance_info_key
        if key is not None:
            if key not in info:
                raise ValueError(
                    f"{self.params.gym_id}: info has no key {key!r} (env.params.distance_info_key)"
                )
            return float(self.params.distance_scale * float(info[key]))
        (ox, oy), (gx, gy) = self._point_xy("object"), self._point_xy("goal")
        return math.hypot(ox - gx, oy - gy)

    def reset(self, seed: int) -> np.ndarray:
        """Start the episode of ``seed`` (Gymnasium's ``reset(seed=seed)``); the first observation."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        obs, info = self.wrapped.reset(seed=int(seed))
        self._obs = obs
        self._seed = int(seed)
        self.replan_index = 0
        self._tick = 0
        self._ended = False
        self._first_contact: int | None = None
        key = self.params.distance_info_key
        if key is not None and key not in info:
            raise ValueError(
                f"{self.params.gym_id}: reset() returned no info[{key!r}], so the distance at spawn cannot "
                "come from env.params.distance_info_key; measure it from the object and the goal instead"
            )
        self._start_episode(info)
        return self._state(obs)

    def _start_episode(self, info: Mapping[str, Any]) -> None:
        """Measure the spawn: the distance, the traces' first points and the channels' start."""
        self._read_scene()
        self._trace = [self._distance(info)]
        self._objects: list[tuple[float, float]] = [self._point_xy("object")]
        self._effector: list[tuple[float, float]] = (
            [self._point_xy("effector")] if self._traces_effector else []
        )
        self._info_guards = {name: False for name, _ in self.params.guard_info_keys}
        self._start_channels()

    def perturb_state(self, rng: np.random.Generator, scale: float) -> np.ndarray:
        """Shift ``env.params.perturb_joints`` by ``scale`` together, in a direction drawn from ``rng``.

        Called right after :meth:`reset`: the spawn is measured again from the shifted state (Gymnasium's
        ``set_state`` runs ``mj_forward``), and the new first observation is returned: the unwrapped
        environment's ``_get_obs()`` through every observation wrapper's ``observation`` (a wrapper that
        changes observations elsewhere than there is not applied here). A zero ``scale`` moves nothing.
        With a scene function, its ``perturb(rng, scale)`` shifts the state and returns the unwrapped
        observation, which goes through the observation wrappers the same way.
        """
        if self._seed is None or self._tick != 0:
            raise RuntimeError("perturb_state is called right after reset(seed), before any tick")
        if self._scene is not None and self._scene.offers_perturbation:
            self._obs = self._wrapped_observation(self._scene.perturb(rng, scale))
            self._start_episode({})
            return self._state(self._obs)
        if not self._perturb_qpos.size:
            raise ValueError(
                f"{self.spec.id}: no state perturbation is offered (env.params.perturb_joints is empty"
                + (f", and the scene function {self.params.scene!r} has no perturb)" if self._scene else ")")
            )
        direction = rng.standard_normal(self._perturb_qpos.size)
        direction /= float(np.linalg.norm(direction))
        if scale:
            qpos, qvel = self._sim.data.qpos.copy(), self._sim.data.qvel.copy()
            qpos[self._perturb_qpos] += scale * direction
            self._sim.set_state(qpos, qvel)
            self._obs = self._observe_unwrapped()
            self._start_episode({})
        return self._state(self._obs)

    def _observe_unwrapped(self) -> Any:
        """The current state as the outermost environment would report it, without stepping."""
        return self._wrapped_observation(self.env._get_obs())

    def _wrapped_observation(self, obs: Any) -> Any:
        """An observation of the unwrapped environment through every observation wrapper, inside out."""
        gymnasium = _import_gymnasium()
        for wrapper in reversed(_wrapper_chain(self.wrapped)[:-1]):
            if isinstance(wrapper, gymnasium.ObservationWrapper):
                obs = wrapper.observation(obs)
        return obs

    @property
    def done(self) -> bool:
        """True after ``replans`` replans, or once the environment terminated or truncated the episode."""
        return self._ended or self.replan_index >= self.params.replans

    def execute(self, chunk: np.ndarray, n_executed: int) -> np.ndarray:
        """Step the first ``n_executed`` actions of ``chunk``, one Gymnasium step each; the next obs."""
        if self._seed is None:
            raise RuntimeError("call reset(seed) before execute")
        if self.done:
            raise RuntimeError(f"seed {self._seed}: the episode is over; call reset(seed)")
        where = f"{self.spec.id} seed {self._seed}"
        chunk = check_chunk(chunk, self.spec, n_executed, where)
        actions = normalized_to_bounds(chunk[:n_executed], self._low, self._high, self.replan_index, where)
        for action in actions:
            obs, _reward, terminated, truncated, info = self.wrapped.step(action.astype(self._action_dtype))
            self._obs = obs
            self._tick += 1
            self._read_scene()
            distance = self._distance(info)
            self._trace.append(distance)
            self._objects.append(self._point_xy("object"))
            if self._traces_effector:
                self._effector.append(self._point_xy("effector"))
            if self._first_contact is None and self._engaged(info, distance):
                self._first_contact = self._tick
            for name, key in self.params.guard_info_keys:
                self._info_guards[name] = self._info_guards[name] or bool(info.get(key, False))
            self._tick_channels(self._tick, info)
            if terminated or truncated:
                self._ended = True
                break
        self.replan_index += 1
        return self._state(self._obs)

    def record(self) -> PushRecord:
        """The record of the episode so far (complete once ``done``)."""
        if self._seed is None:
            raise RuntimeError("call reset(seed) before record")
        dist = self._trace
        d0, d_final = dist[0], dist[-1]
        best = max(100.0 * (d0 - dt) for dt in dist[1:]) if len(dist) > 1 else 0.0
        gx, gy = self._point_xy("goal")
        channels = {**self._info_guards, **self._channel_values()}
        effector = self._traces_effector
        return PushRecord(
            seed=self._seed,
            n_ticks=self._tick,
            d0_cm=100.0 * d0,
            d_final_cm=100.0 * d_final,
            progress_final_cm=100.0 * (d0 - d_final),
            best_point_cm=best,
            distance_trace_cm=tuple(100.0 * v for v in dist),
            contact=self._first_contact is not None,
            first_contact_tick=self._first_contact,
            success=d_final <= self.params.success_radius_m,
            object_x_trace_m=tuple(x for x, _ in self._objects),
            object_y_trace_m=tuple(y for _, y in self._objects),
            goal_x_m=gx,
            goal_y_m=gy,
            effector_x_trace_m=tuple(x for x, _ in self._effector) if effector else None,
            effector_y_trace_m=tuple(y for _, y in self._effector) if effector else None,
            channels=tuple((name, channels[name]) for name in self._channel_names),
        )

    # -- cameras ---------------------------------------------------------------------------------------
    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        """The current frame of ``camera`` (one of ``spec.cameras``), uint8 [height, width, 3].

        Renderers are built on first use, one per size, and kept: making a GL context costs far more
        than a frame. An unknown camera is a ``ValueError`` naming it and the environment's cameras,
        raised before any GL context is made.
        """
        if camera not in self.spec.cameras:
            cameras = ", ".join(self.spec.cameras) or "none"
            raise ValueError(f"{self.spec.id}: no camera {camera!r} (its cameras: {cameras})")
        renderer = self._renderers.get((height, width))
        if renderer is None:
            renderer = self._renderers[(height, width)] = make_renderer(self._sim.model, height, width)
        named = {self._sim.model.camera(i).name for i in range(int(self._sim.model.ncam))}
        renderer.update_scene(self._sim.data, camera=camera if camera in named else self._default_view())
        frame: np.ndarray = renderer.render().copy()
        return frame

    def _default_view(self) -> Any:
        """MuJoCo's free camera for the model, then the environment's ``default_camera_config`` on it.

        Why not Gymnasium's own viewer camera: that one is centred on the geoms' positions at the first
        ``render()``; this pose depends on the model alone, so every frame of a seed is the same in any
        process, whenever rendering starts. Built once per environment.
        """
        if self._free_camera is None:
            owner = getattr(self._sim, "mujoco_renderer", None) or getattr(self.env, "mujoco_renderer", None)
            self._free_camera = free_camera(self._sim.model, getattr(owner, "default_cam_config", None))
        return self._free_camera

    def close(self) -> None:
        """Release the camera renderers and the Gymnasium environment (and its wrappers)."""
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()
        self.wrapped.close()


def make_gymnasium_env(**params: Any) -> GymnasiumAdapter:
    """``env.params`` -> an adapted environment: the factory a design names as ``env.id``.

    For example ``env: {id: "grpo_probe.envs.gym_adapter:make_gymnasium_env", params: {gym_id: Reacher-v5,
    ...}}``; a module of your own can wrap it with fixed params (see examples/my_gym_env.py).
    """
    return GymnasiumAdapter(GymnasiumParams.from_dict(params))
