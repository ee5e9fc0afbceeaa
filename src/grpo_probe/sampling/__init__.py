"""The sampling modes and their registry: how a head turns its distribution into one action chunk.

Why a module of its own, below both the prereg and the policies: the registered design names the mode
of every cell and oracle, and the policies sample it. One frozen type serves both, and it imports
nothing heavy, so the workflow can read a design without loading torch.

Why a registry: a sampling kind is read in many places (the design check, the prereg schema's enum, the
text reports print, the rollout table's columns, the draw-0 oracle, the policy check, the head that
samples it). Each of them asks the kind's one :class:`SamplerKind` declaration here instead of naming
kinds itself, so a new sampler is its math (a module that registers its sampling entry with
:func:`register_sampler_entry`), its declaration (:func:`register_sampler`, at the bottom of this file)
and its test. ``docs/extending.md`` walks through it. The declarations (:data:`SAMPLING_KINDS`) and the
entries (:data:`SAMPLER_ENTRIES`) are each a :class:`~grpo_probe.name_registry.Registry`, as every table
a design names things from is.

A lab registers a kind of its own without editing this package: its module calls :func:`register_sampler`
(and :func:`register_sampler_entry`), and a design names that module in ``samplers:``.
:func:`~grpo_probe.sampling.lab_modules.load_sampler_module` imports it before the design is checked, so
the kind is in the schema's enum, and refuses a module that fails to import, registers nothing, or
registers a taken name. A mode of such a kind carries the module's name when it is pickled, so a rollout
worker that receives it imports the module too (:meth:`SamplingMode.__reduce__`).
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from grpo_probe.name_registry import EntryClash, Registry

__all__ = [
    "HEAD_OF_MODE",
    "PARAMETERS",
    "SAMPLER_ENTRIES",
    "SAMPLING_KINDS",
    "Draw0",
    "Parameter",
    "SamplerClash",
    "SamplerKind",
    "SamplingMode",
    "kinds_of_head",
    "mode_params",
    "mode_schema_rules",
    "mode_text",
    "register_sampler",
    "register_sampler_entry",
    "sampler",
    "sampler_entry",
    "sampler_origin",
    "sampling_kinds",
    "unregister_sampler",
]


@dataclass(frozen=True)
class Parameter:
    """A field of :class:`SamplingMode` that a kind may take: its check, and how reports label it.

    The set is closed: each parameter is a column of the rollout table (``temperature``, ``sde_a``,
    ``sampler_steps``) and a property of the prereg schema's ``sampling_mode``, so a kind chooses among
    them rather than adding its own.
    """

    name: str
    label: str
    """How :func:`mode_text` writes it (``T=1.6``, ``a=0.5``, ``steps=10``)."""
    bound: str
    """The rule in words, as the error message states it (``a finite number > 0``)."""
    lowest: float
    exclusive: bool
    integer: bool = False
    default: Any = None
    """The value a design may leave out (None: a kind that takes the parameter requires it)."""

    def problem(self, value: Any, kind: str) -> str | None:
        """Why ``value`` is not a valid ``name`` of a mode of ``kind``, or None."""
        if self.integer:
            if isinstance(value, bool) or not isinstance(value, int) or value < self.lowest:
                return f"SamplingMode.{self.name} must be {self.bound}, got {value!r}"
            return None
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"SamplingMode.{self.name} must be a number for kind {kind!r}, got {value!r}"
        below = value <= self.lowest if self.exclusive else value < self.lowest
        if not math.isfinite(value) or below:
            return f"SamplingMode.{self.name} must be {self.bound}, got {value!r}"
        return None


PARAMETERS: dict[str, Parameter] = {
    p.name: p
    for p in (
        Parameter("temperature", "T", "a finite number > 0", 0.0, exclusive=True),
        Parameter("sde_a", "a", "a finite number >= 0", 0.0, exclusive=False),
        Parameter("steps", "steps", "a positive integer", 1, exclusive=False, integer=True, default=10),
    )
}
"""The parameters a kind may take, in the order reports and records list them."""


@dataclass(frozen=True)
class Draw0:
    """How the draw-0 oracle checks a cell of this kind: the instrument with its stochasticity off
    reproduces a deterministic reference bit for bit (:func:`grpo_probe.rollout.oracles.run_draw0_oracle`).

    A deterministic kind (``probe`` None) runs as it is and is compared with its arm's anchor rows, so
    such a cell's mode must equal its arm's anchor (the design check says so). A stochastic kind names its
    noise-off twin (``probe``) and the deterministic mode that twin reproduces (``twin_of``); ``against``
    says where the reference rows come from: the arm's anchor table, or a sequential run of ``twin_of``.
    """

    probe: Callable[[SamplingMode], SamplingMode] | None = None
    """The mode with its noise switched off (None: the kind is deterministic, its own probe)."""
    twin_of: Callable[[SamplingMode], SamplingMode] | None = None
    """The deterministic mode the noise-off twin reproduces (None for a deterministic kind)."""
    against: Literal["anchor", "run"] = "anchor"
    """``anchor``: the arm's anchor rows; ``run``: ``twin_of`` run on the sequential path."""
    reference_name: str = "anchor"
    """The reference's name in the report (``anchor``, ``euler``)."""
    skip: tuple[str, ...] = ("cell",)
    """Columns the comparison leaves out (labels, and values the twin legitimately keeps)."""
    compared: str = "every column but cell against the anchor rows"
    """What the report says was compared."""
    actions_from_rerun: bool = False
    """Whether the executed actions are compared with a rerun of ``twin_of`` on the probe path (the anchor
    table holds no actions; needed where ``skip`` leaves out columns that pin them)."""
    check_fields: tuple[str, ...] = ("actions",)
    """What the policy check compares between the noise-off twin and ``twin_of``."""


