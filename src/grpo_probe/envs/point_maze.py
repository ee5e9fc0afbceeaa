"""A scripted expert for Gymnasium-Robotics' PointMaze, bound through the Gymnasium adapter.

Why a scripted expert: the workflow trains its reference arms by behaviour cloning on an environment's
expert demos, so a goal-conditioned maze needs one before a design can run on it. A design names it in
the adapter's params (``expert: grpo_probe.envs.point_maze:PointMazeExpert``); the adapter calls it as
``PointMazeExpert(adapter, noise)``.

PointMaze (``PointMaze_UMaze-v3`` and its siblings) is a ball force-actuated in x and y inside a maze
of unit cells: 10 ms ticks, forces of 100 N per unit action on a ball of about 4.2 kg with joint
damping, its speed clipped to 5 m/s before each tick. The probe executes a chunk's actions open loop,
so the expert plans a whole chunk from the observation alone: it runs a point-mass copy of those
dynamics (the mass, damping, gear and timestep read from the environment's MuJoCo model; walls left
out, as the plan keeps to free cells) for ``chunk_length`` ticks under a controller and records the
actions. The controller, per tick of the copy:

- the waypoint is the goal when the ball's cell is the goal's or next to it on the shortest cell path
  (breadth-first over the free cells), else the centre of the next cell on that path;
- a velocity toward the waypoint (gain ``KP``, capped at ``VMAX_M_S``) is tracked by a force
  ``m KV (v_des - v) + damping v``, divided by the gear and clipped to the action bounds [-1, 1].

Noise is smooth, as the pusher expert's: a few keyed control points per dimension, interpolated over
the chunk and added in the normalized action space. The expert reads ``observation`` (x, y, vx, vy)
and ``desired_goal`` (x, y) from ``observation.state`` through the adapter's ``state_layout``, so the
adapter must concatenate both (``env.params.obs_keys``, or the default goal-conditioned order).

:class:`WallContactInfo` is a wrapper that reports, in ``info["wall_contact"]``, whether the ball touches
a maze wall after a step, so a design can register it as a guard channel (``wrappers:
[grpo_probe.envs.point_maze:WallContactInfo]``, ``guard_info_keys: {wall_hit: wall_contact}``): a policy
that reaches the goal by scraping along the walls is visible on the decision page.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import gymnasium
import numpy as np

from grpo_probe.envs.expert_noise import checked_noise, noisy_chunk, to_unit_range

__all__ = ["WALL_PREFIX", "PointMazeExpert", "WallContactInfo"]

WALL_PREFIX = "block_"
"""Gymnasium-Robotics names each wall cell's geom ``block_<row>_<column>``."""

KP = 5.0
"""Gain (1/s) from the distance to the waypoint to the desired velocity."""
VMAX_M_S = 3.0
"""Cap on the desired speed: low enough to turn a maze corner without bouncing off its walls."""
KV = 10.0
"""Velocity tracking gain (1/s)."""
SPEED_CLIP_M_S = 5.0
"""PointMaze clips the ball's joint velocities to +-5 m/s before every tick."""
NOISE_KNOTS = 6


