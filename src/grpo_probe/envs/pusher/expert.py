"""A scripted expert for Pusher-v5 that plans each chunk from the observation alone, as a policy does.

Why plan in a private copy of the model: Pusher-v5 is torque controlled and the probe executes 25
actions of a chunk open loop, so a chunk must already hold the closed-loop behaviour. The expert loads
Pusher-v5's own XML into a private MuJoCo model, sets it to the observed state (joint angles and
velocities; the object and goal positions; the object's velocity is taken as zero, which its damping
on a mass of a few milligrams makes true between pushes), and runs a controller on that copy for
``chunk_length`` ticks, recording the torques. Each chunk is then a function of the observation only.

The controller, per tick of the private copy:

- the push point is ``BEHIND_M`` behind the object on the object-goal line, at the object's mid-height;
- away from it (laterally or in front of the object) the wrist travels there at a safe height above the
  object, then lowers; on it, it advances along the line, ``LEAD_M`` ahead, while the object moves;
- a Cartesian velocity toward the target (gain ``KP``, capped at ``VMAX_M_S``) plus an angular velocity
  that keeps the fork flat and its crossbar across the line become joint velocities by damped least
  squares on the wrist's Jacobian (resolved rate); joint torques track them through the joint-space
  inertia (``tau = M kv (qd_des - qd) + damping qd + bias``), clipped to the actuators' +-2 N m.

Noise is smooth, as the boat expert's: a few keyed control points per dimension, interpolated over the
chunk and added in the normalized action space, so noisy chunks stay low-frequency.
"""

from __future__ import annotations

import mujoco
import numpy as np

from grpo_probe.envs.expert_model import gymnasium_model
from grpo_probe.envs.expert_noise import checked_noise, noisy_chunk
from grpo_probe.envs.pusher.spec import ACTION_DIMS, PusherParams

__all__ = ["PusherExpert"]

BEHIND_M = 0.075
"""Wrist (crossbar centre) distance behind the object centre: object radius 0.05 + capsule 0.02 + gap."""
Z_PUSH_M = -0.275
"""Wrist height while pushing: the object's mid-height (the table top is at -0.325)."""
Z_SAFE_M = -0.16
"""Wrist height that clears the object's top (-0.225) with the fork's capsules while travelling."""
CLEAR_M = 0.06
"""Beyond this lateral (or forward) offset from the push point the wrist travels at the safe height."""
ALIGN_M = 0.04
"""Within this lateral offset from the object-goal line, and lowered, the wrist pushes."""
LEAD_M = 0.05
"""How far ahead along the line the pushing target runs."""
KP = 8.0
"""Cartesian gain (1/s) from the position error to the wrist's velocity."""
VMAX_M_S = 1.0
KV = 12.0
"""Joint-velocity tracking gain (1/s)."""
W_ROT = 0.3
"""Weight of the orientation rows against the position rows in the least-squares solve."""
YAW_GAIN = 2.0
DLS_DAMPING = 1e-2
NOISE_KNOTS = 6
FRAME_SKIP = 5
TORQUE_LIMIT = 2.0