@dataclass(frozen=True)
class SamplerKind:
    """One sampling kind: the head it samples, what it takes, and how the rest of the package treats it."""

    kind: str
    head: str
    takes: tuple[str, ...]
    """The :data:`PARAMETERS` its modes set (the others stay None; ``steps`` keeps its default)."""
    summary: str
    """One sentence on what it does, for the docs and error messages."""
    entry_module: str
    """The module whose import registers the kind's sampling entry (:func:`register_sampler_entry`); the
    head imports it by name, so the registry stays free of torch."""
    draw0: Draw0 = field(default_factory=Draw0)
    min_steps: int = 1
    noise_switch: bool = False
    """Whether ``SamplingMode.noise=False`` is defined for it (its noise-off twin sets it)."""
    cell: bool = True
    """Whether a probe cell may sample it: its K draws differ (greedy is the anchor's mode, flow_euler the
    SDE oracle's reference)."""
    at_most: Mapping[str, float] = field(default_factory=dict, hash=False)
    """The largest value a parameter it takes may have, where its math needs one (DDIM's eta, carried in
    ``sde_a``, is at most 1); the parameter's own bound (:data:`PARAMETERS`) is the lower one. The schema
    and :class:`SamplingMode` both refuse a larger value."""

    def __post_init__(self) -> None:
        unknown = [p for p in self.takes if p not in PARAMETERS]
        if unknown:
            raise ValueError(
                f"sampler {self.kind!r}: takes unknown parameter(s) {unknown} "
                f"(known: {', '.join(PARAMETERS)})"
            )
        if list(self.takes) != [p for p in PARAMETERS if p in self.takes]:
            raise ValueError(
                f"sampler {self.kind!r}: list takes in the order of PARAMETERS ({tuple(PARAMETERS)})"
            )
        for name, limit in self.at_most.items():
            if name not in self.takes:
                raise ValueError(f"sampler {self.kind!r}: at_most names {name!r}, which it does not take")
            if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit):
                raise ValueError(f"sampler {self.kind!r}: at_most[{name!r}] must be a finite number")

    @property
    def deterministic(self) -> bool:
        """Whether a chunk depends on nothing but the key's initial noise: what an anchor may use."""
        return self.draw0.probe is None

    @property
    def required(self) -> tuple[str, ...]:
        """The parameters a design must give for this kind (those without a default)."""
        return tuple(p for p in self.takes if PARAMETERS[p].default is None)


SAMPLING_KINDS: Registry[SamplerKind] = Registry("sampling kind")
"""Every registered kind's declaration by name, in registration order (iterating it gives the names)."""
SAMPLER_ENTRIES: Registry[Callable[..., Any]] = Registry("sampling entry")
"""Kind -> the function its head calls to sample it (:func:`register_sampler_entry`)."""
_ORIGINS: dict[str, str] = {}
"""Kind -> the module whose import registered it (this module for the built-ins): see
:func:`_registering_module`."""
_MODULE_KINDS: dict[str, tuple[str, ...]] = {}
"""A module :func:`~grpo_probe.sampling.lab_modules.load_sampler_module` imported -> the kinds its import
registered."""
_MODULE_FAILURES: dict[str, str] = {}
"""A module :func:`~grpo_probe.sampling.lab_modules.load_sampler_module` refused -> why (asked again, it
answers the same)."""


