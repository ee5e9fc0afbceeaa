"""gym-aloha's bimanual tasks for the environment server: a factory and a scene function.

Why here: gym-aloha 0.1.5 runs MuJoCo through dm_control and needs ``mujoco>=3.0,<3.9``; the probe pins
4.0.0. It runs in its own environment (``tools/make_sim_venv.sh aloha``), served to the probe by::

    .venvs/aloha/bin/python -m grpo_probe.serve env grpo_probe.serve.aloha_env:make \\
        --scene grpo_probe.serve.aloha_env:scene --port 18767

This module imports gym-aloha only when a task is built, so it ships in grpo-probe-serve.

- :func:`make` builds ``gym_aloha/AlohaInsertion-v0`` or ``gym_aloha/AlohaTransferCube-v0`` through
  ``gymnasium.make``, as gym-aloha registers them: its own ``reset(seed=)`` (which seeds the task and
  draws the objects' spawn from the seed), its own step, reward and success. Two changes, both for the
  probe: the observation is the state (the 14 joint positions, the 14 joint velocities, the objects'
  poses: what gym-aloha's task computes) instead of the 480 x 640 ``top`` image, and the task draws no
  image at a step (shipped, each step draws three 480 x 640 frames: 0.5 s a step on a CPU here); a
  camera-fed design reads the model's named cameras (``top``, ``angle``, ``left_wrist``, ...) drawn by
  the server at the size it registers. The environment's ``dt`` is set to dm_control's control period
  (0.02 s), which gym-aloha does not expose. gym-aloha passes the spawn to its task through a module
  global (``BOX_POSE``), so resets are serialized across the server's connections.
- :func:`scene` reads, in the table plane, the object the task moves (insertion: the peg; transfer: the
  cube) and where it must go (insertion: the socket; transfer: the left gripper's grasp point), the right
  gripper's grasp point (the effector), and says the object is engaged when it touches either robot.

gym-aloha ships no scripted expert (the scripted ACT policies that drive its end-effector tasks live in
the ACT repository, and gym-aloha 0.1.5 refuses to build those tasks): a design on it cannot clone its
reference arms from shipped demonstrations; docs/your-simulator-served.md says what was measured.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["BODIES", "TASKS", "make", "scene"]

TASKS: dict[str, str] = {
    "gym_aloha/AlohaInsertion-v0": "insertion",
    "gym_aloha/AlohaTransferCube-v0": "transfer_cube",
}
"""The served tasks: gym id -> gym-aloha's task name."""
BODIES: dict[str, tuple[str, str]] = {
    "insertion": ("peg", "socket"),
    "transfer_cube": ("box", "vx300s_left/camera_focus"),
}
"""gym-aloha's task name -> (the MuJoCo body the task moves, the body it must reach)."""
EFFECTOR = "vx300s_right/camera_focus"
"""The right gripper's grasp point (the gripper that takes the object first in both tasks)."""

_RESET = threading.Lock()
"""gym-aloha hands the seeded spawn to its task through the module global ``BOX_POSE`` (set in
``reset``, read by the task's ``initialize_episode``): two connections resetting at once on the server's
threads could each spawn the other's objects; one reset at a time."""


def _state_observation(task: Any, physics: Any) -> dict[str, Any]:
    """The task's observation without its images: what ``get_observation`` computes but the three
    480 x 640 frames it draws at every step (``images`` holds an empty ``top`` for gym-aloha's own
    formatting, which copies it)."""
    return {
        "qpos": task.get_qpos(physics),
        "qvel": task.get_qvel(physics),
        "env_state": task.get_env_state(physics),
        "images": {"top": np.zeros((0, 0, 3), dtype=np.uint8)},
    }


def make(gym_id: str, max_episode_steps: int | None = None) -> Any:
    """The gym-aloha task ``gym_id`` with the state as its observation, in a time limit of
    ``max_episode_steps`` (gym-aloha's 300 when None)."""
    import gym_aloha  # noqa: F401  (registers the tasks)
    import gymnasium

    if gym_id not in TASKS:
        raise ValueError(
            f"env.params.gym_id: gym-aloha has no served task {gym_id!r} (known: {', '.join(TASKS)})"
        )
    kwargs = {} if max_episode_steps is None else {"max_episode_steps": int(max_episode_steps)}
    # the checker would warn that the task's image-free observation is not the image space gym-aloha declares
    env = gymnasium.make(gym_id, obs_type="pixels", disable_env_checker=True, **kwargs)
    aloha = env.unwrapped
    task, physics = aloha._env.task, aloha._env.physics
    task.get_observation = types.MethodType(_state_observation, task)
    aloha.dt = float(aloha._env.control_timestep())  # gym-aloha's 50 Hz control period (its DT), for the spec
    width = 2 * len(task.get_qpos(physics)) + len(task.get_env_state(physics))

    class AlohaState(gymnasium.ObservationWrapper):  # type: ignore[type-arg]
        """The joint positions, the joint velocities and the objects' poses as one float64 vector."""

        def __init__(self, inner: Any) -> None:
            super().__init__(inner)
            self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (width,), np.float64)

        def observation(self, observation: Any) -> np.ndarray:
            return np.concatenate(
                [task.get_qpos(physics), task.get_qvel(physics), task.get_env_state(physics)]
            ).astype(np.float64)

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            with _RESET:
                return super().reset(seed=seed, options=options)

    return AlohaState(env)


class AlohaScene:
    """Positions, in the table plane, of the object, its target and the right gripper; engagement."""

    traces_effector = True

    def __init__(self, env: Any) -> None:
        unwrapped = env.unwrapped
        self._physics = unwrapped._env.physics
        self._object, self._goal = BODIES[str(unwrapped.task)]
        model = self._physics.model
        self._object_id = int(model.name2id(self._object, "body"))
        self._robot = np.array(
            [str(model.id2name(b, "body") or "").startswith("vx300s") for b in range(int(model.nbody))]
        )

    def _xy(self, body: str) -> np.ndarray:
        return np.asarray(self._physics.named.data.xpos[body][:2], dtype=np.float64)

    def positions(self) -> Mapping[str, Any]:
        return {
            "object_xy": self._xy(self._object),
            "goal_xy": self._xy(self._goal),
            "effector_xy": self._xy(EFFECTOR),
        }

    def engaged(self, info: Mapping[str, Any]) -> bool:
        """The object touches a link of either robot at the tick just stepped."""
        data, body = self._physics.data, self._physics.model.geom_bodyid
        for i in range(int(data.ncon)):
            a, b = int(body[data.contact[i].geom1]), int(body[data.contact[i].geom2])
            if (a == self._object_id and self._robot[b]) or (b == self._object_id and self._robot[a]):
                return True
        return False


def scene(env: Any) -> AlohaScene:
    """The scene function the server runs (``--scene grpo_probe.serve.aloha_env:scene``)."""
    return AlohaScene(env)
