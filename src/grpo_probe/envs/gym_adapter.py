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
registers (``observation.cameras``), with :func:`grpo_probe.render_setup.make_renderer` offscreen on the CPU,
as the boat scene renders its overhead camera; a scene function's ``cameras`` (a simulator that draws
itself, as gym-pusht's pygame view) come first and are drawn by its ``render``. ``spec.cameras`` lists
them; a design that registers another name is refused at ``prereg check``. The free camera's
pose is fixed by the model alone: Gymnasium centres its viewer on the geoms at the first ``render()``
call, which would make a frame depend on when rendering started. Frames are a pure function of the
MuJoCo state (shadows and multisampling off), so the oracles' frame digests match across processes.
Nothing is drawn, and no GL context made, unless a policy reads a camera; ``MUJOCO_GL`` is chosen by
:mod:`grpo_probe.render_setup` (EGL when present) before MuJoCo is imported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from grpo_probe.envs.gym_params import GOAL_ENV_KEYS, POINT_PLACES, GymnasiumParams
from grpo_probe.envs.gym_setup import (
    check_point,
    distribution_version,
    import_gymnasium,
    make_wrapped,
    perturbed_coordinates,
    remove_generated_scene,
    state_layout,
    wrapper_chain,
)
from grpo_probe.envs.progress import progress_of
from grpo_probe.envs.protocol import (
    EnvSpec,
    Expert,
    Guard,
    TopDownView,
    away_tail_guard,
    check_chunk,
    check_running,
    normalized_to_bounds,
)
from grpo_probe.envs.push_record import PushRecord, push_schema
from grpo_probe.envs.scene import SCENE_FIELD, BoundScene, ScenePositions
from grpo_probe.render_setup import (
    DEFAULT_CAMERA,
    camera_names,
    default_camera_config,
    free_camera,
    make_renderer,
    named_cameras,
    simulator,
)
from grpo_probe.user_code import load_callable

