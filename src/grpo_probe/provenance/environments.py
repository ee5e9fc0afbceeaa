"""When two recorded environments must give the same bytes: the one definition every comparison uses.

Why one place: a rerun on another machine can differ in the last bits of a float (SIMD dispatch in
PyTorch and numpy, another BLAS, another libm, other wheels), so an auditor whose bytes differ must first
know whether the two environments promised the same bytes at all. ``grpo-probe audit``, ``grpo-probe
verify``, the across-environment comparison of two decision records and the reference benchmark all ask
the same question, and a second answer anywhere would let one of them call a machine difference
tampering (or the reverse).

Two environments are byte-compatible when each key of :data:`NUMERICS_KEYS` is known on both sides and
equal: the architecture, the Python version, the C library, the dependency lock the venv was installed
from and the numerics setting (the instruction-set level the math libraries are held to). A key that a
record lacks, or records as null, is unknown, and an unknown key never promises bytes: an older record,
written before these keys were recorded, reads as another environment. One exception: a venv installed
without the lock records ``lock_sha256: null``; two such environments stand in for the lock with what it
would pin, the version of every installed distribution (``packages``), and agree when both list the same.

Both manifests' ``environment`` and decision.json's ``environment`` hold these keys under the same names
(``numerics`` is ``{"setting": ..., "variables": {...}}`` in both). Standard library only, so the command
line and the auditor's scripts can use it without torch or numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "NUMERICS_KEYS",
    "environment_line",
    "environment_value",
    "environment_value_lines",
    "same_numerics_environment",
]

NUMERICS_KEYS: tuple[str, ...] = ("machine", "python", "libc", "lock_sha256", "numerics.setting")
"""The keys that make two environments byte-compatible (dotted: ``numerics.setting`` is the ``setting``
of the ``numerics`` dict). The CPU model and flags are not among them: the numerics setting pins the
instruction set the libraries use, so two CPUs of one class give the same bytes."""


def environment_value(env: Mapping[str, Any] | None, key: str) -> Any:
    """The value of a dotted ``key`` in ``env``; None when it (or a dict on its way) is missing."""
    value: Any = env
    for part in key.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def same_numerics_environment(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[str]:
    """The keys of :data:`NUMERICS_KEYS` in which ``a`` and ``b`` differ or are unknown, in that order.

    An empty list means the two environments are byte-compatible: a rerun in one of what the other
    produced must give the same bytes, so any difference is a finding. A non-empty list means bytes may
    differ without anything being wrong, and only what holds across machines can be compared.
    """
    differing = []
    for key in NUMERICS_KEYS:
        left, right = environment_value(a, key), environment_value(b, key)
        if key == "lock_sha256" and left is None and right is None and _same_unlocked_packages(a, b):
            continue
        if left is None or right is None or left != right:
            differing.append(key)
    return differing


def _same_unlocked_packages(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Both venvs recorded ``lock_sha256: null`` (not absent) and the same non-empty ``packages``."""
    if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
        return False
    if "lock_sha256" not in a or "lock_sha256" not in b:
        return False
    packages = a.get("packages")
    return isinstance(packages, Mapping) and bool(packages) and packages == b.get("packages")


def environment_line(differing: Sequence[str]) -> str:
    """The one line every report leads with: ``same environment (...match)`` or ``another environment
    (differs in: lock_sha256, numerics.setting)``."""
    if not differing:
        return f"same environment ({', '.join(NUMERICS_KEYS)} match): bytes must match"
    return f"another environment (differs in: {', '.join(differing)})"


def environment_value_lines(
    a: Mapping[str, Any] | None, b: Mapping[str, Any] | None, labels: tuple[str, str], keys: Sequence[str]
) -> list[str]:
    """One line per key: ``lock_sha256: recorded 'ab12...', this machine unknown``, for a report's detail."""
    lines = []
    for key in keys:
        shown = []
        for label, env in zip(labels, (a, b), strict=True):
            value = environment_value(env, key)
            shown.append(f"{label} {'unknown' if value is None else repr(value)}")
        lines.append(f"{key}: {', '.join(shown)}")
    return lines
