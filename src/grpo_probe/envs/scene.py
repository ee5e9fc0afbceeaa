"""The scene function: how the Gymnasium adapter measures a simulator whose state it cannot read itself.

Why: the adapter reads the object, the goal and a replay's state shift from a MuJoCo model (bodies,
sites, joints) or from a ``Dict`` observation's entries. A simulator that is not MuJoCo (gym-pusht runs
pymunk) or that drives MuJoCo through dm_control (gym-aloha: a ``physics`` object, no ``model`` and
``data``) offers neither, yet only its authors' code knows where its object and its goal are. So a design
names a small function of the lab's own (``env.params.scene: "labenv.pusht:PushTScene"``) that the
adapter calls where it cannot read things itself, and nothing else changes: the adapter still resets and
steps the environment through Gymnasium, every wrapper on.

The contract, exactly (:data:`SCENE_SIGNATURE`): the name is called once per environment as
``scene(env)``, with the outermost (wrapped) Gymnasium environment, and returns an object with

- ``positions() -> ScenePositions`` (required): the object's and the goal's planar x, y in metres, read
  from the live environment, and optionally the effector's; called after every reset and every tick;
- ``perturb(rng, scale) -> observation`` (optional): shift the state right after a reset by ``scale``
  (metres for a position) in a direction drawn from ``rng`` only, the keyed generator the replay owns,
  and return the unwrapped environment's observation of the shifted state; its ``state_perturbation``
  attribute says what it moves (decision.md's words);
- ``engaged(info) -> bool`` (optional): whether the effector engages the object at the tick just stepped
  (``info`` is the step's); without it, engagement is the adapter's (``engaged_info_key`` or the
  distance moving); its ``engagement`` attribute (optional) says what it means, in decision.md's words;
- ``traces_effector`` (optional, default False): ``positions()`` also returns ``effector_xy``, drawn in
  the top-down figure;
- ``cameras`` (optional, default none) and ``render(camera, height, width) -> uint8 [height, width, 3]``:
  the named views the simulator draws itself (gym-pusht's pygame top view, a dm_control camera), for a
  camera-fed policy (``observation.images.<camera>``); the adapter lists them in ``spec.cameras``, so a
  design registers them by name (``observation.cameras``), and asks ``render`` for the current state's
  frame at the registered size. A frame must be a pure function of the simulator's state.

Everything the scene returns is checked where it enters (:class:`BoundScene`): a missing method, a wrong
type or shape, a non-finite number, each an error naming ``env.params.scene`` and the function. The
scene must be deterministic: the same seed and actions give the same positions, in any process (the
parallel oracle holds it to that), and ``perturb`` draws from ``rng`` alone (the replay oracle does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from grpo_probe.render_setup import checked_frame, scene_cameras

__all__ = [
    "SCENE_DOCS",
    "SCENE_FIELD",
    "SCENE_SIGNATURE",
    "BoundScene",
    "Scene",
    "ScenePositions",
]

SCENE_FIELD = "env.params.scene"
"""The design field that names a scene function."""
SCENE_SIGNATURE = (
    "scene(env) -> an object with positions() -> grpo_probe.envs.scene.ScenePositions(object_xy=(x, y), "
    "goal_xy=(x, y)) in metres, and optionally perturb(rng, scale) -> observation, engaged(info) -> bool, "
    "and cameras (names) with render(camera, height, width) -> uint8 [height, width, 3]"
)
"""The contract in one line, as the adapter's refusals print it."""
SCENE_DOCS = 'docs/your-simulator.md, "Any simulator: the scene function"'
"""Where the contract is explained, as the adapter's refusals point to it."""


def _xy(value: Any, name: str) -> tuple[float, float]:
    """Two finite numbers (x, y in metres) as floats; else a ``ValueError`` naming ``name``."""
    array = np.asarray(value, dtype=object).ravel() if not isinstance(value, (str, bytes)) else None
    if array is None or array.size != 2:
        raise ValueError(f"ScenePositions.{name} must be 2 numbers (x, y in metres), got {value!r}")
    try:
        x, y = (float(v) for v in array)
    except (TypeError, ValueError):
        raise ValueError(f"ScenePositions.{name} must be 2 numbers (x, y in metres), got {value!r}") from None
    if not (math.isfinite(x) and math.isfinite(y)):
        raise ValueError(f"ScenePositions.{name} must be finite, got ({x!r}, {y!r})")
    return x, y


@dataclass(frozen=True)
class ScenePositions:
    """Where the object, the goal and (optionally) the effector are in the table plane, in metres.

    Any pair of numbers is accepted (a tuple, a list, a NumPy array of 2) and stored as two floats, so a
    record's bytes do not depend on the type the scene happened to return.
    """

    object_xy: tuple[float, float]
    goal_xy: tuple[float, float]
    effector_xy: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "object_xy", _xy(self.object_xy, "object_xy"))
        object.__setattr__(self, "goal_xy", _xy(self.goal_xy, "goal_xy"))
        if self.effector_xy is not None:
            object.__setattr__(self, "effector_xy", _xy(self.effector_xy, "effector_xy"))


