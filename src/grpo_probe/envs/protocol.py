"""The environment protocol: the only thing the rollout engine knows about a simulator.

Why a protocol and not a base class: the people this probe is for bring their own simulators, and an
environment should not have to inherit from this package to be measured by it. Anything with these
members is an environment:

```
spec: EnvSpec                                  # action dims, chunk limits, observation keys, guards, version
reset(seed) -> observation                     # the spawn is a pure function of the seed
execute(chunk, n_executed) -> observation      # the first n actions of a chunk, one per control tick
done -> bool
replan_index -> int                            # replans executed so far in this episode
record() -> episode record                     # a row with every column spec.episode_schema names
render(camera, height, width) -> frame         # only if spec.cameras names cameras: uint8 [H, W, 3]
perturb_state(rng, scale) -> observation       # only if spec.state_perturbation says what it shifts
```

``reset`` and ``execute`` return ``observation.state``: float32 [spec.obs_dim] (LeRobot's key; the only
key the reference heads read). An environment with cameras names them in ``spec.cameras`` and renders
the current frame of one on demand; the rollout engine assembles the mapping a policy reads
(``observation.state``, ``observation.images.<camera>``, ``task``: :mod:`grpo_probe.envs.observation`),
rendering only the cameras a bound policy declares, at the size the design registers.

An action chunk is float32 [spec.chunk_length, spec.action_dims] in [-1, 1]; the environment maps it
onto its own action bounds. A record is any object with ``to_row()`` (column ->
value, lists for traces) and ``canonical_bytes()``.

``perturb_state`` is how a replay asks "the same choices, a hair's breadth elsewhere"
(docs/signal-or-chaos.md, "Perturbations and environments"): called right after ``reset``, before the
first observation is used, it moves the spawn by ``scale`` (the environment's own unit, metres for a
position) in a direction drawn from ``rng`` (a keyed generator the engine owns), and returns the new
first observation. An environment that offers it says
what it moves in ``spec.state_perturbation``; one that does not leaves it None, and a design asking for a
``state`` perturbation on it is refused before anything runs.

The registered metric columns every record carries (:data:`METRIC_COLUMNS`) are the ones the analysis
and the decision rule read: ``progress_final_cm = 100 (d0 - d_final)`` of the environment's object-to-goal
distance in the table plane, ``best_point_cm``, the per-tick distance trace, engagement (``contact``)
and ``success``. The guard channels (:class:`Guard`) are the environment's own: each names the column it
reads and when it trips, so the analysis can count trips without knowing the scene.

This module imports neither MuJoCo nor torch: the prereg reads specs while Snakemake parses the rules.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from grpo_probe.name_registry import Registry

__all__ = [
    "METRIC_COLUMNS",
    "OBSERVATION_ENVIRONMENT_STATE",
    "OBSERVATION_STATE",
    "EnvSpec",
    "Environment",
    "EpisodeRecordLike",
    "Expert",
    "Guard",
    "GuardFactory",
    "TopDownView",
    "away_tail_guard",
    "check_chunk",
    "check_running",
    "declared_guards",
    "normalized_to_bounds",
    "register_shared_guards",
    "swat_guard",
]

OBSERVATION_STATE = "observation.state"
"""The observation key of the state vector (float32 [obs_dim]), as LeRobot names it."""
OBSERVATION_ENVIRONMENT_STATE = "observation.environment_state"
"""LeRobot's key of the environment's part of the state (the object, the goal), beside the agent's own
``observation.state``: offered when a design registers the split (``observation.convention: lerobot``)."""

METRIC_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("seed", pa.int64(), nullable=False),
    pa.field("n_ticks", pa.int32(), nullable=False),
    pa.field("d0_cm", pa.float64(), nullable=False),
    pa.field("d_final_cm", pa.float64(), nullable=False),
    pa.field("progress_final_cm", pa.float64(), nullable=False),
    pa.field("best_point_cm", pa.float64(), nullable=False),
    pa.field("distance_trace_cm", pa.list_(pa.float64()), nullable=False),
    pa.field("contact", pa.bool_(), nullable=False),
    pa.field("first_contact_tick", pa.int32(), nullable=True),
    pa.field("success", pa.bool_(), nullable=False),
)
"""Columns every environment's record carries, with these types: the registered metrics."""

_OPS = (">", "<", "true", "false")


