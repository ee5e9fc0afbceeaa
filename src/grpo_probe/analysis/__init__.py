"""The probe's analysis: group statistics, the anchor join, guard trips, AR entropy, the registered
decision rule, and decision.md / decision.json with their figures.

The entry point is :func:`grpo_probe.analysis.page.report.build_decision`, on the typed registered design
(:class:`grpo_probe.prereg.Prereg`). It is loaded on first use, so importing this package does not
import matplotlib.
"""

from __future__ import annotations

from grpo_probe.lazy_exports import lazy_exports

_WHERE = {"build_decision": "grpo_probe.analysis.page.report"}
"""Each exported name and the module it is imported from on first use."""

__getattr__ = lazy_exports(__name__, _WHERE, globals())

__all__ = sorted(_WHERE)
