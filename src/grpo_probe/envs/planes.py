"""Two planar control scenes whose answer to "signal or chaos" is known by construction.

Why: the probe's reads and a GRPO pilot's gain are only worth comparing if some scenes have a known
answer. Both scenes move an object in the table plane toward a fixed goal and record it as the protocol
asks (:class:`~grpo_probe.envs.push_record.PushRecord`, ``progress_final_cm = 100 (d0 - d_final)``);
they differ only in how an action moves the object:

- :class:`SmoothPlane`, the positive control: each tick the object moves by ``STEP_M * action`` (metres,
  the action clipped to [-1, 1]). The reward is a smooth function of the actions: a replay whose actions
  differ by 1e-3 ends about 1e-5 m from its draw, while draws of different policy noise end centimetres
  apart, so the chaos fraction is near 0 and what the draws choose is what spreads the reward.
- :class:`LuckPlane`, the negative control ("keyed luck"): each tick the object lands uniformly within
  ``LUCK_HALF_EXTENT_M`` of its spawn, at a spot drawn from a generator keyed by a hash of the exact bytes
  of every action executed so far in the episode. What the actions mean is ignored: any change of any
  executed action (a 1e-3 nudge as much as another draw's choice) gives a fresh, unrelated draw, so the
  chaos fraction is near 1 and no policy can do better than luck.

The luck plane's key, exactly: a SHA-256 hash is started at reset, fed first with the seed as a
little-endian unsigned 64-bit integer when ``env.params.key`` is ``seed_and_actions``; each tick it is
updated with that tick's action as two little-endian float32 numbers (8 bytes, the values the engine
executes); the first 8 bytes of the digest so far, read as a little-endian unsigned integer, seed NumPy's
``default_rng`` (PCG64), whose ``uniform(-LUCK_HALF_EXTENT_M, LUCK_HALF_EXTENT_M, 2)`` is the object's
offset from its spawn after that tick. So an episode is a pure function of the seed and the executed
bytes, on any machine.

Why the seed is in the key: with ``key: actions`` (the first registration's key, kept so that its results
rebuild) a policy that executes the same bytes on every seed, as a greedy AR head whose tokens do not
depend on the observation does, draws the same luck on every seed. GRPO can then learn one lucky action
sequence on its training seeds that carries to held-out seeds: the luck is learnable, and the control is
no control (its AR pilot read "held" at +4.05 cm on 12 held-out seeds). Keyed by the seed as well, a
held-out seed's luck is unrelated to any training seed's, whatever the policy executes.

Both scenes spawn the object uniformly within ``SPAWN_HALF_EXTENT_M`` of the origin (keyed by the seed)
with the goal at ``GOAL_XY``, 15 cm away along x. Each offers a scripted expert (``env.expert(noise)``,
:class:`PlaneExpert`) so the workflow records demos and trains reference arms from them: the expert plans
on the smooth plane's dynamics, which are exact on the smooth plane and meaningless on the luck plane
(its demos head to the goal while the reward ignores them, which is the control's point). A design
names a scene by factory (``env: {id: "grpo_probe.envs.planes:make_luck_plane", params: {...}}``); the
params set the chunk geometry (:func:`make_smooth_plane`, :func:`make_luck_plane`).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from grpo_probe.envs.expert_noise import checked_noise, noisy_chunk
from grpo_probe.envs.progress import progress_of
from grpo_probe.envs.protocol import EnvSpec, TopDownView, away_tail_guard, check_chunk, check_running
from grpo_probe.envs.push_record import PushRecord, push_schema
from grpo_probe.keyed_rng import numpy_generator, tag

__all__ = [
    "ACTION_DIMS",
    "CHUNK_LENGTH",
    "EXECUTED_ACTIONS",
    "GOAL_XY",
    "LUCK_HALF_EXTENT_M",
    "LUCK_ID",
    "LUCK_KEYS",
    "OBS_DIM",
    "REPLANS",
    "SMOOTH_ID",
    "SPAWN_HALF_EXTENT_M",
    "STEP_M",
    "LuckPlane",
    "PlaneExpert",
    "SmoothPlane",
    "make_luck_plane",
    "make_smooth_plane",
]

STEP_M = 0.01
"""Smooth plane: metres the object moves per tick for a full-scale action."""
LUCK_HALF_EXTENT_M = 0.05
"""Luck plane: the object lands uniformly within this half extent of its spawn, every tick."""
GOAL_XY = (0.15, 0.0)
"""The goal's centre (metres); the spawn is near the origin, so d0 is about 15 cm."""
SPAWN_HALF_EXTENT_M = 0.02
"""The spawn is uniform in a square of this half extent around the origin."""
TARGET_RADIUS_M = 0.01
"""Success: the object ends within 1 cm of the goal."""
CHUNK_LENGTH = 8
EXECUTED_ACTIONS = 4
REPLANS = 3
"""Default chunk geometry: 3 replans x 4 executed actions (12 ticks, too few to reach the goal; a design
registers its own, e.g. 3 x 10 = 30 ticks, enough for the expert's 15 cm at 1 cm a tick)."""
TICK_S = 0.05
ACTION_DIMS = 2
OBS_DIM = 4
"""The observation: the object's x, y and the goal minus the object (metres), float32."""
ENGAGED_M = 1e-3
"""Engagement: the object moved more than this from its spawn."""
NOISE_KNOTS = 4
"""The expert's noise: this many keyed control points per dimension, interpolated over the chunk."""

