"""PusherEnv: Gymnasium's Pusher-v5 through the Gymnasium adapter, plus the pusher's guard channels.

Why the guards read the MuJoCo state: Pusher-v5's ``info`` holds reward terms only, and the probe needs
what a dense push reward could be gamed with: the arm pinned at its joint limits, the object knocked out
of the work area, the object struck rather than pushed. Each is measured at tick boundaries (after each
Gymnasium ``step``), from ``env.unwrapped.data``, without changing the environment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from grpo_probe.envs.gym_adapter import GymnasiumAdapter, GymnasiumParams
from grpo_probe.envs.protocol import Guard
from grpo_probe.envs.pusher.spec import (
    CHANNELS,
    GYM_ID,
    PUSHER_ID,
    STATE_PERTURBATION,
    PusherParams,
    pusher_guards,
    pusher_spec,
)

__all__ = ["ARM_JOINTS", "OBJECT_JOINTS", "PusherEnv"]

ARM_JOINTS = (
    "r_shoulder_pan_joint",
    "r_shoulder_lift_joint",
    "r_upper_arm_roll_joint",
    "r_elbow_flex_joint",
    "r_forearm_roll_joint",
    "r_wrist_flex_joint",
    "r_wrist_roll_joint",
)
"""Pusher-v5's arm joints, in actuator order."""


OBJECT_JOINTS = ("obj_slidex", "obj_slidey")
"""The object's slide joints: a replay's state perturbation shifts the object's spawn along them."""


class PusherEnv(GymnasiumAdapter):
    """Pusher-v5 stepped in action chunks (see :mod:`grpo_probe.envs.pusher.spec` for the spec)."""

    def __init__(self, params: PusherParams | None = None) -> None:
        self.pusher_params = params if params is not None else PusherParams()
        p = self.pusher_params
        super().__init__(
            GymnasiumParams(
                gym_id=GYM_ID,
                replans=p.replans,
                chunk_length=p.chunk_length,
                executed_actions=p.executed_actions,
                object_body="object",
                goal_body="goal",
                effector_body="tips_arm",
                success_radius_m=p.success_radius_m,
                perturb_joints=OBJECT_JOINTS,
            ),
            env_id=PUSHER_ID,
        )
        live = self.spec
        self.spec = pusher_spec(p)
        for name in ("obs_dim", "action_dims", "tick_s", "episode_schema", "state_perturbation", "cameras"):
            if getattr(live, name) != getattr(self.spec, name):
                raise RuntimeError(
                    f"{GYM_ID}: the installed Gymnasium's environment has {name} {getattr(live, name)}, "
                    f"the registered pusher spec {getattr(self.spec, name)}"
                )

    def _channel_fields(self) -> tuple[pa.Field, ...]:
        return CHANNELS

    def _guards(self) -> tuple[Guard, ...]:
        return pusher_guards(self.pusher_params)

    def _engagement_text(self) -> str:
        return "any arm-object contact"

    def _state_perturbation_text(self) -> str | None:
        return STATE_PERTURBATION

    def _start_channels(self) -> None:
        if not hasattr(self, "_arm_bodies"):
            self._index_model()
        self._limit_hits = 0
        data = self.env.data
        q = data.qpos[self._joint_qpos]
        margin = self.pusher_params.joint_limit_margin_rad
        self._at_limit = (q <= self._joint_lo + margin) | (q >= self._joint_hi - margin)
        self._joint_speed = data.qvel[self._joint_qvel].copy()
        self._off_table = False
        self._max_speed = 0.0

    def _index_model(self) -> None:
        """Addresses of the joints and bodies the channels read (once per env)."""
        model = self.env.model
        self._joint_qpos = np.array([model.joint(j).qposadr[0] for j in ARM_JOINTS])
        self._joint_qvel = np.array([model.joint(j).dofadr[0] for j in ARM_JOINTS])
        self._joint_lo = np.array([model.jnt_range[model.joint(j).id, 0] for j in ARM_JOINTS])
        self._joint_hi = np.array([model.jnt_range[model.joint(j).id, 1] for j in ARM_JOINTS])
        self._object_qvel = np.array([model.joint(j).dofadr[0] for j in ("obj_slidex", "obj_slidey")])
        self._object_body = int(model.body("object").id)
        arm_root = model.body("r_shoulder_pan_link").id
        self._arm_bodies = {b for b in range(model.nbody) if self._has_ancestor(b, arm_root)}

    def _has_ancestor(self, body: int, root: int) -> bool:
        model = self.env.model
        while body != 0:
            if body == root:
                return True
            body = int(model.body_parentid[body])
        return False

    def _engaged(self, info: Mapping[str, Any], distance: float) -> bool:
        """Any contact between the object and a body of the arm at this tick boundary."""
        model, data = self.env.model, self.env.data
        for i in range(data.ncon):
            b1 = int(model.geom_bodyid[data.contact[i].geom1])
            b2 = int(model.geom_bodyid[data.contact[i].geom2])
            if self._object_body in (b1, b2) and (b1 in self._arm_bodies or b2 in self._arm_bodies):
                return True
        return False

    def _tick_channels(self, tick: int, info: Mapping[str, Any]) -> None:
        data, p = self.env.data, self.pusher_params
        q = data.qpos[self._joint_qpos]
        margin = p.joint_limit_margin_rad
        at_limit = (q <= self._joint_lo + margin) | (q >= self._joint_hi - margin)
        fast = np.abs(self._joint_speed) >= p.joint_limit_hit_speed_rad_s
        self._limit_hits += int(np.count_nonzero(at_limit & ~self._at_limit & fast))
        self._at_limit = at_limit
        self._joint_speed = data.qvel[self._joint_qvel].copy()
        ox, oy = self._xy("object")
        gx, gy = self._xy("goal")
        h = p.table_region_half_extent_m
        if abs(ox - gx) > h or abs(oy - gy) > h:
            self._off_table = True
        v = data.qvel[self._object_qvel]
        self._max_speed = max(self._max_speed, math.hypot(float(v[0]), float(v[1])))

    def _channel_values(self) -> dict[str, Any]:
        return {
            "joint_limit_hits": self._limit_hits,
            "object_off_table": self._off_table,
            "max_object_speed_m_s": self._max_speed,
        }