@dataclass(frozen=True)
class Guard:
    """One guard channel: an episode trips it when ``column`` satisfies ``trips_when`` (and the threshold).

    The one declaration of a guard; everything else reads it. ``name`` is the guard's key everywhere: the
    reads ``sampled_<name>_rate`` / ``anchor_<name>_rate`` of decision.md and decision.json, the glossary
    term, and the key of its phase-2 penalty (``phase2.reward.penalties.<name>``). ``column`` is a column
    of the environment's episode record. ``threshold`` is a number, or the name of a registered
    ``analysis:`` number (``away_tail_cm``, ``swat_speed_m_s``), so a threshold the decision page prints
    is always a registered one. ``meaning`` is the glossary sentence; ``{threshold:g}`` in it is replaced
    by the threshold's value.
    """

    name: str
    column: str
    trips_when: Literal[">", "<", "true", "false"]
    meaning: str
    threshold: float | str | None = None

    def __post_init__(self) -> None:
        if self.trips_when not in _OPS:
            raise ValueError(
                f"guard {self.name!r}: trips_when must be one of {_OPS}, got {self.trips_when!r}"
            )
        if (self.trips_when in (">", "<")) == (self.threshold is None):
            raise ValueError(f"guard {self.name!r}: a threshold goes with '>' and '<' only")

    def threshold_value(self, analysis: Mapping[str, Any]) -> float | None:
        """The number the column is compared with (``analysis``: the registered analysis numbers)."""
        if isinstance(self.threshold, str):
            return float(analysis[self.threshold])
        return None if self.threshold is None else float(self.threshold)

    def trips(self, values: NDArray[Any], analysis: Mapping[str, Any]) -> NDArray[np.bool_]:
        """Per episode, whether the guard tripped, from its column's values."""
        if self.trips_when == "true":
            return np.asarray(values, dtype=bool).copy()
        if self.trips_when == "false":
            return ~np.asarray(values, dtype=bool)
        threshold = self.threshold_value(analysis)
        column = np.asarray(values, dtype=np.float64)
        return column > threshold if self.trips_when == ">" else column < threshold

    def describe(self, analysis: Mapping[str, Any]) -> str:
        """The glossary sentence with the registered threshold filled in."""
        value = self.threshold_value(analysis)
        return self.meaning.format(threshold=math.nan if value is None else value)


def away_tail_guard(moved: str, goal: str) -> Guard:
    """The progress guard every environment shares: the object ended farther from the goal than it began."""
    return Guard(
        "away_tail",
        "progress_final_cm",
        "<",
        f"progress_final_cm below analysis.away_tail_cm = {{threshold:g}} cm: the {moved} ended farther "
        f"from the {goal} than it started",
        threshold="away_tail_cm",
    )


def swat_guard(moved: str, speed_column: str) -> Guard:
    """The speed guard of an environment that records its pushed thing's peak speed (``speed_column``, in
    m/s): the thing moved faster than a push moves it, so it was struck."""
    return Guard(
        "swat",
        speed_column,
        ">",
        f"the {moved}'s peak speed exceeded analysis.swat_speed_m_s = {{threshold:g}} m/s: "
        "it was struck, not pushed",
        threshold="swat_speed_m_s",
    )


GuardFactory = Callable[[Any], Guard]
"""(an environment's registered params) -> one of its guards, worded with the registered numbers: what a
built-in environment's guard registry holds (the boat's :data:`~grpo_probe.envs.boat.spec.BOAT_GUARDS`)."""


def declared_guards(guards: Registry[GuardFactory], params: Any) -> tuple[Guard, ...]:
    """Every guard of ``guards`` built under ``params``, in registration order (decision.md's order).

    Why the name is checked: the registered name is what a penalty, a rule's guard rate and the design
    check name, and the :class:`Guard`'s name is what the analysis counts under; a factory that builds a
    guard under another name would make the two disagree, so it is an error naming both.
    """
    built = []
    for name, factory in guards.items():
        guard = factory(params)
        if not isinstance(guard, Guard) or guard.name != name:
            raise ValueError(
                f"{guards.what} {name!r}: its factory {factory!r} built {guard!r}, not a Guard named {name!r}"
            )
        built.append(guard)
    return tuple(built)