class SamplerClash(EntryClash):
    """:func:`register_sampler` called for a name the registry holds: a kind means one thing.

    Why stricter than :meth:`Registry.register`, which takes the same entry again: a kind also records
    the module that registered it, and a lab's module that registers a built-in's declaration object (or
    one of its own twice) would otherwise pass as registering it, with the wrong origin."""

    def __init__(self, kind: str, origin: str | None) -> None:
        self.kind = kind
        self.origin = origin
        by = f" (by {origin})" if origin else ""
        super().__init__(f"sampling kind {kind!r} is already registered{by}")


def register_sampler(kind: SamplerKind) -> SamplerKind:
    """Add ``kind`` to the registry; a name registered twice is an error (a kind means one thing).

    The registry records the module whose import called it (:func:`sampler_origin`): a mode of a kind
    registered outside this package names that module when it is pickled, so a process that receives it
    can import the module and know the kind (:meth:`SamplingMode.__reduce__`).
    """
    if kind.kind in SAMPLING_KINDS:
        raise SamplerClash(kind.kind, _ORIGINS.get(kind.kind))
    SAMPLING_KINDS.register(kind.kind, kind)
    _ORIGINS[kind.kind] = _registering_module()
    return kind


def _registering_module() -> str:
    """The module whose top-level code runs the registration: the innermost module body on the stack, so a
    helper of the lab's that calls :func:`register_sampler` counts for the module that calls the helper,
    and importing that module registers the kind again in another process."""
    frame = sys._getframe(2)  # register_sampler's caller
    while frame is not None and frame.f_code.co_name != "<module>":
        frame = frame.f_back
    return "" if frame is None else str(frame.f_globals.get("__name__", ""))


def unregister_sampler(kind: str) -> None:
    """Remove a kind and its entry (tests add a kind for one test and take it out again; a lab's module
    that fails is backed out)."""
    SAMPLING_KINDS.discard(kind)
    SAMPLER_ENTRIES.discard(kind)
    _ORIGINS.pop(kind, None)
    for module, kinds in list(_MODULE_KINDS.items()):
        if kind in kinds:
            del _MODULE_KINDS[module]


def sampler_origin(kind: str) -> str:
    """The module that registered ``kind`` (``grpo_probe.sampling`` for a built-in kind)."""
    sampler(kind)
    return _ORIGINS[kind]


def sampling_kinds() -> tuple[str, ...]:
    """Every registered kind, in registration order."""
    return SAMPLING_KINDS.names()


def sampler(kind: str) -> SamplerKind:
    """The declaration of ``kind``; an unknown kind is an error listing the registered ones and asking
    ``did you mean`` the closest."""
    return SAMPLING_KINDS.get(kind)


class _HeadOfMode(Mapping[str, str]):
    """Kind -> the head it samples, as a live read-only mapping over the registry."""

    def __getitem__(self, kind: str) -> str:
        if kind not in SAMPLING_KINDS:
            raise KeyError(kind)
        return SAMPLING_KINDS.get(kind).head

    def __iter__(self) -> Iterator[str]:
        return iter(SAMPLING_KINDS)

    def __len__(self) -> int:
        return len(SAMPLING_KINDS)

    def __repr__(self) -> str:
        return repr(dict(self))


HEAD_OF_MODE: Mapping[str, str] = _HeadOfMode()
"""The head each registered kind samples (live)."""


def kinds_of_head(head: str) -> tuple[str, ...]:
    """The kinds that sample ``head``, in registration order."""
    return tuple(k for k, s in SAMPLING_KINDS.items() if s.head == head)


_Entry = TypeVar("_Entry", bound=Callable[..., Any])


def register_sampler_entry(kind: str) -> Callable[[_Entry], _Entry]:
    """Decorator: ``fn`` is how the head samples ``kind`` (each head defines the signature it calls).

    The flow head calls ``fn(velocity, x, mode, noise) -> (x at t = 0, per-step log-probs or None)``
    (:mod:`grpo_probe.policies.flow_sde`); the AR head calls ``fn(mode) -> (temperature, gumbel noise on)``
    (:mod:`grpo_probe.policies.ar_head`).
    """

    def register(fn: _Entry) -> _Entry:
        SAMPLER_ENTRIES.register(kind, fn)
        return fn

    return register


