"""Making a Gymnasium environment for the adapter, and finding in it what the params name.

Why apart from the adapter's stepping: everything here runs once, when an environment is built, and
each refusal names the design field at fault (a body the model lacks, an observation entry that is not
a position, a joint a replay cannot shift, a simulator the adapter cannot read); the adapter
(:mod:`grpo_probe.envs.gym_adapter`) keeps only what runs per episode and per tick.
"""

from __future__ import annotations

import inspect
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from grpo_probe.envs.gym_params import GOAL_ENV_KEYS, GymnasiumParams, PointSource
from grpo_probe.envs.scene import SCENE_DOCS, SCENE_SIGNATURE
from grpo_probe.user_code import load_callable

__all__ = [
    "check_point",
    "distribution_version",
    "import_gymnasium",
    "make_wrapped",
    "perturbed_coordinates",
    "remove_generated_scene",
    "state_layout",
    "unreadable",
    "wrapper_chain",
]


def import_gymnasium() -> Any:
    try:
        import gymnasium
    except ImportError as exc:  # pragma: no cover - gymnasium is a dependency of the package
        raise ImportError(
            f"the Gymnasium adapter needs gymnasium (pip install 'gymnasium>=1.0,<2'): {exc}"
        ) from exc
    return gymnasium


def distribution_version(module: str) -> str | None:
    """``name version`` of the installed distribution that ships top-level ``module``, if one does."""
    for name in (module, module.replace("_", "-")):
        try:
            return f"{name.replace('_', '-')} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return None


def wrapper_chain(env: Any) -> list[Any]:
    """The environments from the outermost wrapper inwards, the unwrapped one last."""
    chain = [env]
    while hasattr(chain[-1], "env") and chain[-1] is not chain[-1].unwrapped:
        chain.append(chain[-1].env)
    return chain


def remove_generated_scene(unwrapped: Any) -> None:
    """Remove the scene file a Gymnasium-Robotics maze wrote for itself, once its model is built.

    Why: the mazes (PointMaze and AntMaze alike) write their generated MJCF to the system's temporary
    folder as ``ant_maze<time>.xml`` (``tmp_xml_file_path``) and never remove it, so every rollout job
    and every environment made in a process would leave a file behind. MuJoCo compiles the model from it
    while the environment is made and nothing reads it again (a reset moves the goal and the ball within
    the built model). Only a file of that name, directly in the temporary folder, is removed.
    """
    path = getattr(unwrapped, "tmp_xml_file_path", None)
    if not isinstance(path, str):
        return
    scene = Path(path)
    written_by_the_maze = scene.name.startswith("ant_maze") and scene.suffix == ".xml"
    if written_by_the_maze and scene.parent == Path(tempfile.gettempdir()):
        scene.unlink(missing_ok=True)


def _dm_control_physics(unwrapped: Any) -> bool:
    """True when the environment (or an object it holds) has a dm_control-style ``physics``: MuJoCo run
    through dm_control, as gym-aloha does, whose model and data the adapter does not reach."""
    if hasattr(unwrapped, "physics"):
        return True
    return any(hasattr(value, "physics") for value in vars(unwrapped).values())


def unreadable(unwrapped: Any, gym_id: str) -> ValueError:
    """The refusal for an environment the adapter cannot read: what it is, and exactly what to provide."""
    kind = type(unwrapped).__name__
    if _dm_control_physics(unwrapped):
        what = (
            f"{kind} runs MuJoCo through dm_control (its physics object), whose bodies and joints the "
            "adapter does not look up by name"
        )
    else:
        module = type(unwrapped).__module__.split(".")[0]
        what = (
            f"{kind} (module {module}) is not a MuJoCo environment, so the adapter has no bodies, sites "
            "or joints to look up by name"
        )
    return ValueError(
        f"{gym_id}: env.params.gym_id: {what}. Bind it through a scene function of yours: "
        f'env.params.scene: "module:callable", {SCENE_SIGNATURE} (see {SCENE_DOCS})'
    )


def make_wrapped(params: GymnasiumParams, env: Any | None) -> Any:
    """The environment to step: ``env``, or ``gymnasium.make`` with the registered time limit, then
    ``params.wrappers`` around it in order."""
    gymnasium = import_gymnasium()
    if env is None:
        kwargs = dict(params.gym_kwargs)
        kwargs.setdefault("max_episode_steps", params.episode_ticks)
        try:
            env = gymnasium.make(params.gym_id, **kwargs)
        except ImportError as exc:
            raise ValueError(
                f"{params.gym_id}: env.params.gym_id: cannot import the module that registers it "
                f"({exc}); install it (Gymnasium-Robotics: pip install 'grpo-probe[robotics]')"
            ) from exc
        except gymnasium.error.Error as exc:
            raise ValueError(
                f"{params.gym_id}: env.params.gym_id: Gymnasium cannot make it ({type(exc).__name__}: "
                f"{exc}); an id another package registers is named with its module, as "
                "'gymnasium_robotics:PointMaze_UMaze-v3' (pip install 'grpo-probe[robotics]')"
            ) from exc
    elif params.gym_kwargs:
        raise ValueError(
            f"{params.gym_id}: env.params.gym_kwargs: the environment was built by your factory, "
            "so there is no gymnasium.make to pass them to"
        )
    for i, path in enumerate(params.wrappers):
        env = load_callable(path, f"env.params.wrappers[{i}]")(env)
    return env