# The params, the record and the camera name are re-exported: designs, examples and labs' modules import
# them from here, the module a design names (``grpo_probe.envs.gym_adapter:make_gymnasium_env``).
__all__ = [
    "DEFAULT_CAMERA",
    "GOAL_ENV_KEYS",
    "GymnasiumAdapter",
    "GymnasiumParams",
    "PushRecord",
    "make_gymnasium_env",
    "push_schema",
]


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
        gymnasium = import_gymnasium()
        self.params = params
        self.wrapped = make_wrapped(params, env)
        self.env = self.wrapped.unwrapped
        remove_generated_scene(self.env)
        self._sim = simulator(self.env)
        self._scene: BoundScene | None = None
        if params.scene is not None:
            self._scene = BoundScene(load_callable(params.scene, SCENE_FIELD), params.scene, self.wrapped)
        self._positions: ScenePositions | None = None
        space = self.wrapped.action_space
        if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"{params.gym_id}: the adapter needs a 1-D Box action space, got {space}")
        self._low = space.low.astype(np.float64)
        self._high = space.high.astype(np.float64)
        if not (np.isfinite(self._low).all() and np.isfinite(self._high).all()):
            raise ValueError(f"{params.gym_id}: the action space must be bounded to map [-1, 1] onto it")
        self._action_dtype = space.dtype
        self.state_layout = state_layout(params, self.wrapped.observation_space)
        self._points = {role: params.point(role) for role in POINT_PLACES}
        for point in self._points.values():
            if point is not None:
                check_point(point, params.gym_id, self.env, self._sim, self.wrapped.observation_space)
        if self._scene is not None and self._scene.offers_engagement and params.engaged_info_key is not None:
            raise ValueError(
                f"{params.gym_id}: env.params.engaged_info_key: the scene function {params.scene!r} says "
                "when the object is engaged (its engaged(info)); name engagement once"
            )
        self._perturb_qpos = perturbed_coordinates(params, self.env, self._sim)
        if params.expert is not None:
            self._expert_factory = load_callable(params.expert, "env.params.expert")
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
        gymnasium = import_gymnasium()
        packages = [f"gymnasium {gymnasium.__version__}"]
        module = type(self.env).__module__.split(".")[0]
        if module not in ("gymnasium", "grpo_probe"):
            found = distribution_version(module)
            packages.append(found if found is not None else module)
        wrappers = [type(w).__name__ for w in wrapper_chain(self.wrapped)[:-1]]
        chain = f"; wrappers {' > '.join(wrappers)}" if wrappers else ""
        scene = f"; scene {self.params.scene}" if self.params.scene is not None else ""
        return f"{self.params.gym_id}/{self.params.version} ({', '.join(packages)}{chain}{scene})"

    def _state_perturbation_text(self) -> str | None:
        if self._scene is not None:
            return self._scene.state_perturbation
        joints = self.params.perturb_joints
        return f"joint(s) {', '.join(joints)} shifted at spawn" if joints else None

    def _engagement_text(self) -> str:
        if self._scene is not None and self._scene.engagement is not None:
            return self._scene.engagement
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
        if point.in_model:
            pos = getattr(self._sim.data, point.place)(point.name).xpos
        else:
            pos = np.asarray(self._obs[point.name], dtype=np.float64).ravel()
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
        gymnasium = import_gymnasium()
        for wrapper in reversed(wrapper_chain(self.wrapped)[:-1]):
            if isinstance(wrapper, gymnasium.ObservationWrapper):
                obs = wrapper.observation(obs)
        return obs

    @property
    def done(self) -> bool:
        """True after ``replans`` replans, or once the environment terminated or truncated the episode."""
        return self._ended or self.replan_index >= self.params.replans

    def execute(self, chunk: np.ndarray, n_executed: int) -> np.ndarray:
        """Step the first ``n_executed`` actions of ``chunk``, one Gymnasium step each; the next obs."""
        check_running(self._seed, self.done)
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
        gx, gy = self._point_xy("goal")
        channels = {**self._info_guards, **self._channel_values()}
        effector = self._traces_effector
        return PushRecord(
            seed=self._seed,
            n_ticks=self._tick,
            **progress_of(dist).columns(),
            contact=self._first_contact is not None,
            first_contact_tick=self._first_contact,
            success=dist[-1] <= self.params.success_radius_m,
            object_x_trace_m=tuple(x for x, _ in self._objects),
            object_y_trace_m=tuple(y for _, y in self._objects),
            goal_x_m=gx,
            goal_y_m=gy,
            effector_x_trace_m=tuple(x for x, _ in self._effector) if effector else None,
            effector_y_trace_m=tuple(y for _, y in self._effector) if effector else None,
            channels=tuple((name, channels[name]) for name in self._channel_names),
        )

    # -- cameras ---------------------------------------------------------------------------------------
    def _camera_names(self) -> tuple[str, ...]:
        """The scene function's cameras (drawn by the simulator itself), then the MuJoCo model's."""
        drawn = self._scene.cameras if self._scene is not None else ()
        return camera_names(self._sim.model if self._sim is not None else None, drawn)

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        """The current frame of ``camera`` (one of ``spec.cameras``), uint8 [height, width, 3].

        Renderers are built on first use, one per size, and kept: making a GL context costs far more
        than a frame. An unknown camera is a ``ValueError`` naming it and the environment's cameras,
        raised before any GL context is made.
        """
        if camera not in self.spec.cameras:
            cameras = ", ".join(self.spec.cameras) or "none"
            raise ValueError(f"{self.spec.id}: no camera {camera!r} (its cameras: {cameras})")
        if self._scene is not None and camera in self._scene.cameras:
            return self._scene.render(camera, height, width)
        renderer = self._renderers.get((height, width))
        if renderer is None:
            renderer = self._renderers[(height, width)] = make_renderer(self._sim.model, height, width)
        named = named_cameras(self._sim.model)
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
            self._free_camera = free_camera(self._sim.model, default_camera_config(self._sim, self.env))
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
