"""MetaWorld's tasks for the environment server: a factory, a scene function and the shipped experts.

Why here: MetaWorld 3.1.1 pins ``mujoco==3.3.0`` and so runs in its own environment
(``tools/make_sim_venv.sh metaworld``), served to the probe by::

    .venvs/metaworld/bin/python -m grpo_probe.serve env grpo_probe.serve.metaworld_env:make \\
        --scene grpo_probe.serve.metaworld_env:scene --port 8766

and a design binds it as ``env: {source: server, address: ws://127.0.0.1:8766, params: {gym_id: reach-v3,
...}}``. This module imports MetaWorld only when a task is built, so it ships in grpo-probe-serve.

- :func:`make` builds a task (``reach-v3``, ``push-v3``, ``door-open-v3``, any of MetaWorld's 50)
  whose spawn is a pure function of the reset seed: MetaWorld ignores ``reset(seed=)``, so the wrapper
  calls its ``seed(seed)`` first, and the task draws its object and goal from that seeded generator
  (``seeded_rand_vec``) instead of one of the benchmark's 50 frozen task vectors. A seeded episode
  replays bit for bit, in a fresh environment or a reused one.
- :func:`scene` reads the positions the probe measures in the table plane: the hand's centre (reach) or
  the task's object (push: the puck; door-open: the handle) and MetaWorld's own target. Right after a
  reset it reads them from a copy of the state brought forward: some tasks move a body in the model at
  reset (drawer-open places its drawer) and MuJoCo's derived positions hold the old place until the
  first step, so the spawn distance would be another spawn's.
- Engagement (every task that moves an object, so not reach): a link of the Sawyer arm, its gripper
  included, touches a body that moves and is not the arm, at the end of a tick. Why contact and not
  MetaWorld's ``info``: its ``near_object`` and ``grasp_success`` mean something else in each task
  (``near_object`` is a distance in reach-v3, a reward in door-open-v3 and always 0 in door-close-v3;
  ``grasp_success`` is always 1 in dial-turn-v3 and "the gripper is open" in button-press-v3), and an
  object's displacement from its spawn is not the arm's doing in all of them (with the arm held still,
  door-close-v3's door swings 10 cm and box-close-v3's lid moves 8.6 cm in 60 ticks). With the arm held
  still (60 ticks, two seeds) no such contact occurs in 46 of the 48 tasks that move an object;
  handle-press-v3 and peg-unplug-side-v3 spawn the gripper against their object.
- ``expert_chunk`` is MetaWorld's shipped scripted policy for the task (``SawyerReachV3Policy``, ...):
  its action at the observation, held over the chunk, with keyed Gaussian noise per action, clipped to
  [-1, 1] (MetaWorld's action bounds, so the probe's normalized actions are its own).
"""

from __future__ import annotations

import copy
import difflib
import threading
from typing import Any

import numpy as np

__all__ = ["ARM_ROOT", "expert_policy", "make", "scene"]

ARM_ROOT = "right_arm_base_link"
"""The Sawyer arm's base link in every MetaWorld task's model: the arm is it and every body under it (the
links, the hand, the claws and their pads)."""

_BUILD = threading.Lock()
"""MetaWorld builds a benchmark's task vectors under NumPy's global generator (seeded, then restored), so
two connections building at once on the server's threads can draw each other's numbers (MetaWorld then
fails: "Only generated 49 unique goals, not 50"); one build at a time."""


def expert_policy(task: str) -> Any:
    """A new instance of MetaWorld's scripted policy for ``task`` (``door-open-v3``), from the suite's own
    registry, ``metaworld.policies.ENV_POLICY_MAP``.

    Why the registry and not a name built from the task's: MetaWorld's class names do not all follow its
    task names (``peg-insert-side-v3`` is ``SawyerPegInsertionSideV3Policy``), and the registry is where
    the suite says which task each expert belongs to.
    """
    from metaworld import policies

    registry = policies.ENV_POLICY_MAP
    if task not in registry:
        known = ", ".join(sorted(registry)[:6])
        raise ValueError(
            f"env.params.gym_id: MetaWorld ships no scripted expert for {task!r} "
            f"({len(registry)} tasks have one: {known}, ...)"
        )
    return registry[task]()


