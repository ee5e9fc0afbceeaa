"""Wrappers around Gymnasium-Robotics' PointMaze for the goal-conditioned adapter tests.

Why a module: the adapter names wrappers as ``module:callable`` (``env.params.wrappers``) and imports
them by that name, as every job of a design would, so they live here rather than inside a test.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

GOAL_SHIFT_M = 10.0
"""What :class:`ShiftedGoal` adds to ``desired_goal``: far beyond the maze, unmistakable."""


def wrapper_name(wrapper: type) -> str:
    """``module:Class`` of a wrapper defined here, whatever name pytest imported this module under."""
    return f"{wrapper.__module__}:{wrapper.__qualname__}"


def _distance(obs: dict[str, np.ndarray]) -> float:
    return float(np.linalg.norm(obs["achieved_goal"][:2] - obs["desired_goal"][:2]))


class DistanceInfo(gymnasium.Wrapper):  # type: ignore[type-arg]
    """Reports the ball-to-goal distance in ``info["distance_m"]`` at reset and after every step."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return obs, {**info, "distance_m": _distance(obs)}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "distance_m": _distance(obs)}


class ShiftedGoal(gymnasium.ObservationWrapper):  # type: ignore[type-arg]
    """Moves ``desired_goal`` by :data:`GOAL_SHIFT_M` in x and y: visible only if the wrapper stays on."""

    def observation(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**observation, "desired_goal": observation["desired_goal"] + GOAL_SHIFT_M}


class StateOnly(gymnasium.ObservationWrapper):  # type: ignore[type-arg]
    """A Dict observation without the goal entries: not a goal-conditioned Dict any more."""

    def __init__(self, env: gymnasium.Env) -> None:  # type: ignore[type-arg]
        super().__init__(env)
        self.observation_space = gymnasium.spaces.Dict({"observation": env.observation_space["observation"]})

    def observation(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"observation": observation["observation"]}


class WithPhase(gymnasium.ObservationWrapper):  # type: ignore[type-arg]
    """Adds a ``phase`` entry that is a Discrete space, which observation.state cannot hold."""

    def __init__(self, env: gymnasium.Env) -> None:  # type: ignore[type-arg]
        super().__init__(env)
        self.observation_space = gymnasium.spaces.Dict(
            {**env.observation_space.spaces, "phase": gymnasium.spaces.Discrete(3)}
        )

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        return {**observation, "phase": 0}


class AsTuple(gymnasium.ObservationWrapper):  # type: ignore[type-arg]
    """A Tuple observation (the ball's state, the goal): neither a Box nor a Dict."""

    def __init__(self, env: gymnasium.Env) -> None:  # type: ignore[type-arg]
        super().__init__(env)
        self.observation_space = gymnasium.spaces.Tuple(
            (env.observation_space["observation"], env.observation_space["desired_goal"])
        )

    def observation(self, observation: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        return observation["observation"], observation["desired_goal"]
