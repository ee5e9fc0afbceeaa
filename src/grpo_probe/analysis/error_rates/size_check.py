"""Before a run: can the registered sizes hold the design's false-go target at any levels?

Why: the operating simulation after a run checks the target at the worst point of the null's boundary it
can find with the run's own residuals, and a design that misses it prints "not decided at this size"
(:func:`grpo_probe.analysis.rule.decision_rule.not_decided`). A lab should hear before it spends the CPU
that its sizes cannot hold the target whatever the rewards turn out to be. One point of the boundary
needs no data: the chaos share exactly at its bar with normal chaos and both spreads far above the signal
bar, where the choice clause always passes and the share clause alone decides (the share is scale-free, so
this rate is the same at every such level). The worst point is at least as bad, so a design whose rate
at this point already exceeds its target cannot reach it at any levels.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from grpo_probe.analysis.error_rates.nulls import share_boundary
from grpo_probe.analysis.error_rates.operating import CellSize, simulate_cell
from grpo_probe.analysis.error_rates.rates import Rate, any_cell
from grpo_probe.analysis.rule.glossary import number
from grpo_probe.prereg import Prereg
from grpo_probe.prereg.rule import HEADS

__all__ = ["SIZE_CHECK_RUNS", "SizeCheck", "size_check"]

SIZE_CHECK_RUNS = 400
"""Simulated runs of the check: the Wilson interval of a 10 % rate spans about +-3 points."""

_FAR_CM = 1.0e4
"""The check's total spread (cm): far above any signal bar, so the choice clause passes in every run."""


@dataclass(frozen=True)
class SizeCheck:
    """The design-level false go at the share's bar with normal chaos, at the registered sizes."""

    rate: Rate
    target: float
    sizes: str

    @property
    def cannot_hold(self) -> bool:
        """The Wilson interval lies above the target: no levels make these sizes hold it."""
        return self.rate.low > self.target

    def warning(self, where: str) -> str:
        """The words ``prereg check`` prints."""
        return (
            f"{where}: warning: at the registered sizes ({self.sizes}) the rule goes in "
            f"{number(100 * self.rate.value)} % "
            f"[{number(100 * self.rate.low)}, {number(100 * self.rate.high)}] "
            f"of {self.rate.runs} simulated runs with every cell's chaos share at its bar and normal chaos, "
            f"above the {number(100 * self.target)} % false-go target (analysis.operating_characteristics."
            'false_go_target) at any levels: a go from this design will read "not decided at this size"; '
            "more seeds, draws or resamples, or a higher analysis.bootstrap.confidence, hold it "
            "(`grpo-probe plan` sizes them from a pilot)"
        )


def size_check(prereg: Prereg, runs: int = SIZE_CHECK_RUNS) -> SizeCheck | None:
    """The check for ``prereg``; None where the rule has no share clause the simulation models (nothing
    to check without data) or the design replays nothing (no share is read)."""
    replay = prereg.replay
    if replay is None or not replay.seeds:
        return None
    rule, analysis = prereg.decision_rule, prereg.analysis
    spec = replace(analysis.operating, simulations=runs)
    size = CellSize(len(prereg.seeds), len(replay.seeds), prereg.group_size, replay.replays)
    verdicts = []
    for cell in (c for c in prereg.enabled_cells if c.head in HEADS):
        point = share_boundary(rule, cell, _FAR_CM)
        if point is None:
            return None
        verdicts.append(simulate_cell(rule, cell, size, point, analysis, "size_check", None, spec))
    hits = any_cell(verdicts)
    if hits is None:
        return None
    return SizeCheck(Rate.of(hits), spec.false_go_target, size.text())
