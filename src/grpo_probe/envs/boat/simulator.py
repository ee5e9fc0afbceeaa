"""BoatPushEnv: the boat-push tabletop, stepped in action chunks as the probe's policies act.

## Description
A 6-DoF pusher must push a free toy boat onto a target disk pinned on the table. The policy is called
once per *replan*; it returns a chunk of ``chunk_length`` actions, of which the first ``executed_actions``
are executed, one per 20 ms control tick (``physics_steps_per_tick`` MuJoCo steps of 2 ms).

## Action Space
``Box(-1, 1, (6,), float32)``, mapped affinely onto each position actuator's ``ctrlrange``; values outside
[-1, 1] are clipped, a NaN is an error naming its index.

| idx | target of | MJCF joint | range | unit |
|-----|-----------|------------|-------|------|
| 0 | pusher tip x | pusher_x (slide) | -0.5 .. 0.5 | m |
| 1 | pusher tip y | pusher_y (slide) | -0.5 .. 0.5 | m |
| 2 | pusher tip height above the table | pusher_z (slide) | -0.08 .. 0.25 | m |
| 3 | roll about the wrist | pusher_roll (hinge) | -0.4 .. 0.4 | rad |
| 4 | pitch about the wrist | pusher_pitch (hinge) | -0.4 .. 0.4 | rad |
| 5 | yaw about the wrist | pusher_yaw (hinge) | -pi .. pi | rad |

## Observation Space
``Box(-inf, inf, (17,), float32)``, the state vector (camera frames are optional, see ``camera``):

| idx | observation | MJCF element | unit |
|-----|-------------|--------------|------|
| 0-5 | pusher joint positions x, y, z, roll, pitch, yaw | pusher_* joints | m, rad |
| 6-8 | boat centre position | body boat | m |
| 9-12 | boat orientation quaternion (w, x, y, z), sign fixed so w >= 0 | joint boat_free | - |
| 13-14 | disk centre x, y | mocap body disk | m |
| 15-16 | disk minus boat centre, x, y | - | m |

## Rewards
None: the probe scores whole episodes. The record (``EpisodeRecord``) carries the named terms:
``progress_final_cm = 100 (d0 - d_final)``, ``best_point_cm``, the distance trace, contact, and the
guard channels (reset strikes, upright, height, knocked off, max boat speed, success).

## Starting State
A pure function of the seed (``grpo_probe.envs.boat.spawn``): boat pose, disk position at a registered initial
distance, pusher at the hover height above a random point clear of the boat.

## Episode End
After ``replans`` replans, or when the safety monitor's ``strike_cap`` is reached.

## Safety monitor
A strike is the pusher pressing into the table with a normal force above ``table_force_limit_n`` at any
physics step, or the tip leaving the workspace at a tick boundary. The monitor then puts the pusher at
the hover pose above its (workspace-clipped) position and holds it there until the next replan.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import numpy as np

try:
    import mujoco
except (AttributeError, ImportError, OSError) as _exc:  # MuJoCo loads the MUJOCO_GL backend on import
    import os as _os

    raise ImportError(
        f"mujoco could not be imported with MUJOCO_GL={_os.environ.get('MUJOCO_GL', '<unset>')!s}: {_exc!r}. "
        "The state-vector observation needs no OpenGL: unset MUJOCO_GL, or install the backend it names "
        "(Debian: libegl1 for egl, libosmesa6 for osmesa)."
    ) from _exc

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.boat.record import EpisodeRecord
from grpo_probe.envs.boat.spawn import Spawn, draw_spawn
from grpo_probe.envs.progress import progress_of
from grpo_probe.envs.protocol import check_running

__all__ = ["CAMERAS", "OBS_DIM", "BoatPushEnv", "EnvState", "load_model", "run_episode"]

OBS_DIM = 17
CAMERAS = ("overhead",)
"""Cameras of scene.xml a policy may read (``observation.images.overhead``)."""
BOAT_REST_Z_M = 0.015
"""Boat centre height when the hull rests on the table (hull half-height)."""
_STATE_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION
"""Saved states must include qacc_warmstart, or a restored episode diverges (docs/reference.md,
"Determinism")."""
_PUSHER_JOINTS = ("pusher_x", "pusher_y", "pusher_z", "pusher_roll", "pusher_pitch", "pusher_yaw")


def load_model(params: SimParams) -> mujoco.MjModel:
    """Compile scene.xml and write the registered numbers over the file's values."""
    xml = resources.files("grpo_probe.envs.boat").joinpath("scene.xml").read_text()
    model = mujoco.MjModel.from_xml_string(xml)
    model.opt.timestep = params.physics_timestep_s
    disk = model.geom("disk").id
    model.geom_size[disk, 0] = params.disk_radius_m
    return model


