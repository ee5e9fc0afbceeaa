"""Behaviour-cloning demonstrations from any environment with a scripted expert.

Why the same loop for every environment: a demonstration is what the expert saw at a replan and the
chunk it planned there (unexecuted actions included), exactly what a policy maps; the boat's demos
come out of this loop byte for byte as they did from :func:`grpo_probe.envs.boat.demos.collect_demos`.
With cameras, each replan also records each camera's frame, rendered before the expert acts: the
frame a policy reading that camera would see at that replan.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from grpo_probe.envs.demo_set import Demos
from grpo_probe.envs.observation import CameraConfig
from grpo_probe.envs.protocol import Environment
from grpo_probe.envs.registry import EnvConfig, make_env, make_expert

__all__ = ["collect_env_demos"]


def collect_env_demos(
    config: EnvConfig,
    seeds: Sequence[int],
    noise: float,
    run_key: int = 0,
    cameras: Sequence[CameraConfig] = (),
) -> Demos:
    """Run the environment's expert on every seed; its noise is keyed by (run_key, seed, replan).

    ``cameras``: record each one's frame (``env.render(name, height, width)``) at every replan into
    ``Demos.images[observation.images.<name>]``; without cameras nothing is rendered.
    """
    env = make_env(config)
    expert = make_expert(config, noise)
    n_executed = env.spec.executed_actions
    _check_cameras(cameras, env.spec.cameras, config.id)
    obs_rows: list[np.ndarray] = []
    chunk_rows: list[np.ndarray] = []
    seed_rows: list[int] = []
    frame_rows: dict[str, list[np.ndarray]] = {c.key: [] for c in cameras}
    for seed in seeds:
        obs = env.reset(int(seed))
        while not env.done:
            for camera in cameras:
                frame_rows[camera.key].append(_render(env, camera, config.id))
            chunk = expert.act(obs, (run_key, int(seed), env.replan_index))
            obs_rows.append(obs)
            chunk_rows.append(chunk)
            seed_rows.append(int(seed))
            obs = env.execute(chunk, n_executed)
    return Demos(
        obs=np.stack(obs_rows).astype(np.float32),
        chunks=np.stack(chunk_rows).astype(np.float32),
        seeds=np.asarray(seed_rows, dtype=np.int64),
        images={key: np.stack(rows) for key, rows in sorted(frame_rows.items())},
    )


def _check_cameras(cameras: Sequence[CameraConfig], env_cameras: Sequence[str], env_id: str) -> None:
    names = [c.name for c in cameras]
    if len(set(names)) != len(names):
        raise ValueError(f"demos of {env_id!r}: cameras must be distinct, got {', '.join(names)}")
    missing = [n for n in names if n not in env_cameras]
    if missing:
        raise ValueError(
            f"demos of {env_id!r}: the environment renders no camera {', '.join(map(repr, missing))} "
            f"(its cameras: {', '.join(env_cameras) or 'none'})"
        )


def _render(env: Environment, camera: CameraConfig, env_id: str) -> np.ndarray:
    frame = env.render(camera.name, camera.height, camera.width)  # type: ignore[attr-defined]
    expected = (camera.height, camera.width, 3)
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.shape != expected:
        found = f"{getattr(frame, 'dtype', type(frame).__name__)} {getattr(frame, 'shape', '')}"
        raise ValueError(
            f"demos of {env_id!r}: camera {camera.name!r} rendered {found}, expected uint8 {expected}"
        )
    return frame
