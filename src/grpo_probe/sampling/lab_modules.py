"""A lab's own sampling kinds: importing the module a design names in ``samplers:``, and refusing one that
registers nothing, a kind twice, a built-in's name, or a kind whose head or entry module is not there.

Why apart from the registry (:mod:`grpo_probe.sampling`): only a design that names a module, and a
process that receives a mode of a lab's kind, load one; the registry itself imports nothing of it.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys

from grpo_probe.sampling import (
    _MODULE_FAILURES,
    _MODULE_KINDS,
    _ORIGINS,
    SAMPLER_ENTRIES,
    SAMPLING_KINDS,
    SamplerClash,
    SamplerKind,
    unregister_sampler,
)

__all__ = ["SamplerModuleError", "load_sampler_module"]


class SamplerModuleError(ValueError):
    """A module named to register sampling kinds does not; the message says why and starts with the
    module's name, so a caller prefixes the file and the field that named it."""


_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_OWN = __name__.partition(".")[0]
_BUILT_IN = __name__.rpartition(".")[0]
"""The module that registers the built-in kinds (this package)."""


def load_sampler_module(module: str) -> tuple[str, ...]:
    """Import ``module``, a lab's own module that registers sampling kinds; return the kinds it registers.

    Why a loader and not a bare import: a design names the module (``samplers: ["labpolicies.ddim"]``),
    and every process that reads the design, or receives a mode of one of its kinds, must hold the same
    registry, or the schema, the design check and the head disagree on what a kind is. A module that
    fails to import, registers no kind, registers a name twice or a built-in's name is refused with
    :class:`SamplerModuleError`; what a failed import registered is taken out again, so the next attempt
    sees the registry as it was. A module imported before (by the lab's own code) is not imported again:
    its kinds are those its code registered (:func:`sampler_origin`).

    Each kind's ``entry_module`` must be findable (it is imported only when a head first samples the
    kind, which may be hours into a run), and a kind's head must be one a policy has (``ar``, ``flow``).
    """
    if not isinstance(module, str) or not _MODULE_NAME.match(module):
        raise SamplerModuleError(f"{module!r} is not a module name (dotted identifiers: labpolicies.ddim)")
    if module in _MODULE_KINDS:
        return _MODULE_KINDS[module]
    if module in _MODULE_FAILURES:  # its code ran once; the registry is as it was before
        raise SamplerModuleError(_MODULE_FAILURES[module])
    try:
        kinds = _import_kinds(module)
    except SamplerModuleError as exc:
        _MODULE_FAILURES[module] = str(exc)
        raise
    _MODULE_KINDS[module] = kinds
    return kinds


def _import_kinds(module: str) -> tuple[str, ...]:
    if module.partition(".")[0] == _OWN:
        raise SamplerModuleError(
            f"{module!r} is a module of {_OWN} itself, whose kinds are built in; name a module of your own"
        )
    if module in sys.modules:
        kinds = tuple(k for k, origin in _ORIGINS.items() if origin == module)
    else:
        before = set(SAMPLING_KINDS)
        try:
            importlib.import_module(module)
        except SamplerClash as exc:
            _forget(set(SAMPLING_KINDS) - before)
            raise SamplerModuleError(_clash_text(module, exc)) from None
        except Exception as exc:  # the lab's code may raise anything; the design names the module
            _forget(set(SAMPLING_KINDS) - before)
            raise SamplerModuleError(f"{module!r} failed to import: {type(exc).__name__}: {exc}") from None
        kinds = tuple(k for k in SAMPLING_KINDS if k not in before)
    if not kinds:
        raise SamplerModuleError(
            f"{module!r} registers no sampling kind (call grpo_probe.sampling.register_sampler in it, at "
            "import)"
        )
    for kind in kinds:
        problem = _user_kind_problem(SAMPLING_KINDS.get(kind))
        if problem is not None:
            _forget(set(kinds))
            raise SamplerModuleError(f"{module!r} registers kind {kind!r}, {problem}")
    return kinds


def _forget(kinds: set[str]) -> None:
    for kind in kinds:
        unregister_sampler(kind)


def _clash_text(module: str, clash: SamplerClash) -> str:
    if clash.origin == module:
        return f"{module!r} registers kind {clash.kind!r} twice"
    if clash.origin == _BUILT_IN:
        return f"{module!r} registers kind {clash.kind!r}, which is a built-in kind; choose another name"
    return f"{module!r} registers kind {clash.kind!r}, which module {clash.origin!r} registered already"


_HEADS = ("ar", "flow")
"""The heads a policy has (an arm's ``head``): a kind samples one of them."""


def _user_kind_problem(kind: SamplerKind) -> str | None:
    if kind.head not in _HEADS:
        return f"whose head {kind.head!r} is not a policy's head ({', '.join(_HEADS)})"
    try:
        found = importlib.util.find_spec(kind.entry_module)
    except (ImportError, ValueError):
        found = None
    if found is None and kind.kind not in SAMPLER_ENTRIES:
        return (
            f"whose entry_module {kind.entry_module!r} Python cannot find (the module that registers its "
            "sampling entry with register_sampler_entry)"
        )
    return None