LUCK_KEYS = {"actions": "luck/1", "seed_and_actions": "luck/2"}
"""What may key the luck plane (``env.params.key``), with the scene version each gives."""

SMOOTH_ID = "grpo_probe.envs.planes:make_smooth_plane"
LUCK_ID = "grpo_probe.envs.planes:make_luck_plane"


def _positive_int(value: object, field: str, env_id: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{env_id}: env.params.{field} must be a positive integer, got {value!r}")
    return int(value)


class PlaneExpert:
    """Heads straight for the goal at up to full speed, planned on the smooth plane's dynamics.

    One chunk [chunk_length, 2] per replan from the observation alone: each planned tick asks for the step
    that would land on the goal, ``(goal - xy) / STEP_M``, scaled down (direction kept) so that no
    component exceeds 1, and advances its own copy of the position by ``STEP_M`` times that action. On the
    smooth plane the plan is what happens, so the noiseless expert reaches a goal within
    ``STEP_M`` x ticks (per axis); on the luck plane it is the same plan, which the scene ignores.

    ``noise`` is the std of smooth keyed noise added in the normalized action space (as the pusher and
    Reacher experts add theirs): ``NOISE_KNOTS`` control points per dimension drawn from
    ``key`` (run key, seed, replan), interpolated over the chunk, the sum clipped to [-1, 1].
    """

    def __init__(self, chunk_length: int, noise: float = 0.0) -> None:
        self.noise = checked_noise(noise)
        self.chunk_length = _positive_int(chunk_length, "chunk_length", "PlaneExpert")

    def plan(self, obs: np.ndarray) -> np.ndarray:
        """The noiseless chunk [chunk_length, 2] (float64, in [-1, 1]) from an observation."""
        obs = np.asarray(obs, dtype=np.float64)
        if obs.shape != (OBS_DIM,):
            raise ValueError(f"PlaneExpert reads the planes' {OBS_DIM}-number observation, got {obs.shape}")
        xy = obs[:2].copy()
        goal = obs[:2] + obs[2:4]
        out = np.empty((self.chunk_length, ACTION_DIMS))
        for k in range(self.chunk_length):
            step = (goal - xy) / STEP_M
            largest = float(np.max(np.abs(step)))
            if largest > 1.0:
                step /= largest
            out[k] = step
            xy = xy + STEP_M * step
        return out

    def act(self, obs: np.ndarray, key: tuple[int, ...]) -> np.ndarray:
        """One normalized chunk [chunk_length, 2] in [-1, 1], float32; ``key`` names the noise stream."""
        actions = self.plan(obs)
        return noisy_chunk(actions, self.noise, "plane_expert_noise", key, NOISE_KNOTS)


class _Plane:
    """An object in the table plane, a goal, and the protocol's bookkeeping; subclasses say how it moves."""

    def __init__(
        self,
        env_id: str,
        version: str,
        replans: int,
        chunk_length: int,
        executed_actions: int,
        state_perturbation: str | None = None,
    ) -> None:
        self.spec = EnvSpec(
            id=env_id,
            version=version,
            action_dims=ACTION_DIMS,
            obs_dim=OBS_DIM,
            chunk_length=_positive_int(chunk_length, "chunk_length", env_id),
            executed_actions=_positive_int(executed_actions, "executed_actions", env_id),
            replans=_positive_int(replans, "replans", env_id),
            tick_s=TICK_S,
            episode_schema=push_schema((), effector=False),
            guards=(away_tail_guard("object", "goal"),),
            view=TopDownView(
                object_xy=("object_x_trace_m", "object_y_trace_m"),
                effector_xy=None,
                target_xy=("goal_x_m", "goal_y_m"),
                target_radius_m=TARGET_RADIUS_M,
                names=("object", "effector", "goal"),
            ),
            engagement=f"the object moved more than {ENGAGED_M:g} m from its spawn",
            state_perturbation=state_perturbation,
        )
        self.replan_index = 0
        self._seed: int | None = None
        self._tick = 0

    # -- what a subclass says ---------------------------------------------------------------------------
    def _start(self) -> None:
        """Called after each reset (and after a state perturbation)."""

    def _move(self, action: np.ndarray) -> np.ndarray:
        """The object's xy after one tick of ``action`` (float32 values as executed)."""
        raise NotImplementedError

    # -- the protocol -----------------------------------------------------------------------------------
    def expert(self, noise: float) -> PlaneExpert:
        """The scripted expert the workflow records demos with (the same for both planes)."""
        return PlaneExpert(self.spec.chunk_length, noise)

    def reset(self, seed: int) -> np.ndarray:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self._seed = int(seed)
        self.replan_index = 0
        self._tick = 0
        spawn = numpy_generator(tag("plane_spawn"), self._seed).uniform(
            -SPAWN_HALF_EXTENT_M, SPAWN_HALF_EXTENT_M, 2
        )
        self._begin(spawn)
        return self._obs()

    def _begin(self, spawn: np.ndarray) -> None:
        self._spawn = np.asarray(spawn, dtype=np.float64)
        self._xy = self._spawn.copy()
        self._trace = [self._xy.copy()]
        self._first_contact: int | None = None
        self._start()

    def _obs(self) -> np.ndarray:
        gx, gy = GOAL_XY
        x, y = self._xy
        return np.array([x, y, gx - x, gy - y], dtype=np.float32)

    @property
    def done(self) -> bool:
        return self.replan_index >= self.spec.replans

    def execute(self, chunk: np.ndarray, n_executed: int) -> np.ndarray:
        check_running(self._seed, self.done)
        where = f"{self.spec.id} seed {self._seed}"
        check_chunk(chunk, self.spec, n_executed, where)
        exact = np.asarray(chunk, dtype=np.float32)  # the bytes the scene executes
        for action in exact[:n_executed]:
            self._tick += 1
            self._xy = self._move(action)
            self._trace.append(self._xy.copy())
            if self._first_contact is None and math.dist(self._xy, self._spawn) > ENGAGED_M:
                self._first_contact = self._tick
        self.replan_index += 1
        return self._obs()

    def record(self) -> PushRecord:
        if self._seed is None:
            raise RuntimeError("call reset(seed) before record")
        gx, gy = GOAL_XY
        dist = [math.hypot(x - gx, y - gy) for x, y in self._trace]
        return PushRecord(
            seed=self._seed,
            n_ticks=self._tick,
            **progress_of(dist).columns(),
            contact=self._first_contact is not None,
            first_contact_tick=self._first_contact,
            success=dist[-1] <= TARGET_RADIUS_M,
            object_x_trace_m=tuple(float(x) for x, _ in self._trace),
            object_y_trace_m=tuple(float(y) for _, y in self._trace),
            goal_x_m=gx,
            goal_y_m=gy,
        )


class SmoothPlane(_Plane):
    """The object moves by ``STEP_M * action`` each tick: the reward is a smooth function of the actions."""

    def __init__(
        self, offers_state_perturbation: bool, replans: int, chunk_length: int, executed_actions: int
    ) -> None:
        offer = "the object's spawn position in the table plane" if offers_state_perturbation else None
        super().__init__(SMOOTH_ID, "smooth/1", replans, chunk_length, executed_actions, offer)

    def _move(self, action: np.ndarray) -> np.ndarray:
        return self._xy + STEP_M * np.clip(action.astype(np.float64), -1.0, 1.0)

    def perturb_state(self, rng: np.random.Generator, scale: float) -> np.ndarray:
        """The spawn shifted by ``scale`` metres in a direction drawn from ``rng`` (right after reset)."""
        if self.spec.state_perturbation is None:
            raise ValueError(
                f"{self.spec.id}: no state perturbation is offered (env.params.state_perturbation is false)"
            )
        if self._seed is None or self._tick != 0:
            raise RuntimeError("perturb_state is called right after reset(seed), before any tick")
        direction = rng.standard_normal(2)
        direction /= float(np.linalg.norm(direction))
        if scale:
            self._begin(self._spawn + scale * direction)
        return self._obs()


class LuckPlane(_Plane):
    """Each tick the object lands where a generator keyed by the bytes of every executed action says
    (the key is spelled out in the module docstring)."""

    def __init__(self, key: str, replans: int, chunk_length: int, executed_actions: int) -> None:
        super().__init__(LUCK_ID, LUCK_KEYS[key], replans, chunk_length, executed_actions)
        self.key = key

    def _start(self) -> None:
        self._hash = hashlib.sha256()
        if self.key == "seed_and_actions":
            self._hash.update(int(self._seed).to_bytes(8, "little"))

    def _move(self, action: np.ndarray) -> np.ndarray:
        self._hash.update(np.ascontiguousarray(action, dtype="<f4").tobytes())
        luck = np.random.default_rng(int.from_bytes(self._hash.digest()[:8], "little"))
        return self._spawn + luck.uniform(-LUCK_HALF_EXTENT_M, LUCK_HALF_EXTENT_M, 2)


def make_smooth_plane(
    state_perturbation: bool = False,
    replans: int = REPLANS,
    chunk_length: int = CHUNK_LENGTH,
    executed_actions: int = EXECUTED_ACTIONS,
) -> SmoothPlane:
    """The smooth plane (``env.params``: the chunk geometry; with ``state_perturbation`` it offers
    ``perturb_state``, its spawn shifted, so a replay section may register ``kind: state``)."""
    if not isinstance(state_perturbation, bool):
        raise ValueError(
            f"{SMOOTH_ID}: env.params.state_perturbation must be true or false, got {state_perturbation!r}"
        )
    return SmoothPlane(state_perturbation, replans, chunk_length, executed_actions)


def make_luck_plane(
    key: str = "actions",
    replans: int = REPLANS,
    chunk_length: int = CHUNK_LENGTH,
    executed_actions: int = EXECUTED_ACTIONS,
) -> LuckPlane:
    """The luck plane (``env.params``: what keys the luck, and the chunk geometry; no state perturbation:
    its spawn is beside the point, every tick's position is luck).

    ``key``: ``seed_and_actions`` for a negative control; ``actions`` (the default, so that the first
    registration rebuilds as it ran) lets a policy that executes the same bytes on every seed learn luck
    that carries to held-out seeds (the module docstring says how).
    """
    if key not in LUCK_KEYS:
        raise ValueError(f"{LUCK_ID}: env.params.key must be one of {sorted(LUCK_KEYS)}, got {key!r}")
    return LuckPlane(key, replans, chunk_length, executed_actions)