def state_layout(params: GymnasiumParams, space: Any) -> tuple[tuple[str, int, int], ...]:
    """(entry, start, stop) of each Dict entry in ``observation.state``; one ``("", 0, n)`` for a Box.

    An observation space the adapter cannot read as one vector is an error naming the field.
    """
    gymnasium = import_gymnasium()
    gym_id, keys = params.gym_id, params.obs_keys
    if isinstance(space, gymnasium.spaces.Box):
        if len(space.shape) != 1:
            raise ValueError(
                f"{gym_id}: env.params.gym_id: the observation space is {space}; the adapter reads a "
                "1-D Box, or a Dict of Box entries (env.params.obs_keys); flatten it with a wrapper "
                "(env.params.wrappers: [gymnasium.wrappers:FlattenObservation])"
            )
        if keys:
            raise ValueError(
                f"{gym_id}: env.params.obs_keys: the observation space is a Box, not a Dict; "
                "leave obs_keys out"
            )
        return (("", 0, int(space.shape[0])),)
    if not isinstance(space, gymnasium.spaces.Dict):
        raise ValueError(
            f"{gym_id}: env.params.gym_id: the observation space is {space}; the adapter reads a "
            "1-D Box, or a Dict of Box entries (env.params.obs_keys); wrap it into one "
            "(env.params.wrappers)"
        )
    entries = list(space.spaces)
    if not keys:
        if set(entries) != set(GOAL_ENV_KEYS):
            raise ValueError(
                f"{gym_id}: env.params.obs_keys: the observation space is a Dict with entries "
                f"{', '.join(entries)}; list the ones observation.state concatenates, in order"
            )
        keys = GOAL_ENV_KEYS
    layout, start = [], 0
    for i, key in enumerate(keys):
        if key not in space.spaces:
            raise ValueError(
                f"{gym_id}: env.params.obs_keys[{i}]: the observation Dict has no entry {key!r} "
                f"(its entries: {', '.join(entries)})"
            )
        entry = space.spaces[key]
        if not isinstance(entry, gymnasium.spaces.Box):
            raise ValueError(
                f"{gym_id}: env.params.obs_keys[{i}]: observation entry {key!r} is {entry}; "
                "observation.state concatenates Box entries only"
            )
        size = int(np.prod(entry.shape, dtype=np.int64))
        layout.append((key, start, start + size))
        start += size
    return tuple(layout)


def check_point(point: PointSource, gym_id: str, unwrapped: Any, sim: Any | None, space: Any) -> None:
    """The body, site or observation entry ``point`` names exists and holds a position; else an error
    naming the field (``sim`` is the MuJoCo simulator, None when the adapter reads none)."""
    gymnasium = import_gymnasium()
    if point.in_model:
        if sim is None:
            raise unreadable(unwrapped, gym_id)
        try:
            getattr(sim.model, point.place)(point.name)
        except KeyError:
            raise ValueError(
                f"{gym_id}: no MuJoCo {point.place} named {point.name!r} ({point.field})"
            ) from None
        return
    if not isinstance(space, gymnasium.spaces.Dict):
        raise ValueError(
            f"{gym_id}: {point.field}: the observation space is {space}, not a Dict with entries to read"
        )
    entry = space.spaces.get(point.name)
    if entry is None:
        raise ValueError(
            f"{gym_id}: {point.field}: the observation Dict has no entry {point.name!r} "
            f"(its entries: {', '.join(space.spaces)})"
        )
    if not isinstance(entry, gymnasium.spaces.Box) or int(np.prod(entry.shape)) < 2:
        raise ValueError(
            f"{gym_id}: {point.field}: observation entry {point.name!r} is {entry}; "
            "a position needs a Box of at least 2 numbers (x, y first)"
        )


def perturbed_coordinates(params: GymnasiumParams, unwrapped: Any, sim: Any | None) -> np.ndarray:
    """qpos addresses a state perturbation moves; an unknown or a ball joint is an error naming it."""
    addresses: list[int] = []
    if not params.perturb_joints:
        return np.array(addresses, dtype=np.intp)
    if sim is None:
        raise unreadable(unwrapped, params.gym_id)
    model = sim.model
    for name in params.perturb_joints:
        try:
            joint = model.joint(name)
        except KeyError:
            raise ValueError(
                f"{params.gym_id}: no MuJoCo joint named {name!r} (env.params.perturb_joints)"
            ) from None
        kind, start = int(model.jnt_type[joint.id]), int(model.jnt_qposadr[joint.id])
        if kind == 0:  # mjJNT_FREE: x and y of its position
            addresses += [start, start + 1]
        elif kind in (2, 3):  # mjJNT_SLIDE, mjJNT_HINGE: their one coordinate
            addresses.append(start)
        else:
            raise ValueError(
                f"{params.gym_id}: joint {name!r} is a ball joint; env.params.perturb_joints takes "
                "slide, hinge or free joints"
            )
    if addresses and not _observes_state_directly(unwrapped, sim):
        raise ValueError(
            f"{params.gym_id}: env.params.perturb_joints: {type(unwrapped).__name__} builds its "
            "observation from its step's results, so the adapter cannot observe a shifted spawn; "
            "leave perturb_joints out (replays can perturb actions)"
        )
    return np.array(addresses, dtype=np.intp)


def _observes_state_directly(unwrapped: Any, sim: Any) -> bool:
    """True when the unwrapped environment simulates itself and ``_get_obs()`` observes its state."""
    get_obs = getattr(unwrapped, "_get_obs", None)
    if sim is not unwrapped or not callable(get_obs):
        return False
    required = [
        p
        for p in inspect.signature(get_obs).parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return not required
