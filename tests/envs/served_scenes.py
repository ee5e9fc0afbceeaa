"""A scene function for Gymnasium's Pusher-v5, run in process or on an environment server.

Why a module: the byte-identity test binds the same Pusher-v5 twice, once in the probe's process with this
scene (``env.params.scene``) and once served from another process whose server runs this scene
(``--scene envs.served_scenes:PusherScene``, with tests/ on its ``PYTHONPATH``), and compares the rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grpo_probe.envs.scene import ScenePositions


class PusherScene:
    """The object, the goal and the arm's tip of Pusher-v5 read from its MuJoCo data; the object's slide
    joints shifted for a replay; engagement: the tip within 6 cm of the object."""

    traces_effector = True
    state_perturbation = "the object's spawn position in the table plane"
    engagement = "the arm's tip within 6 cm of the object at the end of some tick"

    def __init__(self, env: Any) -> None:
        self._env = env.unwrapped

    def _xy(self, body: str) -> tuple[float, float]:
        pos = self._env.data.body(body).xpos
        return float(pos[0]), float(pos[1])

    def positions(self) -> ScenePositions:
        return ScenePositions(
            object_xy=self._xy("object"), goal_xy=self._xy("goal"), effector_xy=self._xy("tips_arm")
        )

    def perturb(self, rng: np.random.Generator, scale: float) -> Any:
        direction = rng.standard_normal(2)
        direction /= float(np.linalg.norm(direction))
        qpos, qvel = self._env.data.qpos.copy(), self._env.data.qvel.copy()
        qpos[-4:-2] += scale * direction
        self._env.set_state(qpos, qvel)
        return self._env._get_obs()

    def engaged(self, info: Any) -> bool:
        (ox, oy), (tx, ty) = self._xy("object"), self._xy("tips_arm")
        return bool(np.hypot(ox - tx, oy - ty) < 0.06)


class PusherSketchScene(PusherScene):
    """:class:`PusherScene` with a camera it draws itself (``sketch``): the object, the goal and the arm's
    tip as squares on a 1 m x 1 m top view of the table around (0.4, -0.4), as a simulator that draws its
    own view (gym-pusht) would."""

    cameras = ("sketch",)

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        frame = np.full((height, width, 3), 40, dtype=np.uint8)
        for body, colour in (("goal", (0, 200, 0)), ("object", (220, 30, 30)), ("tips_arm", (30, 30, 220))):
            x, y = self._xy(body)
            row = int(np.clip((0.1 - y) * height, 0, height - 1))
            col = int(np.clip((x + 0.1) * width, 0, width - 1))
            frame[max(row - 1, 0) : row + 2, max(col - 1, 0) : col + 2] = colour
        return frame
