"""Sizing a design before it is locked: how many seeds, draws and replays its rule needs.

Why: a design's error rates depend on its sizes. A pilot probe (or a finished one) measures each cell's choice
and chaos std; from those levels, :mod:`grpo_probe.analysis.error_rates.operating` simulates the design's
registered rule at other sizes, and this module lays the options side by side: for each (seeds, K, R) the
share of simulated runs at the pilot's measured levels that name the pilot's arm(s) (what a lab acts on, not
only the outcome kind: the target is 95 %, met when the Wilson interval's lower end reaches it, so a
recommendation does not rest on simulation luck), the design's false-go rate at the bar (every cell's true
value at its threshold, the null's least favourable point, normal chaos; the target is the design's
``false_go_target``, 5 % by default; the pilot's residuals are not at hand here, so the page's data-resampled
rate is the check after the run), and the CPU the rollouts would cost, priced per episode from the pilot's own
parallel-oracle benchmark as ``grpo-probe estimate`` prices a run. The recommendation is the cheapest option
that meets both targets.

What carries over from the pilot and what does not: the rewards' levels are the pilot's point estimates
(a pilot's own sampling error is not propagated: a pilot too small to estimate them says so in its
intervals, which the plan prints); conditions on reads the simulation does not model (the anchor
comparison, guard trips) keep the verdict the pilot gave them, at every size.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grpo_probe.analysis.error_rates.operating import (
    CellSize,
    Rate,
    boundaries,
    cell_levels,
    named_arms,
    simulate_cell,
)
from grpo_probe.analysis.rule.decision_rule import Outcome
from grpo_probe.compute.accounting import oracle_episodes, read_benchmarks
from grpo_probe.prereg import Prereg
from grpo_probe.prereg.rule import HEADS, OperatingSpec

__all__ = [
    "DEFAULT_REPLAYS",
    "DEFAULT_SEEDS",
    "PlanOption",
    "cpu_per_episode",
    "plan_options",
    "plan_text",
    "recommended",
]

DEFAULT_SEEDS: tuple[int, ...] = (5, 10, 15, 20, 30)
DEFAULT_REPLAYS: tuple[int, ...] = (2, 4, 8)
STABILITY_TARGET = 0.95
"""The share of runs at the measured levels that must name the pilot's arm(s): met by the Wilson lower end."""


@dataclass(frozen=True)
class PlanOption:
    """One candidate size: its simulated rates, the episodes it runs and their estimated CPU."""

    seeds: int
    k: int
    replays: int
    same_outcome: Rate
    """Runs at the measured levels that give the pilot's outcome kind."""
    false_go: Rate
    """Runs with every cell at its bar (normal chaos) in which any cell qualifies."""
    episodes: int
    """Probe, replay and anchor episodes (the oracles' few are left out)."""
    cpu_s: float | None
    """Estimated CPU seconds of those episodes (None without a benchmark to price them)."""
    same_arm: Rate | None = None
    """Runs at the measured levels that name the pilot's arm(s) (None: the same as ``same_outcome``,
    a park names no arm)."""

    @property
    def held(self) -> Rate:
        """The rate the stability target reads: the arm's, or the outcome kind's for a park."""
        return self.same_outcome if self.same_arm is None else self.same_arm

    def meets(self, false_go_target: float) -> bool:
        """Both targets: the Wilson lower end of the arm's rate reaches 95 % and the false-go rate at the
        bar is within target."""
        return self.held.low >= STABILITY_TARGET and self.false_go.value <= false_go_target

    def to_dict(self, false_go_target: float) -> dict[str, Any]:
        return {
            "seeds": self.seeds,
            "k": self.k,
            "replays": self.replays,
            "same_outcome": self.same_outcome.to_dict(),
            "same_arm": None if self.same_arm is None else self.same_arm.to_dict(),
            "false_go": self.false_go.to_dict(),
            "episodes": self.episodes,
            "cpu_s": self.cpu_s,
            "meets_targets": self.meets(false_go_target),
        }