@runtime_checkable
class Scene(Protocol):
    """What ``scene(env)`` returns: ``positions()`` at least (see the module docstring for the rest)."""

    def positions(self) -> ScenePositions: ...


def _text(scene: Any, name: str, where: str) -> str | None:
    """The scene's optional text attribute ``name``: None when absent, else a non-empty string."""
    text = getattr(scene, name, None)
    if text is not None and (not isinstance(text, str) or not text):
        raise ValueError(f"{where}: {name} must be a non-empty string, got {text!r}")
    return text


class BoundScene:
    """A lab's scene object behind the checks: each call's result is validated where it enters.

    ``name`` is the ``module:callable`` the design registers; every error names :data:`SCENE_FIELD` and it.
    """

    def __init__(self, factory: Callable[[Any], Any], name: str, env: Any) -> None:
        self.name = name
        where = f"{SCENE_FIELD}: {name!r}"
        try:
            scene = factory(env)
        except Exception as exc:
            raise ValueError(
                f"{where} failed when called as scene(env): {type(exc).__name__}: {exc}"
            ) from exc
        self._where = where
        self._label = f"{name}(env)"
        if not callable(getattr(scene, "positions", None)):
            raise ValueError(
                f"{where} returned {type(scene).__name__}, which has no positions() method; the scene "
                f"contract: {SCENE_SIGNATURE} ({SCENE_DOCS})"
            )
        for optional in ("perturb", "engaged", "render"):
            member = getattr(scene, optional, None)
            if member is not None and not callable(member):
                raise ValueError(
                    f"{where}: {type(scene).__name__}.{optional} must be a method, got {member!r}"
                )
        self._scene = scene
        self.cameras = scene_cameras(scene, f"{where}: {type(scene).__name__}")
        """The cameras the scene draws itself (``render``); none by default."""
        self.traces_effector = bool(getattr(scene, "traces_effector", False))
        self.offers_perturbation = callable(getattr(scene, "perturb", None))
        self.offers_engagement = callable(getattr(scene, "engaged", None))
        text = _text(scene, "state_perturbation", where)
        self.state_perturbation: str | None = (
            None
            if not self.offers_perturbation
            else text or f"the state {type(scene).__name__}.perturb shifts at spawn"
        )
        said = _text(scene, "engagement", where)
        self.engagement: str | None = (
            None
            if not self.offers_engagement
            else said or f"the scene function {name} says the object is engaged at some tick"
        )
        """What engagement means (decision.md's words): the scene's ``engagement``, else a generic line."""

    def positions(self) -> ScenePositions:
        """The scene's positions now; a failure or a wrong result names the field and the function."""
        try:
            found = self._scene.positions()
        except Exception as exc:
            raise ValueError(
                f"{self._where}: positions() of {self._label} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(found, ScenePositions):
            raise ValueError(
                f"{self._where}: positions() of {self._label} returned {type(found).__name__}; it must "
                "return grpo_probe.envs.scene.ScenePositions(object_xy=(x, y), goal_xy=(x, y)) in metres"
            )
        if self.traces_effector and found.effector_xy is None:
            raise ValueError(
                f"{self._where}: {self._label} sets traces_effector, but positions() returned no effector_xy"
            )
        return found

    def perturb(self, rng: np.random.Generator, scale: float) -> Any:
        """The unwrapped environment's observation after the scene shifted its state."""
        try:
            return self._scene.perturb(rng, scale)
        except Exception as exc:
            raise ValueError(
                f"{self._where}: perturb(rng, {scale!r}) of {self._label} failed: {type(exc).__name__}: {exc}"
            ) from exc

    def engaged(self, info: Mapping[str, Any]) -> bool:
        """Whether the scene says the object is engaged at the tick just stepped (a bool, checked)."""
        try:
            found = self._scene.engaged(info)
        except Exception as exc:
            raise ValueError(
                f"{self._where}: engaged(info) of {self._label} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(found, (bool, np.bool_)):
            raise ValueError(
                f"{self._where}: engaged(info) of {self._label} returned {type(found).__name__} "
                f"{found!r}; it must return a bool"
            )
        return bool(found)

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        """The scene's frame of ``camera`` (one of :attr:`cameras`) now, uint8 [height, width, 3], C-ordered;
        a failure or a frame of another type, shape or dtype names the field and the function."""
        if camera not in self.cameras:
            raise ValueError(
                f"{self._where}: {self._label} draws no camera {camera!r} (its cameras: "
                f"{', '.join(self.cameras) or 'none'})"
            )
        call = f"render({camera!r}, {height}, {width}) of {self._label}"
        try:
            frame = self._scene.render(camera, height, width)
        except Exception as exc:
            raise ValueError(f"{self._where}: {call} failed: {type(exc).__name__}: {exc}") from exc
        checked: np.ndarray = checked_frame(frame, height, width, f"{self._where}: {call}")
        return checked