class PusherExpert:
    """One chunk of normalized torques [chunk_length, 7] per replan; ``noise``: the smooth noise's std."""

    def __init__(self, params: PusherParams | None = None, noise: float = 0.0) -> None:
        self.params = params if params is not None else PusherParams()
        self.noise = checked_noise(noise)
        self.model, self.data = gymnasium_model("pusher_v5.xml")
        m = self.model
        self._wrist = m.body("r_wrist_roll_link").id
        self._object = m.body("object").id
        self._goal = m.body("goal").id
        self._object_q = (m.joint("obj_slidex").qposadr[0], m.joint("obj_slidey").qposadr[0])
        self._goal_q = (m.joint("goal_slidex").qposadr[0], m.joint("goal_slidey").qposadr[0])
        self._object_rest = m.body("object").pos[:2].copy()
        self._goal_rest = m.body("goal").pos[:2].copy()
        self._damping = m.dof_damping[:ACTION_DIMS].copy()
        self._jacp = np.zeros((3, m.nv))
        self._jacr = np.zeros((3, m.nv))
        self._inertia = np.zeros((m.nv, m.nv))

    def _set_state(self, obs: np.ndarray) -> None:
        """The private copy at the observed state: arm angles and velocities, object and goal positions."""
        m, d = self.model, self.data
        obs = np.asarray(obs, dtype=np.float64)
        mujoco.mj_resetData(m, d)
        d.qpos[:ACTION_DIMS] = obs[0:7]
        d.qvel[:ACTION_DIMS] = obs[7:14]
        for (ax, ay), rest, xy in (
            (self._object_q, self._object_rest, obs[17:19]),
            (self._goal_q, self._goal_rest, obs[20:22]),
        ):
            d.qpos[ax], d.qpos[ay] = xy[0] - rest[0], xy[1] - rest[1]
        mujoco.mj_forward(m, d)

    def _target(self) -> tuple[np.ndarray, np.ndarray]:
        """The wrist's target position and the push direction (unit, table plane)."""
        d = self.data
        wrist, obj, goal = d.xpos[self._wrist], d.xpos[self._object], d.xpos[self._goal]
        to_goal = goal[:2] - obj[:2]
        dist = float(np.linalg.norm(to_goal))
        u = to_goal / max(dist, 1e-9)
        across = np.array([-u[1], u[0]])
        rel = wrist[:2] - obj[:2]
        along, lateral = float(rel @ u), float(rel @ across)
        push_from = obj[:2] - BEHIND_M * u
        if abs(lateral) > CLEAR_M or along > -BEHIND_M + CLEAR_M:
            far = float(np.linalg.norm(wrist[:2] - push_from)) > CLEAR_M
            return np.array([*push_from, Z_SAFE_M if far else Z_PUSH_M]), u
        if wrist[2] > Z_PUSH_M + 0.03 or abs(lateral) > ALIGN_M:
            return np.array([*push_from, Z_PUSH_M]), u
        return np.array([*(push_from + u * min(LEAD_M, dist)), Z_PUSH_M]), u

    def _torque(self) -> np.ndarray:
        m, d = self.model, self.data
        target, u = self._target()
        wrist = d.xpos[self._wrist]
        frame = d.xmat[self._wrist].reshape(3, 3)
        velocity = KP * (target - wrist)
        speed = float(np.linalg.norm(velocity))
        if speed > VMAX_M_S:
            velocity *= VMAX_M_S / speed
        across = np.array([-u[1], u[0], 0.0])
        if frame[:, 1] @ across < 0:
            across = -across
        # flat fork (wrist z up) and its crossbar (wrist y) across the push line: small-angle errors
        omega = 3.0 * np.cross(frame[:, 2], np.array([0.0, 0.0, 1.0])) + YAW_GAIN * np.cross(
            frame[:, 1], across
        )
        mujoco.mj_jacBody(m, d, self._jacp, self._jacr, self._wrist)
        jac = np.vstack([self._jacp[:, :ACTION_DIMS], W_ROT * self._jacr[:, :ACTION_DIMS]])
        twist = np.concatenate([velocity, W_ROT * omega])
        qd_des = jac.T @ np.linalg.solve(jac @ jac.T + DLS_DAMPING * np.eye(6), twist)
        mujoco.mj_fullM(m, d, self._inertia)
        qd = d.qvel[:ACTION_DIMS]
        tau = (
            self._inertia[:ACTION_DIMS, :ACTION_DIMS] @ (KV * (qd_des - qd))
            + self._damping * qd
            + d.qfrc_bias[:ACTION_DIMS]
        )
        return np.clip(tau, -TORQUE_LIMIT, TORQUE_LIMIT)

    def plan_torques(self, obs: np.ndarray) -> np.ndarray:
        """Joint torques [chunk_length, 7] (N m) of the noiseless plan."""
        self._set_state(obs)
        out = np.empty((self.params.chunk_length, ACTION_DIMS))
        for k in range(self.params.chunk_length):
            out[k] = self._torque()
            self.data.ctrl[:] = out[k]
            mujoco.mj_step(self.model, self.data, nstep=FRAME_SKIP)
        return out

    def act(self, obs: np.ndarray, key: tuple[int, ...]) -> np.ndarray:
        """One normalized chunk [chunk_length, 7] in [-1, 1]; ``key`` names the noise stream."""
        actions = np.clip(self.plan_torques(obs) / TORQUE_LIMIT, -1.0, 1.0)
        return noisy_chunk(actions, self.noise, "pusher_expert_noise", key, NOISE_KNOTS)