def cpu_per_episode(prereg: Prereg, bench_dir: str | os.PathLike[str]) -> float | None:
    """CPU seconds per episode from the pilot's parallel-oracle benchmark (as ``grpo-probe estimate``
    prices a run), or None where the pilot left no benchmark."""
    if not Path(bench_dir).is_dir():
        return None
    stages = {s.stage: s for s in read_benchmarks(bench_dir)}
    oracle = stages.get("parallel_oracle")
    return None if oracle is None else oracle.cpu_s / (2 * oracle_episodes(prereg))


def plan_options(
    prereg: Prereg,
    decision: Mapping[str, Any],
    seeds: Sequence[int] = DEFAULT_SEEDS,
    draws: Sequence[int] | None = None,
    replays: Sequence[int] = DEFAULT_REPLAYS,
    spec: OperatingSpec | None = None,
    per_episode: float | None = None,
) -> list[PlanOption]:
    """Every (seeds, K, R) option, simulated with the design's rule at the pilot's measured levels.

    ``decision``: the pilot's decision.json (its cells' reads give the levels and the measured verdicts);
    ``draws``: the K to try (the design's own by default); ``spec``: how many runs and from which seed.
    """
    where = decision.get("prereg", {}).get("name", prereg.name)
    cells = prereg.enabled_cells
    by_id = {c["id"]: c for c in decision["cells"]}
    missing = [c.id for c in cells if c.id not in by_id]
    if missing:
        raise ValueError(f"{where}: decision.json has no cell {missing[0]!r} of the design")
    for cell in cells:
        if by_id[cell.id]["reads"].get("chaos_std_cm") is None:
            raise ValueError(
                f"{where}: cell {cell.id}: the pilot has no chaos std (reads.chaos_std_cm): register a "
                "replay: section and rerun the pilot; without replays its choice and chaos are not separated"
            )
    spec = spec or prereg.analysis.operating
    found = decision["outcome"]
    kind = found["kind"]
    outcome = Outcome(kind, found.get("headline", ""), found.get("ar_arm"), found.get("flow_arm"), (), (), ())
    named_arm = "ar_arm" in found or "flow_arm" in found  # a record that names none: the kind alone
    routed = [c for c in cells if c.head in HEADS]
    reads = {c.id: by_id[c.id]["reads"] for c in cells}
    arms = {c.arm for c in cells}
    analysis = prereg.analysis
    rule = prereg.decision_rule
    options = []
    for n in seeds:
        for k in draws or (prereg.group_size,):
            for r in replays:
                size = CellSize(n, n, k, r)
                at_bar: list[np.ndarray] = []
                runs: dict[str, np.ndarray] = {}
                for cell in routed:
                    null, measured = cell_levels(reads[cell.id], np.array([]))
                    assert measured is not None
                    points = boundaries(rule, cell, measured) or [null]
                    worst = None
                    for levels in points:
                        hits = simulate_cell(rule, cell, size, levels, analysis, "at_bar", None, spec)
                        worst = hits if worst is None or hits.sum() > worst.sum() else worst
                    assert worst is not None
                    at_bar.append(worst)
                    runs[cell.id] = simulate_cell(
                        rule, cell, size, measured, analysis, "measured", reads[cell.id], spec
                    )
                none = np.zeros(spec.simulations, dtype=bool)
                if routed:
                    named, heads = named_arms(rule, routed, runs, reads)
                else:
                    named, heads = (
                        np.full(spec.simulations, "park"),
                        {h: [None] * spec.simulations for h in HEADS},
                    )
                same_arm = (named == kind) & np.array(
                    [
                        a == outcome.ar_arm and f == outcome.flow_arm
                        for a, f in zip(heads["ar"], heads["flow"], strict=True)
                    ]
                )
                episodes = len(cells) * n * k * (1 + r) + len(arms) * n
                options.append(
                    PlanOption(
                        n,
                        k,
                        r,
                        same_outcome=Rate.of(named == kind),
                        false_go=Rate.of(np.any(at_bar or [none], axis=0)),
                        episodes=episodes,
                        cpu_s=None if per_episode is None else episodes * per_episode,
                        same_arm=None if kind == "park" or not named_arm else Rate.of(same_arm),
                    )
                )
    return options


