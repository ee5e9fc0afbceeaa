"""A scripted expert for Gymnasium's Reacher-v5, bound through the Gymnasium adapter.

Why Reacher and why a scripted expert: the probe needs a positive control, a smooth scene without
contacts in which the draws' own choices, not chaos, should spread the reward, and the workflow trains
its reference arms by behaviour cloning on an environment's expert demos. Reacher-v5 (a 2-link arm on a
table reaching a target drawn in a disc of 0.2 m; no geom collides with anything) is that scene; a
design names this expert in the adapter's params (``expert: grpo_probe.envs.reacher:ReacherExpert``)
and the adapter calls it as ``ReacherExpert(adapter, noise)``.

Reacher-v5 drives each joint with a motor of gear 200 (actions in [-1, 1] are +-200 N m) on a joint of
armature 1 and damping 1, 10 ms RK4 steps, two per Gymnasium step (20 ms ticks). The links weigh a few
grams, so each joint is nearly a unit-inertia double integrator. The probe executes a chunk's actions
open loop, so the expert plans a whole chunk from the observation alone, on a private copy of
Reacher-v5's own model set to the observed joint angles and velocities, for ``chunk_length`` ticks:

- the joint targets are the arm's inverse kinematics to the target (link lengths read from the model),
  on the elbow branch the arm is on (the sign of the elbow angle, so the branch never flips mid-reach),
  the elbow kept inside its +-3 rad range; a target nearer the shoulder than the arm can fold, or farther
  than it can stretch, is reached as nearly as the arm can along the same bearing;
- each joint's velocity is driven toward ``KP`` times its angle error (the shoulder's error wrapped to
  (-pi, pi], as the shoulder turns freely), capped at ``VMAX_RAD_S``, by a torque
  ``I KV (v_des - v) + damping v`` with the joint-space inertia ``I`` and the joint damping of the model,
  divided by the gear and clipped to [-1, 1] (the normalized torque units the heads emit).

Noise is smooth, as the pusher and maze experts': a few keyed control points per dimension, interpolated
over the chunk and added in the normalized action space, so noisy chunks stay low-frequency. The expert
reads the angles (cos, sin), the target's x, y and the joint velocities from ``observation.state``,
which for Reacher-v5 is its 10-number Box observation as it is.
"""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np

from grpo_probe.envs.expert_model import gymnasium_model
from grpo_probe.envs.expert_noise import checked_noise, noisy_chunk, to_unit_range

__all__ = ["ACTION_DIMS", "OBS_DIM", "ReacherExpert"]

ACTION_DIMS = 2
OBS_DIM = 10
"""Reacher-v5's observation: cos q0, cos q1, sin q0, sin q1, target x, y, q0', q1', fingertip - target."""
KP = 8.0
"""Gain (1/s) from a joint's angle error to its desired velocity."""
VMAX_RAD_S = 8.0
"""Cap on the desired joint speed: half a turn in about 0.4 s, well inside Reacher's one-second episode."""
KV = 25.0
"""Joint-velocity tracking gain (1/s)."""
ELBOW_LIMIT_RAD = 2.95
"""Elbow targets are kept this far inside Reacher's +-3 rad joint range."""
FRAME_SKIP = 2
"""Reacher-v5 steps MuJoCo twice per Gymnasium step."""
NOISE_KNOTS = 6