@dataclass(frozen=True)
class EnvState:
    """Everything needed to resume an episode mid-way: MuJoCo's integration state plus bookkeeping."""

    physics: np.ndarray
    seed: int
    spawn: Spawn
    replan_index: int
    tick: int
    strikes: int
    ended_by_strike_cap: bool
    first_contact_tick: int | None
    max_boat_speed: float
    hold_ctrl: np.ndarray | None
    traces: tuple[tuple[float, ...], ...]
    tick_in_replan: int = 0
    """Ticks of the current replan stepped one at a time (:meth:`BoatPushEnv.execute_tick`)."""


class BoatPushEnv:
    """The tabletop, one episode at a time. Not thread-safe; one instance per worker."""

    def __init__(self, params: SimParams | None = None, camera: bool = False) -> None:
        self.params = params if params is not None else SimParams()
        self.model = load_model(self.params)
        self.data = mujoco.MjData(self.model)
        m = self.model
        self._boat_body = m.body("boat").id
        self._disk_mocap = int(m.body_mocapid[m.body("disk").id])
        self._tip_site = m.site("tip").id
        boat_joint = m.joint("boat_free")
        self._boat_qpos = int(boat_joint.qposadr[0])
        self._boat_qvel = int(boat_joint.dofadr[0])
        self._pusher_qpos = np.array([m.joint(j).qposadr[0] for j in _PUSHER_JOINTS])
        self._pusher_qvel = np.array([m.joint(j).dofadr[0] for j in _PUSHER_JOINTS])
        self._ctrl_lo = m.actuator_ctrlrange[:, 0].copy()
        self._ctrl_span = m.actuator_ctrlrange[:, 1] - m.actuator_ctrlrange[:, 0]
        self._contact_adr = int(m.sensor("pusher_boat").adr[0])
        self._force_adr = int(m.sensor("pusher_table").adr[0])  # first component = normal force
        self._cos_upright = math.cos(math.radians(self.params.upright_max_tilt_deg))
        self._renderer: mujoco.Renderer | None = None
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        if camera:
            from grpo_probe.envs.boat.render import make_renderer

            self._renderer = make_renderer(self.model)
        self._seed: int | None = None
        self.last_frame: np.ndarray | None = None
        self.replan_index = 0
        self._ended_by_cap = False
        self._tick_in_replan = 0

    # -- episode lifecycle -------------------------------------------------------------------------
    def reset(self, seed: int) -> np.ndarray:
        """Start the episode of ``seed`` and return its first observation."""
        spawn = draw_spawn(self.params, seed)
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        d.qpos[self._boat_qpos : self._boat_qpos + 3] = (spawn.boat_x, spawn.boat_y, BOAT_REST_Z_M)
        half = 0.5 * spawn.boat_yaw
        d.qpos[self._boat_qpos + 3 : self._boat_qpos + 7] = (math.cos(half), 0.0, 0.0, math.sin(half))
        d.mocap_pos[self._disk_mocap] = (spawn.disk_x, spawn.disk_y, 0.0005)
        hover = np.array([spawn.pusher_x, spawn.pusher_y, self.params.hover_height_m, 0.0, 0.0, 0.0])
        d.qpos[self._pusher_qpos] = hover
        d.ctrl[:] = hover
        mujoco.mj_forward(m, d)
        self._seed = seed
        self._spawn = spawn
        self.replan_index = 0
        self._tick = 0
        self._tick_in_replan = 0
        self._strikes = 0
        self._ended_by_cap = False
        self._first_contact: int | None = None
        self._max_speed = 0.0
        self._hold_ctrl: np.ndarray | None = None
        self._traces: list[list[float]] = [[] for _ in range(5)]
        self._record_tick_state()
        if self._renderer is not None:
            self.last_frame = self.render_frame()
        return self._observe()

    def perturb_state(self, rng: np.random.Generator, scale: float) -> np.ndarray:
        """Shift the boat's spawn by ``scale`` metres in the table plane, in a direction drawn from ``rng``.

        Called right after :meth:`reset` (tick 0): a replay's "same choices, a hair's breadth elsewhere".
        The spawn record (distance at spawn, traces, first frame) is taken again from the shifted state,
        so ``progress_final_cm`` stays 100 (d0 - d_final) of this episode. A zero ``scale`` moves nothing.
        """
        if self._seed is None or self._tick != 0:
            raise RuntimeError("perturb_state is called right after reset(seed), before any tick")
        angle = float(rng.uniform(0.0, 2.0 * math.pi))
        if scale:
            d = self.data
            d.qpos[self._boat_qpos] += scale * math.cos(angle)
            d.qpos[self._boat_qpos + 1] += scale * math.sin(angle)
            mujoco.mj_forward(self.model, d)
            self._max_speed = 0.0
            self._traces = [[] for _ in range(5)]
            self._record_tick_state()
            if self._renderer is not None:
                self.last_frame = self.render_frame()
        return self._observe()

    @property
    def done(self) -> bool:
        """True once the episode has run all replans or the strike cap ended it."""
        return self._ended_by_cap or self.replan_index >= self.params.replans

    def execute_chunk(self, chunk: np.ndarray) -> np.ndarray:
        """Execute the registered ``executed_actions`` first actions of ``chunk``; the next observation."""
        return self.execute(chunk, self.params.executed_actions)

    def execute(self, chunk: np.ndarray, n_executed: int) -> np.ndarray:
        """Execute the first ``n_executed`` actions of ``chunk``, one per tick; return the next observation.

        The environment protocol's step (``grpo_probe.envs.protocol``): the engine passes the registered
        ``executed_actions``, so an episode is the same whichever of the two methods ran it.
        """
        check_running(self._seed, self.done)
        if self._tick_in_replan:
            raise RuntimeError(f"seed {self._seed}: a replan stepped tick by tick is unfinished")
        p = self.params
        chunk = np.asarray(chunk, dtype=np.float64)
        if chunk.shape != (p.chunk_length, p.action_dims):
            raise ValueError(
                f"action chunk must have shape ({p.chunk_length}, {p.action_dims}), got {chunk.shape}"
            )
        if isinstance(n_executed, bool) or not isinstance(n_executed, (int, np.integer)):
            raise ValueError(f"n_executed must be an integer, got {n_executed!r}")
        if not 1 <= n_executed <= p.chunk_length:
            raise ValueError(f"n_executed must be in 1..{p.chunk_length}, got {n_executed}")
        executed = chunk[:n_executed]
        bad = np.argwhere(~np.isfinite(executed))
        if bad.size:
            k, j = (int(v) for v in bad[0])
            raise ValueError(
                f"action [{k}, {j}] (replan {self.replan_index}) is {executed[k, j]}, not finite"
            )
        targets = self._ctrl_lo + 0.5 * (np.clip(executed, -1.0, 1.0) + 1.0) * self._ctrl_span
        self._hold_ctrl = None
        for k in range(n_executed):
            self._run_tick(targets[k])
            if self._ended_by_cap:
                break
        self.replan_index += 1
        if self._renderer is not None and not self.done:
            self.last_frame = self.render_frame()
        return self._observe()

    def execute_tick(self, action: np.ndarray) -> np.ndarray:
        """One control tick of ``action`` (6 normalized numbers): the Gymnasium env's ``step``.

        Ticks stepped one at a time form replans of ``executed_actions`` ticks, as chunks do: the safety
        monitor's hold ends where a replan begins and the episode ends after ``replans`` of them, so the
        ticks of a chunk stepped one by one make the same episode, byte for byte, as the chunk.
        """
        check_running(self._seed, self.done, "execute_tick")
        p = self.params
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (p.action_dims,):
            raise ValueError(f"action must have shape ({p.action_dims},), got {action.shape}")
        bad = np.flatnonzero(~np.isfinite(action))
        if bad.size:
            raise ValueError(
                f"action [{int(bad[0])}] (tick {self._tick + 1}) is {action[bad[0]]}, not finite"
            )
        if self._tick_in_replan == 0:
            self._hold_ctrl = None
        self._run_tick(self._ctrl_lo + 0.5 * (np.clip(action, -1.0, 1.0) + 1.0) * self._ctrl_span)
        self._tick_in_replan += 1
        if self._ended_by_cap or self._tick_in_replan == p.executed_actions:
            self._tick_in_replan = 0
            self.replan_index += 1
            if self._renderer is not None and not self.done:
                self.last_frame = self.render_frame()
        return self._observe()

    @property
    def ended_by_strike_cap(self) -> bool:
        """True once the safety monitor's strike cap ended the episode."""
        return self._ended_by_cap

    def _run_tick(self, target: np.ndarray) -> None:
        m, d, p = self.model, self.data, self.params
        d.ctrl[:] = target if self._hold_ctrl is None else self._hold_ctrl
        sensordata = d.sensordata
        contact_adr, force_adr, limit = self._contact_adr, self._force_adr, p.table_force_limit_n
        pressed = False
        touched = False
        for _ in range(p.physics_steps_per_tick):
            mujoco.mj_step(m, d)
            if sensordata[contact_adr] > 0.0:
                touched = True
            if sensordata[force_adr] > limit:
                pressed = True
        self._tick += 1
        if touched and self._first_contact is None:
            self._first_contact = self._tick
        tip = d.site_xpos[self._tip_site]
        h = p.workspace_half_extent_m
        left = abs(tip[0]) > h or abs(tip[1]) > h or tip[2] > p.workspace_max_height_m
        if pressed or left:
            self._strike(tip)
        self._record_tick_state()

    def _strike(self, tip: np.ndarray) -> None:
        """The safety monitor: count the strike, put the pusher at hover, hold it until the next replan."""
        p, m, d = self.params, self.model, self.data
        self._strikes += 1
        h = p.workspace_half_extent_m
        hover = np.array(
            [float(np.clip(tip[0], -h, h)), float(np.clip(tip[1], -h, h)), p.hover_height_m, 0.0, 0.0, 0.0]
        )
        d.qpos[self._pusher_qpos] = hover
        d.qvel[self._pusher_qvel] = 0.0
        d.ctrl[:] = hover
        self._hold_ctrl = hover
        mujoco.mj_forward(m, d)
        if self._strikes >= p.strike_cap:
            self._ended_by_cap = True

    # -- measurements ------------------------------------------------------------------------------
    def _boat_disk_distance(self) -> float:
        boat = self.data.xpos[self._boat_body]
        disk = self.data.mocap_pos[self._disk_mocap]
        return math.hypot(float(boat[0] - disk[0]), float(boat[1] - disk[1]))

    def _record_tick_state(self) -> None:
        d = self.data
        boat = d.xpos[self._boat_body]
        tip = d.site_xpos[self._tip_site]
        vel = d.qvel[self._boat_qvel : self._boat_qvel + 3]
        self._max_speed = max(self._max_speed, math.sqrt(float(vel @ vel)))
        for trace, value in zip(
            self._traces,
            (self._boat_disk_distance(), boat[0], boat[1], tip[0], tip[1]),
            strict=True,
        ):
            trace.append(float(value))

    def _observe(self) -> np.ndarray:
        d = self.data
        quat = d.qpos[self._boat_qpos + 3 : self._boat_qpos + 7]
        if quat[0] < 0:
            quat = -quat
        boat = d.qpos[self._boat_qpos : self._boat_qpos + 3]
        disk = d.mocap_pos[self._disk_mocap, :2]
        return np.concatenate([d.qpos[self._pusher_qpos], boat, quat, disk, disk - boat[:2]]).astype(
            np.float32
        )

    def record(self) -> EpisodeRecord:
        """The record of the episode so far (complete once ``done``)."""
        if self._seed is None:
            raise RuntimeError("call reset(seed) before record")
        p, d = self.params, self.data
        dist, bx, by, px, py = (tuple(t) for t in self._traces)
        up_z = float(d.xmat[self._boat_body][8])  # world z of the boat's body z axis
        z = float(d.xpos[self._boat_body][2])
        knocked_off = z < BOAT_REST_Z_M - p.knocked_off_drop_m
        return EpisodeRecord(
            seed=self._seed,
            n_ticks=self._tick,
            **progress_of(dist).columns(),
            boat_x_trace_m=bx,
            boat_y_trace_m=by,
            pusher_x_trace_m=px,
            pusher_y_trace_m=py,
            disk_x_m=float(self._spawn.disk_x),
            disk_y_m=float(self._spawn.disk_y),
            contact=self._first_contact is not None,
            first_contact_tick=self._first_contact,
            reset_strikes=self._strikes,
            ended_by_strike_cap=self._ended_by_cap,
            final_upright=up_z >= self._cos_upright,
            final_tilt_deg=math.degrees(math.acos(min(1.0, max(-1.0, up_z)))),
            final_z_mm=1000.0 * z,
            knocked_off=knocked_off,
            max_boat_speed_m_s=self._max_speed,
            success=(dist[-1] <= p.disk_radius_m) and not knocked_off,
        )

    # -- state save / restore ----------------------------------------------------------------------
    def get_state(self) -> EnvState:
        """Snapshot for mid-episode save/restore (bit-identical continuation)."""
        if self._seed is None:
            raise RuntimeError("call reset(seed) before get_state")
        size = mujoco.mj_stateSize(self.model, _STATE_SPEC)
        physics = np.empty(size, dtype=np.float64)
        mujoco.mj_getState(self.model, self.data, physics, _STATE_SPEC)
        return EnvState(
            physics=physics,
            seed=self._seed,
            spawn=self._spawn,
            replan_index=self.replan_index,
            tick=self._tick,
            strikes=self._strikes,
            ended_by_strike_cap=self._ended_by_cap,
            first_contact_tick=self._first_contact,
            max_boat_speed=self._max_speed,
            hold_ctrl=None if self._hold_ctrl is None else self._hold_ctrl.copy(),
            traces=tuple(tuple(t) for t in self._traces),
            tick_in_replan=self._tick_in_replan,
        )

    def set_state(self, state: EnvState) -> None:
        """Restore a snapshot taken by :meth:`get_state` (in this env or another with the same params)."""
        mujoco.mj_resetData(self.model, self.data)
        mujoco.mj_setState(self.model, self.data, state.physics, _STATE_SPEC)
        mujoco.mj_forward(self.model, self.data)
        self._seed = state.seed
        self._spawn = state.spawn
        self.replan_index = state.replan_index
        self._tick = state.tick
        self._strikes = state.strikes
        self._ended_by_cap = state.ended_by_strike_cap
        self._first_contact = state.first_contact_tick
        self._max_speed = state.max_boat_speed
        self._hold_ctrl = None if state.hold_ctrl is None else state.hold_ctrl.copy()
        self._traces = [list(t) for t in state.traces]
        self._tick_in_replan = state.tick_in_replan

    def observe(self) -> np.ndarray:
        """The current observation (what the next replan sees)."""
        return self._observe()

    def render_frame(self) -> np.ndarray:
        """Overhead RGB frame (uint8, H x W x 3); needs ``camera=True``."""
        if self._renderer is None:
            raise RuntimeError("this env was built with camera=False")
        self._renderer.update_scene(self.data, camera="overhead")
        return self._renderer.render().copy()

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        """The current frame of ``camera`` (one of :data:`CAMERAS`), uint8 [height, width, 3].

        Renderers are built on first use, one per size, and kept: building a GL context costs far more
        than a frame. Frames are a pure function of the simulator state (no shadows, no multisampling).
        """
        if camera not in CAMERAS:
            raise ValueError(f"boat scene: no camera {camera!r} (its cameras: {', '.join(CAMERAS)})")
        renderer = self._renderers.get((height, width))
        if renderer is None:
            from grpo_probe.envs.boat.render import make_renderer

            renderer = self._renderers[(height, width)] = make_renderer(self.model, height, width)
        renderer.update_scene(self.data, camera=camera)
        return renderer.render().copy()


def run_episode(env: BoatPushEnv, seed: int, act: Callable[[np.ndarray, int], np.ndarray]) -> EpisodeRecord:
    """Run one whole episode: ``act(obs, replan)`` returns each replan's action chunk."""
    obs = env.reset(seed)
    while not env.done:
        obs = env.execute_chunk(act(obs, env.replan_index))
    return env.record()
