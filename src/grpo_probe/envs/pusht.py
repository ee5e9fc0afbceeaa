"""gym-pusht (LeRobot's PushT: a disk pushes a T-shaped block onto a T-shaped goal) bound through a scene.

Why a scene function: PushT simulates with pymunk, not MuJoCo, so the Gymnasium adapter has no bodies or
sites to look the block and the goal up by; :class:`PushTScene` reads them from the live environment
(``env.params.scene: grpo_probe.envs.pusht:PushTScene``), as a lab binds any simulator
(:mod:`grpo_probe.envs.scene`). Install it with ``pip install -e '.[pusht]'`` (gym-pusht 0.1.8, with
pymunk < 7, pygame, opencv-python and shapely).

The scale: PushT works in the pixels of a 512 x 512 world (the disk's target position is the action;
positions, the goal pose and the observation are pixels). :data:`METRES_PER_PIXEL` makes a pixel a
millimetre: the world is a 51.2 cm square table, the T's bar 12 cm by 3 cm and its stem 9 cm long, the
pushing disk 3 cm across, a tabletop pushing task of the size the other scenes have. So the probe's
registered numbers (a 0.25 cm signal bar, a -2 cm away tail, a swat at 0.3 m/s) mean on PushT what they
mean on the boat or the Pusher, and a design's ``success_radius_m`` reads as a distance on a table.

What is measured: the object is the T block's reference point (its body origin, the middle of the bar's
top edge: ``block.position``), the goal is the goal pose's same point (``goal_pose[:2]``, fixed at the
world's centre), so the registered distance is how far the T is from where the goal pose puts it,
orientation aside. The effector is the disk. Engagement: the disk touches the T at the end of a tick
(pymunk's point query, within half a pixel). A replay's state shift moves the T's spawn by ``scale``
metres in a direction drawn from the replay's keyed generator.

The camera: ``top``, PushT's own top view (the one LeRobot's PushT datasets record as
``observation.image``: the goal pose in light green, the T and the disk as pymunk draws them), drawn by
gym-pusht's pygame code into a 512 x 512 surface and resized with OpenCV to the registered size. A design
registers it as ``observation.cameras: {top: {height: 96, width: 96}}`` and a camera-fed arm reads
``observation.images.top``; a frame is a pure function of the T's, the disk's and the goal's poses (no
action marker is drawn), so the same seed and actions give the same bytes.

PushT's own ``dt`` is its 10 ms physics step; one ``step`` runs ten of them under the disk's PD control
(10 Hz), so a design registers ``tick_s: 0.1``.

The scripted expert (:class:`PushTExpert`) plans each chunk from the observation alone (PushT's ``state``
observation: the disk's x, y, the T's x, y and angle, in pixels): it finds the point behind the T's
centre of mass on the line from the T to its goal, brings the disk there (around the T when the T is in
the way, on a circle clear of it), then moves it along the line by the remaining distance; the chunk is
the disk's target positions along that path at a fixed speed, normalized onto the action bounds, plus
smooth keyed noise (the pusher expert's kind). It pushes through the centre of mass so the T translates
more than it turns; it does not control the T's angle, which the registered metric does not read. Over 50
seeds of 8 replans x 10 executed ticks (8 s; mean initial distance 11.4 cm, success within 2 cm):

| noise | mean progress (cm) | success | contact |
|---|---|---|---|
| 0 | 9.4 | 0.68 | 1.00 |
| 0.05 | 8.7 | 0.44 | 1.00 |
| 0.1 | 8.2 | 0.42 | 1.00 |

It fails where the T lies against a wall with the goal on the far side (no room behind it to push from).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from grpo_probe.envs.expert_noise import checked_noise, noisy_chunk, to_unit_range
from grpo_probe.envs.scene import ScenePositions

__all__ = [
    "METRES_PER_PIXEL",
    "PUSHT_GYM_ID",
    "PushTExpert",
    "PushTScene",
]

os.environ.setdefault("SDL_AUDIODRIVER", "dummy")  # pygame (imported by gym-pusht) opens no sound device

PUSHT_GYM_ID = "gym_pusht:gym_pusht/PushT-v0"
"""The Gymnasium id a design names (the module registers it on import)."""
METRES_PER_PIXEL = 0.001
"""One PushT pixel is a millimetre (see the module docstring for why)."""
CONTACT_PX = 0.5
"""Engagement: the disk's edge within this many pixels of the T."""

TEE_VERTICES_PX = (
    ((-60.0, 0.0), (60.0, 0.0), (60.0, 30.0), (-60.0, 30.0)),
    ((-15.0, 30.0), (15.0, 30.0), (15.0, 120.0), (-15.0, 120.0)),
)
"""The T's two boxes in its body frame (gym-pusht's ``add_tee`` at scale 30, length 4), in pixels."""
TEE_COM_PX = (0.0, 45.0)
"""The T's centre of mass in its body frame (the mean of the two boxes' centres, as gym-pusht sets it)."""
DISK_RADIUS_PX = 15.0
WORLD_PX = 512.0
GOAL_PX = (256.0, 256.0)
"""The goal pose's position (gym-pusht fixes the goal pose at (256, 256, pi/4))."""