def recommended(options: Sequence[PlanOption], false_go_target: float) -> PlanOption | None:
    """The cheapest option (fewest episodes, then fewest seeds) that meets both targets."""
    meeting = [o for o in options if o.meets(false_go_target)]
    return min(meeting, key=lambda o: (o.episodes, o.seeds)) if meeting else None


def _levels_text(decision: Mapping[str, Any]) -> list[str]:
    lines = []
    for cell in decision["cells"]:
        r = cell["reads"]
        lines.append(
            f"  {cell['id']}: choice std {r['choice_std_cm']:.3g} cm [{r['choice_std_cm_ci_low']:.3g}, "
            f"{r['choice_std_cm_ci_high']:.3g}], chaos std {r['chaos_std_cm']:.3g} cm "
            f"[{r['chaos_std_cm_ci_low']:.3g}, {r['chaos_std_cm_ci_high']:.3g}]"
        )
    return lines


def plan_text(
    prereg: Prereg,
    decision: Mapping[str, Any],
    options: Sequence[PlanOption],
    spec: OperatingSpec,
    current: tuple[int, int, int] | None,
) -> str:
    """The plan as the command prints it: the pilot's levels, one row per option, the recommendation."""
    target = spec.false_go_target
    kind = decision["outcome"]["kind"]
    lines = [
        f"Sizing {prereg.name} from its pilot's levels (outcome {kind}); {spec.simulations} simulated runs "
        f"per option and scenario, seed {spec.seed}.",
        "Measured levels (point, [interval]):",
        *_levels_text(decision),
        "",
        f"{'seeds':>5} {'K':>3} {'R':>3}  {'arm named':>24}  {'false go at the bar':>24}  {'episodes':>8}  "
        f"{'CPU-h':>6}  meets",
    ]
    for o in options:
        cpu = "-" if o.cpu_s is None else f"{o.cpu_s / 3600:.2f}"
        mark = " (this design)" if current == (o.seeds, o.k, o.replays) else ""
        lines.append(
            f"{o.seeds:>5} {o.k:>3} {o.replays:>3}  {_pct(o.held):>24}  {_pct(o.false_go):>24}  "
            f"{o.episodes:>8}  {cpu:>6}  {'yes' if o.meets(target) else 'no'}{mark}"
        )
    best = recommended(options, target)
    found = decision["outcome"]
    arms = [f"{h} arm {found.get(f'{h}_arm')}" for h in HEADS if found.get(f"{h}_arm")]
    what = f"outcome ({kind})" if not arms else f"outcome ({kind}) with its " + " and ".join(arms)
    lines.append("")
    if best is None:
        lines.append(
            f"No option names the pilot's {what} with the Wilson lower end of its rate at >= "
            f"{STABILITY_TARGET:.0%} and a false-go rate at the bar <= {target:.0%}: the measured levels "
            "sit near a threshold of the rule; try more seeds (--seeds) or replays (--replays), or "
            "reconsider the rule."
        )
    else:
        lines.append(
            f"Recommended: {best.seeds} seeds x K = {best.k} x R = {best.replays} (the cheapest option that "
            f"names the pilot's {what} in >= {STABILITY_TARGET:.0%} of runs at the lower end of its Wilson "
            f"interval, {_pct(best.held)}, with false go at the bar <= {target:.0%}, {_pct(best.false_go)})."
        )
    return "\n".join(lines) + "\n"


def _pct(rate: Rate) -> str:
    return f"{100 * rate.value:.1f} % [{100 * rate.low:.1f} %, {100 * rate.high:.1f} %]"
