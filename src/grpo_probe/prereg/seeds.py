"""Registered seed lists: ``{first, count}`` or an explicit list, as every seed field of a design reads.

Why its own module: the design (``prereg/design.py``) and its phase-2 section (``prereg/phase2.py``) both
expand seed fields, and the design imports the section, so the one expansion lives below both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def expand_seeds(seeds: Mapping[str, int] | Sequence[int]) -> tuple[int, ...]:
    """``{first, count}`` -> ``(first, ..., first + count - 1)``; an explicit list is kept in its order."""
    if isinstance(seeds, Mapping):
        return tuple(range(int(seeds["first"]), int(seeds["first"]) + int(seeds["count"])))
    return tuple(int(s) for s in seeds)
