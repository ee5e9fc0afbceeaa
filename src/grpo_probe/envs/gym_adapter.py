"""Any Gymnasium MuJoCo environment under the environment protocol.

Why an adapter and not a port: the probe should measure a simulator as its authors ship it. The adapter
steps the environment through Gymnasium's own ``reset(seed=)`` and ``step`` (one ``step`` per control
tick), maps the heads' normalized actions [-1, 1] affinely onto the environment's ``Box`` action bounds,
and measures the registered metric from what the environment exposes: the distance from a named object
body to a named goal body in the table plane (x, y), or, when registered, the distance an ``info`` key
reports. Guard channels are ``info`` keys that trip when true at any tick; a subclass (``pusher``) adds
channels it reads from the MuJoCo state.

Determinism comes from the environment: Gymnasium seeds its ``np_random`` from ``reset(seed=)``, and
MuJoCo steps bit-identically on one machine, so the spawn is a pure function of the seed. An
environment that reads any other randomness is caught by the parallel oracle.

Gymnasium's MuJoCo envs build a renderer object on construction; without ``render_mode`` nothing is
drawn, so no display is needed (``MUJOCO_GL=egl`` for headless rendering if a subclass renders).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from grpo_probe.envs.protocol import (
    METRIC_COLUMNS,
    EnvSpec,
    Guard,
    TopDownView,
    away_tail_guard,
    check_chunk,
    normalized_to_bounds,
)
from grpo_probe.sim.record import canonical_row_bytes

__all__ = ["GymnasiumAdapter", "GymnasiumParams", "PushRecord", "make_gymnasium_env", "push_schema"]

_F64_LIST = pa.list_(pa.float64())


@dataclass(frozen=True)
class GymnasiumParams:
    """How a Gymnasium environment becomes a registered probe environment (``env.params``)."""

    gym_id: str
    """The Gymnasium id, e.g. ``Reacher-v5`` (``module:Name-v0`` imports the module that registers it)."""
    replans: int
    chunk_length: int
    executed_actions: int
    object_body: str
    """MuJoCo body whose centre is moved toward the goal (its x, y are traced)."""
    goal_body: str
    effector_body: str | None = None
    """MuJoCo body traced as the effector in the top-down figure (optional)."""
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
    """Keyword arguments of ``gymnasium.make``."""
    perturb_joints: tuple[str, ...] = ()
    """Joints a replay's ``state`` perturbation shifts at spawn (slide or hinge: its coordinate; free: its
    x and y), together by ``scale`` in a keyed direction; none: the environment offers no state
    perturbation. Not with ``distance_info_key`` (the spawn distance could not be measured again)."""
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
        for name in ("gym_id", "object_body", "goal_body"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"{where}.{name} must be a non-empty string, got {getattr(self, name)!r}")
        if self.perturb_joints and self.distance_info_key is not None:
            raise ValueError(
                f"{where}.perturb_joints: a state perturbation needs the spawn distance measured from "
                "object_body and goal_body, not from distance_info_key"
            )

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
        if "perturb_joints" in kwargs:
            joints = kwargs["perturb_joints"]
            if not isinstance(joints, (list, tuple)) or not all(isinstance(j, str) for j in joints):
                raise ValueError(f"{where}.perturb_joints must be a list of joint names, got {joints!r}")
            kwargs["perturb_joints"] = tuple(joints)
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise ValueError(f"{where}: {exc}") from None


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
        """Exact byte form of the row (:func:`grpo_probe.sim.record.canonical_row_bytes`)."""
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


class GymnasiumAdapter:
    """A Gymnasium environment stepped in action chunks, measured as the protocol asks.

    Subclasses add guard channels from the simulator state by overriding :meth:`_channel_fields`,
    :meth:`_start_channels`, :meth:`_tick_channels` and :meth:`_channel_values`.
    """

    def __init__(self, params: GymnasiumParams, env_id: str | None = None) -> None:
        gymnasium = _import_gymnasium()
        self.params = params
        self.env = gymnasium.make(params.gym_id, **dict(params.gym_kwargs)).unwrapped
        space = self.env.action_space
        obs_space = self.env.observation_space
        if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"{params.gym_id}: the adapter needs a 1-D Box action space, got {space}")
        if not isinstance(obs_space, gymnasium.spaces.Box) or len(obs_space.shape) != 1:
            raise ValueError(
                f"{params.gym_id}: the adapter needs a 1-D Box observation space, got {obs_space}"
            )
        self._low = space.low.astype(np.float64)
        self._high = space.high.astype(np.float64)
        if not (np.isfinite(self._low).all() and np.isfinite(self._high).all()):
            raise ValueError(f"{params.gym_id}: the action space must be bounded to map [-1, 1] onto it")
        self._action_dtype = space.dtype
        data = self.env.data
        for name in (params.object_body, params.goal_body, params.effector_body):
            if name is not None:
                try:
                    data.body(name)
                except KeyError:
                    raise ValueError(f"{params.gym_id}: no MuJoCo body named {name!r} (env.params)") from None
        self._perturb_qpos = self._perturbed_coordinates(params)
        channel_fields = tuple(pa.field(name, pa.bool_(), False) for name, _ in params.guard_info_keys)
        channel_fields += self._channel_fields()
        self._channel_names = tuple(f.name for f in channel_fields)
        effector = params.effector_body is not None
        self.spec = EnvSpec(
            id=env_id or params.gym_id,
            version=self._version(),
            action_dims=int(space.shape[0]),
            obs_dim=int(obs_space.shape[0]),
            chunk_length=params.chunk_length,
            executed_actions=params.executed_actions,
            replans=params.replans,
            tick_s=float(getattr(self.env, "dt", math.nan)),
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
        )
        self._seed: int | None = None
        self._ended = False
        self.replan_index = 0

    def _perturbed_coordinates(self, params: GymnasiumParams) -> np.ndarray:
        """qpos addresses a state perturbation moves; an unknown or a ball joint is an error naming it."""
        model = self.env.model
        addresses: list[int] = []
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
        return np.array(addresses, dtype=np.intp)

    # -- what a subclass may add -----------------------------------------------------------------------
    def _version(self) -> str:
        gymnasium = _import_gymnasium()
        return f"{self.params.gym_id}/{self.params.version} (gymnasium {gymnasium.__version__})"

    def _state_perturbation_text(self) -> str | None:
        joints = self.params.perturb_joints
        return f"joint(s) {', '.join(joints)} shifted at spawn" if joints else None

    def _engagement_text(self) -> str:
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
        if self.params.engaged_info_key is not None:
            return bool(info.get(self.params.engaged_info_key, False))
        return abs(distance - self._trace[0]) > self.params.engaged_min_m

    # -- the protocol ----------------------------------------------------------------------------------
    def _xy(self, body: str) -> tuple[float, float]:
        pos = self.env.data.body(body).xpos
        return float(pos[0]), float(pos[1])

    def _distance(self, info: Mapping[str, Any]) -> float:
        key = self.params.distance_info_key
        if key is not None:
            if key not in info:
                raise ValueError(
                    f"{self.params.gym_id}: info has no key {key!r} (env.params.distance_info_key)"
                )
            return float(self.params.distance_scale * float(info[key]))
        (ox, oy), (gx, gy) = self._xy(self.params.object_body), self._xy(self.params.goal_body)
        return math.hypot(ox - gx, oy - gy)

    def reset(self, seed: int) -> np.ndarray:
        """Start the episode of ``seed`` (Gymnasium's ``reset(seed=seed)``); the first observation."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        obs, info = self.env.reset(seed=int(seed))
        self._seed = int(seed)
        self.replan_index = 0
        self._tick = 0
        self._ended = False
        self._first_contact: int | None = None
        key = self.params.distance_info_key
        if key is not None and key not in info:
            raise ValueError(
                f"{self.params.gym_id}: reset() returned no info[{key!r}], so the distance at spawn cannot "
                "come from env.params.distance_info_key; measure it from object_body and goal_body instead"
            )
        self._start_episode(info)
        return np.asarray(obs, dtype=np.float32)

    def _start_episode(self, info: Mapping[str, Any]) -> None:
        """Measure the spawn: the distance, the traces' first points and the channels' start."""
        self._trace = [self._distance(info)]
        self._objects: list[tuple[float, float]] = [self._xy(self.params.object_body)]
        self._effector: list[tuple[float, float]] = (
            [self._xy(self.params.effector_body)] if self.params.effector_body else []
        )
        self._info_guards = {name: False for name, _ in self.params.guard_info_keys}
        self._start_channels()

    def perturb_state(self, rng: np.random.Generator, scale: float) -> np.ndarray:
        """Shift ``env.params.perturb_joints`` by ``scale`` together, in a direction drawn from ``rng``.

        Called right after :meth:`reset`: the spawn is measured again from the shifted state (Gymnasium's
        ``set_state`` runs ``mj_forward``), and the new first observation is returned. A zero ``scale``
        moves nothing.
        """
        if not self._perturb_qpos.size:
            raise ValueError(
                f"{self.spec.id}: no state perturbation is offered (env.params.perturb_joints is empty)"
            )
        if self._seed is None or self._tick != 0:
            raise RuntimeError("perturb_state is called right after reset(seed), before any tick")
        direction = rng.standard_normal(self._perturb_qpos.size)
        direction /= float(np.linalg.norm(direction))
        if scale:
            qpos, qvel = self.env.data.qpos.copy(), self.env.data.qvel.copy()
            qpos[self._perturb_qpos] += scale * direction
            self.env.set_state(qpos, qvel)
            self._start_episode({})
        return np.asarray(self.env._get_obs(), dtype=np.float32)

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
        obs = None
        for action in actions:
            obs, _reward, terminated, truncated, info = self.env.step(action.astype(self._action_dtype))
            self._tick += 1
            distance = self._distance(info)
            self._trace.append(distance)
            self._objects.append(self._xy(self.params.object_body))
            if self.params.effector_body:
                self._effector.append(self._xy(self.params.effector_body))
            if self._first_contact is None and self._engaged(info, distance):
                self._first_contact = self._tick
            for name, key in self.params.guard_info_keys:
                self._info_guards[name] = self._info_guards[name] or bool(info.get(key, False))
            self._tick_channels(self._tick, info)
            if terminated or truncated:
                self._ended = True
                break
        self.replan_index += 1
        return np.asarray(obs, dtype=np.float32)

    def record(self) -> PushRecord:
        """The record of the episode so far (complete once ``done``)."""
        if self._seed is None:
            raise RuntimeError("call reset(seed) before record")
        dist = self._trace
        d0, d_final = dist[0], dist[-1]
        best = max(100.0 * (d0 - dt) for dt in dist[1:]) if len(dist) > 1 else 0.0
        gx, gy = self._xy(self.params.goal_body)
        channels = {**self._info_guards, **self._channel_values()}
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
            effector_x_trace_m=tuple(x for x, _ in self._effector) if self.params.effector_body else None,
            effector_y_trace_m=tuple(y for _, y in self._effector) if self.params.effector_body else None,
            channels=tuple((name, channels[name]) for name in self._channel_names),
        )

    def close(self) -> None:
        """Release the Gymnasium environment."""
        self.env.close()


def make_gymnasium_env(**params: Any) -> GymnasiumAdapter:
    """``env.params`` -> an adapted environment: the factory a design names as ``env.id``.

    For example ``env: {id: "grpo_probe.envs.gym_adapter:make_gymnasium_env", params: {gym_id: Reacher-v5,
    ...}}``; a module of your own can wrap it with fixed params (see examples/my_gym_env.py).
    """
    return GymnasiumAdapter(GymnasiumParams.from_dict(params))
