"""A name -> entry registry, written once for every table of named things a design can pick from.

Why one class: a design names things by string (an environment id, a policy loss, an advantage
estimator, a sampling kind's entry), and each table of them needs the same three promises: a name
means one entry for the life of the process (registering another entry under a taken name is an error
naming both, so a later import cannot change what a locked design runs), an unknown name is an error
that lists the registered ones and suggests the closest (``did you mean``, by :mod:`difflib`), and the
registered names can be listed in registration order for messages and docs. Tables that wrote this by
hand drifted in their wording and in whether registering the same entry twice (a module imported
again) was allowed; here it is. Every table a user extends is one: the reads and their statistics, the
sampling kinds and their entries, each built-in environment's guards, the policy losses, the advantage
estimators and the built-in environments (docs/extending.md lists them).

A name list that is not a registry (the guards a user's environment declares, a schema's enum) words a
near miss with :func:`closest`, so every unknown name reads the same.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

__all__ = ["EntryClash", "Registry", "UnknownName", "closest", "did_you_mean"]

T = TypeVar("T")


def closest(name: object, names: Iterable[str]) -> str | None:
    """The name of ``names`` closest to ``name`` (difflib's ratio 0.6 or more), or None: the one rule for
    ``did you mean``, whether the names are a registry's or another list's."""
    if not isinstance(name, str):
        return None
    close = difflib.get_close_matches(name, list(names), n=1)
    return close[0] if close else None


def did_you_mean(name: object, names: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``names`` (:func:`closest`), or ``""`` when none is
    close: the tail an error about an unknown name ends with."""
    suggestion = closest(name, names)
    return f"; did you mean {suggestion!r}?" if suggestion is not None else ""


class UnknownName(ValueError):
    """A name no entry is registered under; the message lists the registered names."""

    def __init__(self, message: str, name: str, suggestion: str | None) -> None:
        super().__init__(message)
        self.name = name
        self.suggestion = suggestion


class EntryClash(ValueError):
    """A second, different entry registered under a taken name: a name means one thing."""


class Registry(Generic[T]):
    """Entries of type ``T`` by name, in registration order; ``what`` names the kind of entry in messages
    (``"policy loss"`` gives ``no policy loss 'x' is registered (registered: clipped)``)."""

    def __init__(self, what: str) -> None:
        if not what:
            raise ValueError("a registry needs the name of what it holds, for its messages")
        self.what = what
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name`` and return it. The same entry again is allowed (a module
        imported twice); another entry under a taken name is an :class:`EntryClash` naming both."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.what} is registered under a non-empty name, got {name!r}")
        if name in self._entries and self._entries[name] is not entry:
            raise EntryClash(
                f"{self.what} {name!r} is already registered ({self._entries[name]!r}); cannot register "
                f"{entry!r} under it (registered: {self._listing()})"
            )
        self._entries[name] = entry
        return entry

    def decorator(self, name: str) -> Callable[[T], T]:
        """``@registry.decorator("name")``: register the decorated function (or class) under ``name``."""

        def register(entry: T) -> T:
            return self.register(name, entry)

        return register

    def get(self, name: str) -> T:
        """The entry registered under ``name``; an unknown name is an :class:`UnknownName` listing the
        registered names and, when one is close, asking ``did you mean`` it."""
        if name not in self._entries:
            raise UnknownName(
                f"no {self.what} {name!r} is registered (registered: {self._listing()})"
                + did_you_mean(name, self._entries),
                name,
                self.suggest(name),
            )
        return self._entries[name]

    def suggest(self, name: object) -> str | None:
        """The registered name closest to ``name`` (:func:`closest`), or None."""
        return closest(name, self._entries)

    def discard(self, name: str) -> None:
        """Take the entry under ``name`` out, if there is one.

        Why a registry that promises a name one entry for the life of the process lets one go: what a
        lab's module registered before it failed is taken out again, so the next attempt sees the
        registry as it was (:func:`grpo_probe.sampling.lab_modules.load_sampler_module`), and a test's
        toy leaves when its test ends (:meth:`registered`). Nothing that runs a design calls it.
        """
        self._entries.pop(name, None)

    @contextlib.contextmanager
    def registered(self, name: str, entry: T) -> Iterator[T]:
        """Register ``entry`` under ``name`` for the block and take it out after: a test's toy entry,
        which the next test must not see. An entry registered before the block stays after it."""
        before = name in self._entries
        self.register(name, entry)
        try:
            yield entry
        finally:
            if not before:
                self.discard(name)

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._entries)

    def values(self) -> tuple[T, ...]:
        """The entries, in registration order."""
        return tuple(self._entries.values())

    def items(self) -> tuple[tuple[str, T], ...]:
        """(name, entry) pairs, in registration order."""
        return tuple(self._entries.items())

    def copy(self) -> Registry[T]:
        """A new registry holding the same entries: a scope to register more into (a test's toys) that
        leaves this one as it was."""
        fresh: Registry[T] = Registry(self.what)
        fresh._entries = dict(self._entries)
        return fresh

    def _listing(self) -> str:
        return ", ".join(self._entries) or "none"

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {self._listing()})"