def sampler_entry(kind: str) -> Callable[..., Any]:
    """The function the head calls to sample ``kind``, importing the kind's ``entry_module`` if needed."""
    if kind not in SAMPLER_ENTRIES:
        declared = sampler(kind)
        importlib.import_module(declared.entry_module)
        if kind not in SAMPLER_ENTRIES:
            raise ValueError(
                f"sampling kind {kind!r}: {declared.entry_module} registers no sampling entry for it "
                f"(decorate its function with grpo_probe.sampling.register_sampler_entry({kind!r}))"
            )
    return SAMPLER_ENTRIES.get(kind)


def _only_for(name: str) -> str:
    kinds = [repr(k) for k, s in SAMPLING_KINDS.items() if name in s.takes]
    if len(kinds) <= 1:
        return f"kind {kinds[0] if kinds else 'none'}"
    return f"kinds {', '.join(kinds[:-1])} or {kinds[-1]}"


@dataclass(frozen=True)
class SamplingMode:
    """How a head turns its distribution into one chunk: a registered ``kind`` and the parameters it takes.

    The built-in kinds (declared at the bottom of this module): ``greedy`` and ``temperature`` are AR
    modes (Gumbel-max at ``temperature``); ``flow_ode`` is the Heun decode with ``steps`` steps (last step
    Euler) from keyed noise; ``flow_sde`` is the Flow-GRPO SDE sampler with noise scale ``sde_a``
    (``sde_a = 0`` reproduces the Euler sampler bit for bit); ``flow_euler`` is that deterministic Euler
    sampler (same grid and keyed noise), the reference of the SDE cells' draw-0 oracle.

    ``noise`` switches the Gumbel noise of kind ``temperature`` (default on). With it off, the same
    Gumbel-max code takes argmax(masked_logits / T), which picks greedy's ids (dividing by T > 0 keeps the
    order of the logits) while the recorded log-probs and entropies stay those of softmax(logits / T):
    the AR draw-0 oracle runs a temperature cell this way against the greedy anchor. Only kinds declared
    with ``noise_switch`` take ``noise=False``; the registered designs never set it.
    """

    kind: str
    temperature: float | None = None
    sde_a: float | None = None
    steps: int = 10
    noise: bool = True

    def __post_init__(self) -> None:
        declared = sampler(self.kind)
        for name, parameter in PARAMETERS.items():
            value = getattr(self, name)
            if name in declared.takes or parameter.default is not None:
                problem = parameter.problem(value, self.kind)
                if problem is not None:
                    raise ValueError(problem)
            elif value is not None:
                raise ValueError(
                    f"SamplingMode.{name} is only allowed for {_only_for(name)} (kind={self.kind!r})"
                )
        for name, limit in declared.at_most.items():
            if getattr(self, name) > limit:
                raise ValueError(
                    f"SamplingMode.{name} must be at most {limit!r} for kind {self.kind!r}, "
                    f"got {getattr(self, name)!r}"
                )
        if self.steps < declared.min_steps:
            raise ValueError(
                f"SamplingMode.steps must be >= {declared.min_steps} for kind {self.kind!r}, "
                f"got {self.steps!r}"
            )
        if not isinstance(self.noise, bool):
            raise ValueError(f"SamplingMode.noise must be True or False, got {self.noise!r}")
        if not self.noise and not declared.noise_switch:
            switched = " or ".join(repr(k) for k, s in SAMPLING_KINDS.items() if s.noise_switch) or "none"
            raise ValueError(
                f"SamplingMode.noise=False is only defined for kind {switched} (its Gumbel noise), "
                f"got kind {self.kind!r}"
            )

    @property
    def head(self) -> str:
        """The head this mode samples."""
        return sampler(self.kind).head

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as the fields and the module that registered the kind, so that a process that unpickles
        a mode of a lab's kind (a rollout worker started by ``spawn`` or a ``forkserver``) imports that
        module first and knows the kind; a built-in kind's module is this one."""
        fields = (self.kind, self.temperature, self.sde_a, self.steps, self.noise)
        return (_unpickled_mode, (_ORIGINS.get(self.kind), *fields))

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SamplingMode:
        """A mode from its registered mapping (``kind`` plus the fields that kind takes)."""
        return cls(
            kind=values["kind"],
            temperature=values.get("temperature"),
            sde_a=values.get("sde_a"),
            steps=int(values.get("steps", PARAMETERS["steps"].default)),
        )


def _unpickled_mode(
    origin: str | None, kind: str, temperature: float | None, sde_a: float | None, steps: int, noise: bool
) -> SamplingMode:
    """A pickled :class:`SamplingMode`, its kind's module imported first where this process lacks it."""
    if kind not in SAMPLING_KINDS and origin is not None:
        from grpo_probe.sampling.lab_modules import load_sampler_module

        load_sampler_module(origin)
    return SamplingMode(kind, temperature, sde_a, steps, noise)


