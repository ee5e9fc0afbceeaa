"""The probe's analysis, in four rooms, each importing only the rooms below it (import-linter contract
``analysis-rooms`` in pyproject.toml):

- :mod:`~grpo_probe.analysis.page`: decision.json and decision.md, their figures and template;
- :mod:`~grpo_probe.analysis.error_rates`: how often a go is wrong, at the measured levels and at the bar;
- :mod:`~grpo_probe.analysis.rule`: the registered rule's verdict on each cell, its stability and versions;
- :mod:`~grpo_probe.analysis.cells`: one cell's tables to its reads.

The entry point is :func:`grpo_probe.analysis.page.report.build_decision`, on the typed registered design
(:class:`grpo_probe.prereg.Prereg`). It is loaded on first use, so importing this package does not
import matplotlib.
"""

from __future__ import annotations

from grpo_probe.lazy_exports import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {".page.report": ("build_decision",)}, globals())