class PointMazeExpert:
    """One chunk of normalized forces [chunk_length, 2] per replan; ``noise``: the smooth noise's std.

    ``env`` is the :class:`~grpo_probe.envs.gym_adapter.GymnasiumAdapter` of a PointMaze environment; the
    expert copies what it needs (the maze, the ball's dynamics, the state layout) and keeps no reference.
    """

    def __init__(self, env: Any, noise: float = 0.0) -> None:
        self.noise = checked_noise(noise)
        gym_id = env.params.gym_id
        maze = getattr(env.env, "maze", None)
        if maze is None:
            raise ValueError(
                f"{gym_id}: env.params.expert: PointMazeExpert drives Gymnasium-Robotics' PointMaze, and "
                f"{type(env.env).__name__} has no maze"
            )
        layout = {key: (start, stop) for key, start, stop in env.state_layout}
        for key, size in (("observation", 4), ("desired_goal", 2)):
            if key not in layout or layout[key][1] - layout[key][0] != size:
                raise ValueError(
                    f"{gym_id}: env.params.obs_keys: PointMazeExpert reads {key!r} ({size} numbers) from "
                    f"observation.state, whose entries are {', '.join(layout) or 'one Box'}"
                )
        self._ball = slice(*layout["observation"])
        self._goal = slice(*layout["desired_goal"])
        self.chunk_length = int(env.spec.chunk_length)
        self._walls = tuple(tuple(cell == 1 for cell in row) for row in maze.maze_map)
        self._scale = float(maze.maze_size_scaling)
        self._center = (float(maze.x_map_center), float(maze.y_map_center))
        model = env.model
        self._mass = float(model.body("particle").mass[0])
        self._damping = float(model.dof_damping[model.joint("ball_x").dofadr[0]])
        self._gear = float(model.actuator("motor_x").gear[0])
        self._h = float(model.opt.timestep)
        self._low, self._high = env.action_bounds

    # -- the maze ----------------------------------------------------------------------------------------
    def _cell(self, xy: np.ndarray) -> tuple[int, int]:
        """The (row, column) of the cell holding ``xy`` (Gymnasium-Robotics' ``cell_xy_to_rowcol``)."""
        (cx, cy), s = self._center, self._scale
        return math.floor((cy - xy[1]) / s), math.floor((xy[0] + cx) / s)

    def _cell_xy(self, cell: tuple[int, int]) -> np.ndarray:
        (cx, cy), s = self._center, self._scale
        return np.array([(cell[1] + 0.5) * s - cx, cy - (cell[0] + 0.5) * s])

    def _free(self, cell: tuple[int, int]) -> bool:
        i, j = cell
        return 0 <= i < len(self._walls) and 0 <= j < len(self._walls[i]) and not self._walls[i][j]

    def _path(self, start: tuple[int, int], goal: tuple[int, int]) -> list[tuple[int, int]]:
        """The shortest path of free cells from ``start`` to ``goal`` (both included); [] if none."""
        if not (self._free(start) and self._free(goal)):
            return []
        came: dict[tuple[int, int], tuple[int, int] | None] = {start: None}
        queue = deque([start])
        while queue:
            cell = queue.popleft()
            if cell == goal:
                path = [cell]
                while (prev := came[path[-1]]) is not None:
                    path.append(prev)
                return path[::-1]
            i, j = cell
            for step in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)):  # fixed order: a fixed path
                if step not in came and self._free(step):
                    came[step] = cell
                    queue.append(step)
        return []

    def _waypoint(self, pos: np.ndarray, goal: np.ndarray) -> np.ndarray:
        path = self._path(self._cell(pos), self._cell(goal))
        return goal if len(path) <= 2 else self._cell_xy(path[1])

    # -- the plan ----------------------------------------------------------------------------------------
    def plan_forces(self, obs: np.ndarray) -> np.ndarray:
        """Actions [chunk_length, 2] in the environment's bounds (units of 100 N) of the noiseless plan."""
        obs = np.asarray(obs, dtype=np.float64)
        pos, vel = obs[self._ball][:2].copy(), obs[self._ball][2:4].copy()
        goal = obs[self._goal].copy()
        m, b, h, gear = self._mass, self._damping, self._h, self._gear
        out = np.empty((self.chunk_length, 2))
        for k in range(self.chunk_length):
            to = self._waypoint(pos, goal) - pos
            desired = KP * to
            speed = float(np.linalg.norm(desired))
            if speed > VMAX_M_S:
                desired *= VMAX_M_S / speed
            vel = np.clip(vel, -SPEED_CLIP_M_S, SPEED_CLIP_M_S)
            force = m * KV * (desired - vel) + b * vel
            out[k] = np.clip(force / gear, self._low, self._high)
            # MuJoCo's Euler step, implicit in the joint damping: (m + h b) v' = m v + h F
            vel = (m * vel + h * gear * out[k]) / (m + h * b)
            pos = pos + h * vel
        return out

    def act(self, obs: np.ndarray, key: tuple[int, ...]) -> np.ndarray:
        """One normalized chunk [chunk_length, 2] in [-1, 1]; ``key`` names the noise stream."""
        forces = self.plan_forces(obs)
        actions = to_unit_range(forces, self._low, self._high)
        return noisy_chunk(actions, self.noise, "point_maze_expert_noise", key, NOISE_KNOTS)


class WallContactInfo(gymnasium.Wrapper):  # type: ignore[type-arg]
    """PointMaze with ``info["wall_contact"]``: the ball touches a wall geom at the end of the step.

    Read from the MuJoCo contacts after each step (and False at reset), without changing the episode.
    """

    def __init__(self, env: gymnasium.Env) -> None:  # type: ignore[type-arg]
        super().__init__(env)
        model = env.unwrapped.model
        names = [model.geom(g).name for g in range(model.ngeom)]
        self._walls = frozenset(g for g, name in enumerate(names) if name.startswith(WALL_PREFIX))
        if not self._walls:
            raise ValueError(
                f"env.params.wrappers: WallContactInfo reads PointMaze's wall geoms ({WALL_PREFIX}*), and "
                f"{type(env.unwrapped).__name__} has none"
            )

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return obs, {**info, "wall_contact": self._touching()}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "wall_contact": self._touching()}

    def _touching(self) -> bool:
        data = self.env.unwrapped.data
        contacts = data.contact
        return any(
            int(contacts.geom1[i]) in self._walls or int(contacts.geom2[i]) in self._walls
            for i in range(int(data.ncon))
        )