def mode_params(mode: SamplingMode) -> dict[str, Any]:
    """The parameters ``mode``'s kind takes, with their values, in :data:`PARAMETERS` order: what a record
    of the mode holds (decision.json's cell mode, the rollout table's parameter columns)."""
    takes = sampler(mode.kind).takes
    return {name: getattr(mode, name) for name in PARAMETERS if name in takes}


def mode_text(mode: SamplingMode) -> str:
    """``temperature(T=1.6, noise off)``, ``flow_sde(a=0.5, steps=10)``, ``greedy``: a mode as the oracle
    reports, the policy check and error messages name it."""
    shown = [f"{PARAMETERS[name].label}={value!r}" for name, value in mode_params(mode).items()]
    if not mode.noise:
        shown.append("noise off")
    return f"{mode.kind}({', '.join(shown)})" if shown else mode.kind


def mode_schema_rules() -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """The prereg schema's ``sampling_mode`` enum of kinds, its ``allOf`` of per-kind required parameters
    and the bounds a kind adds (:attr:`SamplerKind.at_most`, ``min_steps``), and the enum of
    ``cell_kind`` (the kinds a cell may sample), from the registry
    (:func:`grpo_probe.prereg.schema.load_prereg_schema` fills them in)."""
    rules = []
    for k, s in SAMPLING_KINDS.items():
        then: dict[str, Any] = {}
        if s.required:
            then["required"] = list(s.required)
        bounds: dict[str, Any] = {name: {"maximum": limit} for name, limit in s.at_most.items()}
        if "steps" in s.takes and s.min_steps > PARAMETERS["steps"].lowest:
            bounds["steps"] = {"minimum": s.min_steps}
        if bounds:
            then["properties"] = bounds
        if then:
            rules.append({"if": {"properties": {"kind": {"const": k}}}, "then": then})
    return list(SAMPLING_KINDS), rules, [k for k, s in SAMPLING_KINDS.items() if s.cell]


# The built-in kinds. Their sampling entries live in the head modules named by entry_module.

register_sampler(
    SamplerKind(
        "greedy",
        head="ar",
        takes=(),
        summary="argmax decode of the AR head's masked logits",
        entry_module="grpo_probe.policies.ar_head",
        cell=False,
    )
)
register_sampler(
    SamplerKind(
        "temperature",
        head="ar",
        takes=("temperature",),
        summary="Gumbel-max sampling from softmax(masked_logits / T)",
        entry_module="grpo_probe.policies.ar_head",
        noise_switch=True,
        draw0=Draw0(
            probe=lambda m: SamplingMode("temperature", temperature=m.temperature, noise=False),
            twin_of=lambda m: SamplingMode("greedy"),
            against="anchor",
            skip=("cell", "mode", "temperature", "replan_logprob", "replan_entropy_mean"),
            compared=(
                "token ids, token counts, per-tick traces and outcomes against the anchor rows (every "
                "column but the labels and the temperature-T log-probs and entropies); executed actions "
                "against a greedy rerun on the probe path"
            ),
            actions_from_rerun=True,
            check_fields=("token_ids", "actions"),
        ),
    )
)
register_sampler(
    SamplerKind(
        "flow_ode",
        head="flow",
        takes=("steps",),
        summary="Heun decode with `steps` steps (last step Euler) from keyed noise",
        entry_module="grpo_probe.policies.flow_sde",
    )
)
register_sampler(
    SamplerKind(
        "flow_sde",
        head="flow",
        takes=("sde_a", "steps"),
        summary="the Flow-GRPO SDE sampler with noise scale `sde_a` (a = 0 is the Euler sampler)",
        entry_module="grpo_probe.policies.flow_sde",
        min_steps=2,
        draw0=Draw0(
            probe=lambda m: SamplingMode("flow_sde", sde_a=0.0, steps=m.steps),
            twin_of=lambda m: SamplingMode("flow_euler", steps=m.steps),
            against="run",
            reference_name="euler",
            skip=("mode", "sde_a"),
            compared="every column but the mode labels, and the executed actions, against the Euler sampler",
            check_fields=("actions", "logprob"),
        ),
    )
)
register_sampler(
    SamplerKind(
        "flow_euler",
        head="flow",
        takes=("steps",),
        summary="the deterministic Euler sampler on the SDE's grid, from the same keyed noise",
        entry_module="grpo_probe.policies.flow_sde",
        cell=False,
    )
)