TRAVEL_PX_PER_TICK = 25.0
"""The expert's disk speed on its way to the pushing point (25 cm/s)."""
PUSH_PX_PER_TICK = 20.0
"""The expert's pushing speed (20 cm/s). Faster pushes got further in the registered time: of 4, 9, 12,
15 and 20 px a tick, 20 gave the most progress over 30 seeds (the T turns as much per centimetre either
way, and a slow push spends the episode)."""
CLEARANCE_PX = 6.0
"""Gap the expert keeps between the disk and the T on its way round."""
ON_LINE_PX = 20.0
"""The disk pushes from where it is when it is within this distance of the line through the T's centre of
mass (and at most this far into the T along it)."""
BEHIND_PX = 40.0
"""... and at most this far behind the point where it would touch the T."""
HOLD_PX = 2.0
"""The expert stops pushing once the T's reference point is this close to the goal's."""
NOISE_KNOTS = 6


class PushTScene:
    """The scene function of gym-pusht: the T's and the goal's reference points, the disk, in metres.

    Called once per environment as ``PushTScene(env)`` with the (wrapped) Gymnasium environment; it reads
    ``env.unwrapped`` (the ``PushTEnv``) at every call, since PushT builds a new pymunk space at each reset.
    """

    traces_effector = True
    state_perturbation = "the T block's spawn position in the plane"
    cameras = ("top",)

    def __init__(self, env: Any) -> None:
        self._sim = env.unwrapped
        if not (hasattr(self._sim, "get_obs") and hasattr(self._sim, "add_tee")):
            raise ValueError(f"PushTScene reads gym-pusht's PushTEnv, got {type(self._sim).__name__}")

    def positions(self) -> ScenePositions:
        """The T's reference point, the goal pose's, and the disk's centre, in metres."""
        sim = self._sim
        return ScenePositions(
            object_xy=_metres(sim.block.position),
            goal_xy=_metres(sim.goal_pose[:2]),
            effector_xy=_metres(sim.agent.position),
        )

    def perturb(self, rng: np.random.Generator, scale: float) -> Any:
        """Move the T's spawn by ``scale`` metres in a direction drawn from ``rng``; PushT's observation."""
        direction = rng.standard_normal(2)
        direction /= float(np.linalg.norm(direction))
        if scale:
            block = self._sim.block
            x, y = block.position
            shift = (scale / METRES_PER_PIXEL) * direction
            block.position = (float(x + shift[0]), float(y + shift[1]))
            self._sim.space.reindex_shapes_for_body(block)
        return self._sim.get_obs()

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        """PushT's top view now, uint8 [height, width, 3]: gym-pusht's own drawing, without the action
        marker its visualisation adds (a frame reads the state, not the last command)."""
        if camera != "top":
            raise ValueError(f"PushT draws one camera, 'top', not {camera!r}")
        frame = self._sim._get_img(self._sim._draw(), width=width, height=height, render_action=False)
        return np.ascontiguousarray(frame, dtype=np.uint8)

    def engaged(self, info: Mapping[str, Any]) -> bool:
        """The disk touches the T at the end of the tick."""
        del info
        centre = self._sim.agent.position
        return any(
            shape.point_query(centre).distance <= DISK_RADIUS_PX + CONTACT_PX
            for shape in self._sim.block.shapes
        )


def _metres(xy: Any) -> tuple[float, float]:
    return float(xy[0]) * METRES_PER_PIXEL, float(xy[1]) * METRES_PER_PIXEL


