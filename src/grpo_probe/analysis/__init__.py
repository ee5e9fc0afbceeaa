"""The probe's analysis: group statistics, the anchor join, guard trips, AR entropy, the registered
decision rule, and decision.md / decision.json with their figures.

The entry point is :func:`grpo_probe.analysis.report.build_decision`, on the typed registered design
(:class:`grpo_probe.prereg.Prereg`). It is loaded on first use, so importing this package does not
import matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["build_decision"]

_HOMES = {"build_decision": "grpo_probe.analysis.report"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