def make(gym_id: str, max_episode_steps: int | None = None) -> Any:
    """The MetaWorld task ``gym_id`` (``reach-v3``), seeded by ``reset(seed=)``, in a time limit of
    ``max_episode_steps`` (MetaWorld's ``max_path_length`` when None)."""
    import gymnasium
    import metaworld

    if gym_id not in metaworld.ALL_V3_ENVIRONMENTS:
        tasks = sorted(metaworld.ALL_V3_ENVIRONMENTS)
        close = difflib.get_close_matches(gym_id, tasks, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"env.params.gym_id: MetaWorld has no task {gym_id!r}{hint} (its {len(tasks)} tasks: "
            f"{', '.join(tasks)})"
        )
    with _BUILD:
        benchmark = metaworld.MT1(gym_id, seed=0)
        env = benchmark.train_classes[gym_id]()
        env.set_task(benchmark.train_tasks[0])  # sets the task up; its frozen vector is then released
    env._freeze_rand_vec = False
    env.seeded_rand_vec = True
    env.grpo_probe_task = gym_id  # the scene's expert is this task's scripted policy

    class SeededReset(gymnasium.Wrapper):  # type: ignore[type-arg]
        """``reset(seed=)`` seeds MetaWorld's generator (``env.seed``) before it resets."""

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            if seed is not None:
                self.env.unwrapped.seed(seed)
            return self.env.reset(seed=seed, options=options)

    limit = int(max_episode_steps) if max_episode_steps is not None else int(env.max_path_length)
    return SeededReset(gymnasium.wrappers.TimeLimit(env, limit))


class MetaWorldScene:
    """Positions, in the table plane, of what a MetaWorld task moves and of its target; the expert."""

    def __init__(self, env: Any) -> None:
        self._env = env.unwrapped
        self._task = type(self._env).__name__
        self._reach = self._task.startswith("SawyerReach")
        self.traces_effector = not self._reach
        name = str(self._env.grpo_probe_task)
        self._policy = expert_policy(name)

    def positions(self) -> dict[str, Any]:
        if int(self._env.curr_path_length) == 0:  # just reset: MuJoCo's derived positions may be stale
            return self._brought_forward()
        return self._read()

    def _read(self) -> dict[str, Any]:
        hand = np.asarray(self._env.tcp_center, dtype=np.float64)
        moved = hand if self._reach else np.asarray(self._env._get_pos_objects(), dtype=np.float64)[:3]
        goal = np.asarray(self._env._target_pos, dtype=np.float64)
        return {
            "object_xy": moved[:2],
            "goal_xy": goal[:2],
            "effector_xy": None if self._reach else hand[:2],
        }

    def _brought_forward(self) -> dict[str, Any]:
        """The positions of the state as it is, read from a copy on which MuJoCo's forward pass ran.

        Why a copy: a forward pass on the live state changes the bits of the steps after it (MuJoCo's
        solver starts from what the pass leaves), so an episode would no longer be the one MetaWorld steps.
        """
        import mujoco

        live = self._env.data
        scratch = copy.copy(live)
        mujoco.mj_forward(self._env.model, scratch)
        self._env.data = scratch
        try:
            return self._read()
        finally:
            self._env.data = live

    def expert_chunk(
        self, obs: np.ndarray, key: tuple[int, ...], noise: float, chunk_length: int
    ) -> np.ndarray:
        action = np.clip(self._policy.get_action(np.asarray(obs, dtype=np.float64)), -1.0, 1.0)
        rng = np.random.default_rng([*(int(k) for k in key), 0x3E7A])
        chunk = np.repeat(action[None, :], chunk_length, axis=0)
        if noise:
            chunk = chunk + noise * rng.standard_normal(chunk.shape)
        return np.clip(chunk, -1.0, 1.0).astype(np.float32)


class MetaWorldObjectScene(MetaWorldScene):
    """A task that moves an object: the scene above, and engagement by contact with the arm."""

    engagement = (
        "a link of the Sawyer arm (its gripper included) touches a body that moves and is not the arm, "
        "at the end of some tick"
    )
    """What engagement means here, in decision.md's words."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        model = self._env.model
        root = int(model.body(ARM_ROOT).id)
        parent = np.asarray(model.body_parentid)
        arm = np.zeros(int(model.nbody), dtype=bool)
        for body in range(int(model.nbody)):
            up = body
            while up not in (root, 0):
                up = int(parent[up])
            arm[body] = up == root
        self._arm = arm
        self._moves = (np.asarray(model.body_weldid) != 0) & ~arm  # a body with a joint, or under one
        self._geom_body = np.asarray(model.geom_bodyid).copy()

    def engaged(self, info: Any) -> bool:
        """Whether the arm touches a body that moves at the end of the tick just stepped (a contact at
        distance 0 or less: MuJoCo also lists geoms that are only within their margin)."""
        del info
        contacts = self._env.data.contact
        touching = np.asarray(contacts.dist) <= 0.0
        first = self._geom_body[np.asarray(contacts.geom1)[touching]]
        second = self._geom_body[np.asarray(contacts.geom2)[touching]]
        found = (self._arm[first] & self._moves[second]) | (self._arm[second] & self._moves[first])
        return bool(found.any())


def scene(env: Any) -> MetaWorldScene:
    """The scene function the server runs (``--scene grpo_probe.serve.metaworld_env:scene``): with
    engagement for a task that moves an object, without it for reach (whose object is the hand)."""
    if type(env.unwrapped).__name__.startswith("SawyerReach"):
        return MetaWorldScene(env)
    return MetaWorldObjectScene(env)