class ReacherExpert:
    """One chunk of normalized torques [chunk_length, 2] per replan; ``noise``: the smooth noise's std.

    ``env`` is the :class:`~grpo_probe.envs.gym_adapter.GymnasiumAdapter` of a Reacher-v5 environment; the
    expert copies what it needs (chunk length, action bounds) and keeps no reference to it.
    """

    def __init__(self, env: Any, noise: float = 0.0) -> None:
        self.noise = checked_noise(noise)
        gym_id = env.params.gym_id
        if env.state_layout != (("", 0, OBS_DIM),) or int(env.spec.action_dims) != ACTION_DIMS:
            raise ValueError(
                f"{gym_id}: env.params.expert: ReacherExpert drives Reacher-v5 (a Box observation of "
                f"{OBS_DIM} numbers, {ACTION_DIMS} torques), and this environment observes "
                f"{env.state_layout} with {env.spec.action_dims} action dims"
            )
        self.chunk_length = int(env.spec.chunk_length)
        self._low, self._high = env.action_bounds
        self.model, self.data = gymnasium_model("reacher.xml")
        m = self.model
        self._l1 = float(m.body("body1").pos[0])
        self._l2 = float(m.body("fingertip").pos[0])
        self._gear = m.actuator_gear[:ACTION_DIMS, 0].copy()
        self._damping = m.dof_damping[:ACTION_DIMS].copy()
        self._inertia = np.zeros((m.nv, m.nv))

    # -- the targets -------------------------------------------------------------------------------------
    def joint_targets(self, target: np.ndarray, elbow: float) -> np.ndarray:
        """Shoulder and elbow angles that put the fingertip on ``target`` (x, y), on the branch of
        ``elbow``'s sign (a straight elbow counts as positive); out of reach: as near as the arm gets."""
        l1, l2 = self._l1, self._l2
        reach = float(np.hypot(target[0], target[1]))
        cos_elbow = (reach * reach - l1 * l1 - l2 * l2) / (2.0 * l1 * l2)
        q1 = math.acos(min(1.0, max(-1.0, cos_elbow)))
        q1 = min(q1, ELBOW_LIMIT_RAD)
        if elbow < 0.0:
            q1 = -q1
        q0 = math.atan2(target[1], target[0]) - math.atan2(l2 * math.sin(q1), l1 + l2 * math.cos(q1))
        return np.array([q0, q1])

    # -- the plan ----------------------------------------------------------------------------------------
    def _set_state(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The private copy at the observed arm state; returns the joint targets for the chunk."""
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        q = np.arctan2(obs[2:4], obs[0:2])
        d.qpos[:ACTION_DIMS] = q
        d.qvel[:ACTION_DIMS] = obs[6:8]
        d.qpos[2:4] = obs[4:6]
        mujoco.mj_forward(m, d)
        return q, self.joint_targets(obs[4:6], float(q[1]))

    def plan_torques(self, obs: np.ndarray) -> np.ndarray:
        """Normalized torques [chunk_length, 2] (units of the gear, in [-1, 1]) of the noiseless plan."""
        obs = np.asarray(obs, dtype=np.float64)
        if obs.shape != (OBS_DIM,):
            raise ValueError(
                f"ReacherExpert reads Reacher-v5's {OBS_DIM}-number observation, got {obs.shape}"
            )
        _, goal = self._set_state(obs)
        m, d = self.model, self.data
        out = np.empty((self.chunk_length, ACTION_DIMS))
        for k in range(self.chunk_length):
            q, qd = d.qpos[:ACTION_DIMS], d.qvel[:ACTION_DIMS]
            error = goal - q
            error[0] = math.remainder(float(error[0]), 2.0 * math.pi)
            desired = np.clip(KP * error, -VMAX_RAD_S, VMAX_RAD_S)
            mujoco.mj_fullM(m, d, self._inertia)
            torque = self._inertia[:ACTION_DIMS, :ACTION_DIMS] @ (KV * (desired - qd)) + self._damping * qd
            out[k] = np.clip(torque / self._gear, -1.0, 1.0)
            d.ctrl[:ACTION_DIMS] = out[k]
            mujoco.mj_step(m, d, nstep=FRAME_SKIP)
        return out

    def act(self, obs: np.ndarray, key: tuple[int, ...]) -> np.ndarray:
        """One normalized chunk [chunk_length, 2] in [-1, 1]; ``key`` names the noise stream."""
        torques = self.plan_torques(obs)
        # [-1, 1] is Reacher's own ctrlrange; map through the adapter's bounds should they differ
        actions = to_unit_range(torques, self._low, self._high)
        return noisy_chunk(actions, self.noise, "reacher_expert_noise", key, NOISE_KNOTS)
