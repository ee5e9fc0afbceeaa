"""The probe's analysis: group statistics, the anchor join, guard trips, AR entropy, the registered
decision rule, and decision.md / decision.json with their figures.

The entry point is :func:`grpo_probe.analysis.report.build_decision`; :class:`AnalysisSpec` parses the
prereg's ``analysis:`` and ``decision_rule:`` sections. Both are loaded on first use, so validating a
prereg (which parses the spec) does not import matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["AnalysisSpec", "build_decision"]

_HOMES = {"AnalysisSpec": "grpo_probe.analysis.spec", "build_decision": "grpo_probe.analysis.report"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
