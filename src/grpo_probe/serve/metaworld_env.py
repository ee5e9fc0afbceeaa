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
  the task's object (push: the puck; door-open: the handle) and MetaWorld's own target.
- ``expert_chunk`` is MetaWorld's shipped scripted policy for the task (``SawyerReachV3Policy``, ...):
  its action at the observation, held over the chunk, with keyed Gaussian noise per action, clipped to
  [-1, 1] (MetaWorld's action bounds, so the probe's normalized actions are its own).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["expert_policy", "make", "scene"]

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
        known = ", ".join(sorted(metaworld.ALL_V3_ENVIRONMENTS)[:6])
        raise ValueError(f"env.params.gym_id: MetaWorld has no task {gym_id!r} (e.g. {known}, ...)")
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
        hand = np.asarray(self._env.tcp_center, dtype=np.float64)
        moved = hand if self._reach else np.asarray(self._env._get_pos_objects(), dtype=np.float64)[:3]
        goal = np.asarray(self._env._target_pos, dtype=np.float64)
        return {
            "object_xy": moved[:2],
            "goal_xy": goal[:2],
            "effector_xy": None if self._reach else hand[:2],
        }

    def expert_chunk(
        self, obs: np.ndarray, key: tuple[int, ...], noise: float, chunk_length: int
    ) -> np.ndarray:
        action = np.clip(self._policy.get_action(np.asarray(obs, dtype=np.float64)), -1.0, 1.0)
        rng = np.random.default_rng([*(int(k) for k in key), 0x3E7A])
        chunk = np.repeat(action[None, :], chunk_length, axis=0)
        if noise:
            chunk = chunk + noise * rng.standard_normal(chunk.shape)
        return np.clip(chunk, -1.0, 1.0).astype(np.float32)


def scene(env: Any) -> MetaWorldScene:
    """The scene function the server runs (``--scene grpo_probe.serve.metaworld_env:scene``)."""
    return MetaWorldScene(env)