def _rotate(points: np.ndarray, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return points @ np.array([[c, s], [-s, c]])


class PushTExpert:
    """One chunk of normalized disk targets [chunk_length, 2] per replan; ``noise``: the smooth noise's std.

    ``env`` is the :class:`~grpo_probe.envs.gym_adapter.GymnasiumAdapter` of gym-pusht with its ``state``
    observation (5 numbers); the expert copies the chunk length and the action bounds and keeps no
    reference to it.
    """

    def __init__(self, env: Any, noise: float = 0.0) -> None:
        self.noise = checked_noise(noise)
        layout = tuple(env.state_layout)
        if layout != (("", 0, 5),):
            raise ValueError(
                f"{env.params.gym_id}: env.params.expert: PushTExpert reads PushT's state observation (5 "
                "numbers: disk x, y, T x, y, angle), so register gym_kwargs: {obs_type: state}; the "
                f"observation here is {', '.join(k or 'one Box' for k, _, _ in layout)} "
                f"({layout[-1][2]} numbers)"
            )
        self.chunk_length = int(env.spec.chunk_length)
        low, high = env.action_bounds
        self._low, self._high = np.asarray(low, np.float64), np.asarray(high, np.float64)
        self._tee = [np.array(box) for box in TEE_VERTICES_PX]
        self._com = np.array(TEE_COM_PX)
        reach = max(float(np.linalg.norm(box - self._com, axis=1).max()) for box in self._tee)
        self._circle = reach + DISK_RADIUS_PX + CLEARANCE_PX
        """Radius around the T's centre of mass the disk travels on when the T is in its way."""

    def plan_targets(self, obs: np.ndarray) -> np.ndarray:
        """The disk's target positions [chunk_length, 2] in pixels, noiseless."""
        obs = np.asarray(obs, dtype=np.float64)
        disk, origin, angle = obs[0:2], obs[2:4], float(obs[4])
        to_goal = np.array(GOAL_PX) - origin
        remaining = float(np.linalg.norm(to_goal))
        if remaining <= HOLD_PX:
            return np.repeat(disk[None], self.chunk_length, axis=0)
        u = to_goal / remaining
        com = origin + _rotate(self._com[None], angle)[0]
        boxes = [origin + _rotate(box, angle) for box in self._tee]
        behind = float(np.max((np.concatenate(boxes) - com) @ -u))
        contact = behind + DISK_RADIUS_PX  # the disk's centre touches the T this far behind the centre
        along = float((disk - com) @ u)
        lateral = float(np.linalg.norm(disk - com - along * u))
        if -contact - BEHIND_PX <= along <= -contact + ON_LINE_PX and lateral <= ON_LINE_PX:
            path = [disk, com + u * along]  # behind the T: onto the line through its centre of mass
        else:
            start = com - u * (contact + CLEARANCE_PX)
            path = [disk, *self._around(disk, start, com, boxes), start]
        path.append(com + u * (-contact + remaining + CLEARANCE_PX))
        return self._walk(path)

    def _blocked(self, a: np.ndarray, b: np.ndarray, boxes: list[np.ndarray]) -> bool:
        """Whether the disk moving straight from a to b would touch the T (sampled every 2 pixels)."""
        n = max(2, math.ceil(float(np.linalg.norm(b - a)) / 2.0))
        points = a + np.linspace(0.0, 1.0, n)[:, None] * (b - a)
        return any((_box_distance(points, box) < DISK_RADIUS_PX + CLEARANCE_PX / 2).any() for box in boxes)

    def _around(
        self, disk: np.ndarray, start: np.ndarray, com: np.ndarray, boxes: list[np.ndarray]
    ) -> list[np.ndarray]:
        """Waypoints on the clear circle from the disk's side of the T to the pushing point's side, when
        the straight way there touches the T; none when it does not."""
        if not self._blocked(disk, start, boxes):
            return []
        a0 = math.atan2(disk[1] - com[1], disk[0] - com[0])
        a1 = math.atan2(start[1] - com[1], start[0] - com[0])
        turn = (a1 - a0 + math.pi) % (2 * math.pi) - math.pi
        steps = max(2, math.ceil(abs(turn) / (math.pi / 8)))
        return [
            com + self._circle * np.array([math.cos(a), math.sin(a)])
            for a in np.linspace(a0, a0 + turn, steps + 1)
        ]

    def _walk(self, path: list[np.ndarray]) -> np.ndarray:
        """Targets along ``path``, one per tick: travel speed until the pushing point, then pushing speed."""
        out = np.empty((self.chunk_length, 2))
        position, leg = path[0].copy(), 1
        for k in range(self.chunk_length):
            budget = TRAVEL_PX_PER_TICK if leg < len(path) - 1 else PUSH_PX_PER_TICK
            while budget > 0 and leg < len(path):
                step = path[leg] - position
                length = float(np.linalg.norm(step))
                if length <= budget:
                    position, budget, leg = path[leg].copy(), budget - length, leg + 1
                else:
                    position = position + step * (budget / length)
                    budget = 0.0
            out[k] = position
        return np.clip(out, DISK_RADIUS_PX, WORLD_PX - DISK_RADIUS_PX)

    def act(self, obs: np.ndarray, key: tuple[int, ...]) -> np.ndarray:
        """One normalized chunk [chunk_length, 2] in [-1, 1]; ``key`` names the noise stream."""
        targets = self.plan_targets(obs)
        actions = to_unit_range(targets, self._low, self._high)
        return noisy_chunk(actions, self.noise, "pusht_expert_noise", key, NOISE_KNOTS)


def _box_distance(points: np.ndarray, corners: np.ndarray) -> np.ndarray:
    """Distance from each of ``points`` [N, 2] to the rectangle with ``corners`` [4, 2] (0 inside)."""
    edge_u, edge_v = corners[1] - corners[0], corners[3] - corners[0]
    half = np.array([np.linalg.norm(edge_u), np.linalg.norm(edge_v)]) / 2
    axes = np.stack([edge_u / (2 * half[0]), edge_v / (2 * half[1])])
    local = (points - corners.mean(axis=0)) @ axes.T
    outside = np.maximum(np.abs(local) - half, 0.0)
    return np.linalg.norm(outside, axis=1)