def register_shared_guards(guards: Registry[GuardFactory], moved: str, goal: str, speed_column: str) -> None:
    """Register the guards every pushing environment shares (:func:`away_tail_guard`, :func:`swat_guard`)
    in ``guards``, after the environment's own: the thing ``moved`` toward the ``goal``, and the column of
    its peak speed."""
    guards.register("away_tail", lambda params: away_tail_guard(moved, goal))
    guards.register("swat", lambda params: swat_guard(moved, speed_column))


@dataclass(frozen=True)
class TopDownView:
    """What decision.md's top-down trajectory figure draws, and what it calls each thing."""

    object_xy: tuple[str, str]
    """Trace columns of the pushed object's centre (x, y in metres)."""
    effector_xy: tuple[str, str] | None
    """Trace columns of the effector, or None when the environment records none."""
    target_xy: tuple[str, str]
    """Scalar columns of the goal centre."""
    target_radius_m: float
    names: tuple[str, str, str]
    """How the page names the object, the effector and the target (``boat``, ``pusher``, ``disk``)."""


@dataclass(frozen=True)
class EnvSpec:
    """What an environment declares about itself; the engine, the oracles and the analysis read only this."""

    id: str
    """The registered id (``boat_push``, ``pusher``) or ``module:factory``."""
    version: str
    """Changes whenever an episode of the same seed and actions could change."""
    action_dims: int
    obs_dim: int
    chunk_length: int
    """Actions per chunk a policy returns (the registered chunk)."""
    executed_actions: int
    """Actions of each chunk executed before the next replan, one per control tick."""
    replans: int
    """Policy calls in an episode that nothing ends early."""
    tick_s: float
    """Control period in seconds."""
    episode_schema: pa.Schema
    """The record's columns, in table order; it starts with every :data:`METRIC_COLUMNS` field."""
    guards: tuple[Guard, ...]
    view: TopDownView
    engagement: str
    """What ``contact`` means here, as decision.md words it (``any pusher-boat contact``)."""
    observation_keys: tuple[str, ...] = (OBSERVATION_STATE,)
    cameras: tuple[str, ...] = ()
    state_entries: tuple[tuple[str, int, int], ...] = ()
    """Named parts of ``observation.state`` as (entry, start, stop), in order, covering all of it (a
    ``Dict`` observation's entries, concatenated); none when the state is one unnamed vector. A design
    splits the state into LeRobot's keys by these names (``observation.convention: lerobot``)."""
    """Cameras ``render(camera, height, width)`` draws (``observation.images.<camera>``); none by default."""
    state_perturbation: str | None = None
    """What ``perturb_state(rng, scale)`` moves, as decision.md words it (``the boat's spawn position in
    the table plane``); None when the environment offers no state perturbation."""

    def __post_init__(self) -> None:
        where = f"environment {self.id!r}"
        for name in ("action_dims", "obs_dim", "chunk_length", "executed_actions", "replans"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{where}: spec.{name} must be a positive integer, got {value!r}")
        if self.executed_actions > self.chunk_length:
            raise ValueError(
                f"{where}: spec.executed_actions ({self.executed_actions}) exceeds spec.chunk_length "
                f"({self.chunk_length})"
            )
        for field in METRIC_COLUMNS:
            if field.name not in self.episode_schema.names:
                raise ValueError(f"{where}: the episode schema lacks the registered metric {field.name!r}")
            found = self.episode_schema.field(field.name).type
            if not found.equals(field.type):
                raise ValueError(
                    f"{where}: episode column {field.name!r} has type {found}, "
                    f"the protocol needs {field.type}"
                )
        names = [g.name for g in self.guards]
        if len(set(names)) != len(names):
            raise ValueError(f"{where}: guard names repeat: {names}")
        for guard in self.guards:
            if guard.column not in self.episode_schema.names:
                raise ValueError(
                    f"{where}: guard {guard.name!r} reads column {guard.column!r}, not in its record"
                )
        for column in (*self.view.object_xy, *(self.view.effector_xy or ()), *self.view.target_xy):
            if column not in self.episode_schema.names:
                raise ValueError(f"{where}: the top-down view reads column {column!r}, not in its record")
        if self.state_entries:
            bounds = [(start, stop) for _, start, stop in self.state_entries]
            contiguous = all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
            names = [name for name, _, _ in self.state_entries]
            if (
                bounds[0][0] != 0
                or bounds[-1][1] != self.obs_dim
                or not contiguous
                or any(start >= stop for start, stop in bounds)
                or len(set(names)) != len(names)
                or not all(isinstance(n, str) and n for n in names)
            ):
                raise ValueError(
                    f"{where}: spec.state_entries must name distinct, non-empty, consecutive parts covering "
                    f"observation.state's {self.obs_dim} numbers, got {list(self.state_entries)}"
                )

    @property
    def guard_names(self) -> tuple[str, ...]:
        """Guard channels in the order decision.md lists them."""
        return tuple(g.name for g in self.guards)

    @property
    def episode_ticks(self) -> int:
        """Ticks in an episode that nothing ends early."""
        return self.replans * self.executed_actions

    @property
    def trace_columns(self) -> tuple[str, ...]:
        """Per-tick columns (index 0 = spawn), ``distance_trace_cm`` first: what the oracles walk per tick."""
        lists = [
            f.name for f in self.episode_schema if pa.types.is_list(f.type) and f.name != "distance_trace_cm"
        ]
        return ("distance_trace_cm", *lists)

    def check_row(self, row: Mapping[str, Any], where: str) -> None:
        """A record's row carries every column of the episode schema; else a ``ValueError`` naming it."""
        missing = [name for name in self.episode_schema.names if name not in row]
        if missing:
            metric = [m for m in missing if m in {f.name for f in METRIC_COLUMNS}]
            kind = "registered metric" if metric else "column"
            raise ValueError(
                f"{where}: environment {self.id!r} returned a record without the {kind}(s) "
                f"{', '.join(metric or missing)} (its episode schema: {', '.join(self.episode_schema.names)})"
            )


@runtime_checkable
class EpisodeRecordLike(Protocol):
    """What ``record()`` returns: a row of the episode table and its exact byte form."""

    def to_row(self) -> dict[str, Any]: ...

    def canonical_bytes(self) -> bytes: ...


@runtime_checkable
class Environment(Protocol):
    """An environment the rollout engine can run (see the module docstring)."""

    spec: EnvSpec
    replan_index: int

    def reset(self, seed: int) -> np.ndarray: ...

    def execute(self, chunk: np.ndarray, n_executed: int) -> np.ndarray: ...

    @property
    def done(self) -> bool: ...

    def record(self) -> EpisodeRecordLike: ...


class Expert(Protocol):
    """A scripted demonstrator: one chunk per replan from the observation alone, as a policy acts.

    ``key`` names the noise stream (run key, seed, replan); the chunk is float32 [chunk_length,
    action_dims] in [-1, 1].
    """

    def act(self, obs: np.ndarray, key: tuple[int, ...]) -> np.ndarray: ...


def normalized_to_bounds(
    chunk: np.ndarray, low: np.ndarray, high: np.ndarray, replan: int, where: str
) -> np.ndarray:
    """Map normalized actions [-1, 1] (clipped) affinely onto [low, high]; a NaN is an error naming it."""
    chunk = np.asarray(chunk, dtype=np.float64)
    bad = np.argwhere(~np.isfinite(chunk))
    if bad.size:
        k, j = (int(v) for v in bad[0])
        raise ValueError(f"{where}: action [{k}, {j}] (replan {replan}) is {chunk[k, j]}, not finite")
    return low + 0.5 * (np.clip(chunk, -1.0, 1.0) + 1.0) * (high - low)


def check_running(seed: int | None, done: bool, method: str = "execute") -> None:
    """Refuse a step before ``reset(seed)`` or after the episode's end: the first check of every
    environment's ``execute`` (``method`` names the step in the message)."""
    if seed is None:
        raise RuntimeError(f"call reset(seed) before {method}")
    if done:
        raise RuntimeError(f"seed {seed}: the episode is over; call reset(seed)")


def check_chunk(chunk: np.ndarray, spec: EnvSpec, n_executed: int, where: str) -> np.ndarray:
    """A chunk of the registered shape and a count of executed actions within it, as float64."""
    chunk = np.asarray(chunk, dtype=np.float64)
    if chunk.shape != (spec.chunk_length, spec.action_dims):
        raise ValueError(
            f"{where}: action chunk must have shape ({spec.chunk_length}, {spec.action_dims}), "
            f"got {chunk.shape}"
        )
    if isinstance(n_executed, bool) or not isinstance(n_executed, (int, np.integer)):
        raise ValueError(f"{where}: n_executed must be an integer, got {n_executed!r}")
    if not 1 <= n_executed <= spec.chunk_length:
        raise ValueError(f"{where}: n_executed must be in 1..{spec.chunk_length}, got {n_executed}")
    return chunk
