"""Sizing a design before it is locked: how many seeds, draws and replays its rule needs.

Why: a design's error rates depend on its sizes. A pilot probe (or a finished one) measures each cell's
choice and chaos std; from those levels, :mod:`grpo_probe.analysis.operating` simulates the design's
registered rule at other sizes, and this module lays the options side by side: for each (seeds, K, R)
the share of simulated runs that give the pilot's outcome kind at its measured levels (the outcome's
stability: the target is 95 %), the false-go rate under pure chaos (the target is the design's
``false_go_target``, 5 % by default), and the CPU the rollouts would cost, priced per episode from the
pilot's own parallel-oracle benchmark as ``grpo-probe estimate`` prices a run. The recommendation is the
cheapest option that meets both targets.

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

from grpo_probe.analysis.operating import CellSize, Rate, cell_levels, simulate_cell
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
"""The share of runs at the measured levels that must give the pilot's outcome kind."""


@dataclass(frozen=True)
class PlanOption:
    """One candidate size: its simulated rates, the episodes it runs and their estimated CPU."""

    seeds: int
    k: int
    replays: int
    same_outcome: Rate
    """Runs at the measured levels that give the pilot's outcome kind."""
    false_go: Rate
    """Runs under pure chaos in which any cell qualifies."""
    episodes: int
    """Probe, replay and anchor episodes (the oracles' few are left out)."""
    cpu_s: float | None
    """Estimated CPU seconds of those episodes (None without a benchmark to price them)."""

    def meets(self, false_go_target: float) -> bool:
        """Both targets: the outcome holds in >= 95 % of runs and the false-go rate is within target."""
        return self.same_outcome.value >= STABILITY_TARGET and self.false_go.value <= false_go_target

    def to_dict(self, false_go_target: float) -> dict[str, Any]:
        return {
            "seeds": self.seeds,
            "k": self.k,
            "replays": self.replays,
            "same_outcome": self.same_outcome.to_dict(),
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


def _kind(qualifies: Mapping[str, np.ndarray]) -> np.ndarray:
    ar, flow = qualifies["ar"], qualifies["flow"]
    return np.select([ar & flow, ar, flow], ["ar_then_flow", "phase2_ar", "phase2_flow"], "park")


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
    kind = decision["outcome"]["kind"]
    arms = {c.arm for c in cells}
    options = []
    for n in seeds:
        for k in draws or (prereg.group_size,):
            for r in replays:
                size = CellSize(n, n, k, r)
                null_runs: dict[str, list[np.ndarray]] = {h: [] for h in HEADS}
                runs: dict[str, list[np.ndarray]] = {h: [] for h in HEADS}
                for cell in cells:
                    if cell.head not in HEADS:
                        continue
                    reads = by_id[cell.id]["reads"]
                    null, measured = cell_levels(reads, np.array([]))
                    assert measured is not None
                    analysis = prereg.analysis
                    null_runs[cell.head].append(
                        simulate_cell(
                            prereg.decision_rule, cell, size, null, analysis, "pure_chaos", None, spec
                        )
                    )
                    runs[cell.head].append(
                        simulate_cell(
                            prereg.decision_rule, cell, size, measured, analysis, "measured", reads, spec
                        )
                    )
                none = np.zeros(spec.simulations, dtype=bool)
                null_any = {h: np.any(v or [none], axis=0) for h, v in null_runs.items()}
                measured_any = {h: np.any(v or [none], axis=0) for h, v in runs.items()}
                episodes = len(cells) * n * k * (1 + r) + len(arms) * n
                options.append(
                    PlanOption(
                        n,
                        k,
                        r,
                        same_outcome=Rate.of(_kind(measured_any) == kind),
                        false_go=Rate.of(_kind(null_any) != "park"),
                        episodes=episodes,
                        cpu_s=None if per_episode is None else episodes * per_episode,
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
        f"{'seeds':>5} {'K':>3} {'R':>3}  {'outcome holds':>22}  {'false go':>22}  {'episodes':>8}  "
        f"{'CPU-h':>6}  meets",
    ]
    for o in options:
        cpu = "-" if o.cpu_s is None else f"{o.cpu_s / 3600:.2f}"
        mark = " (this design)" if current == (o.seeds, o.k, o.replays) else ""
        lines.append(
            f"{o.seeds:>5} {o.k:>3} {o.replays:>3}  {_pct(o.same_outcome):>22}  {_pct(o.false_go):>22}  "
            f"{o.episodes:>8}  {cpu:>6}  {'yes' if o.meets(target) else 'no'}{mark}"
        )
    best = recommended(options, target)
    lines.append("")
    if best is None:
        lines.append(
            f"No option holds the outcome ({kind}) in >= {STABILITY_TARGET:.0%} of runs with a false-go rate "
            f"<= {target:.0%}: the measured levels sit near a threshold of the rule; try more seeds "
            "(--seeds) or replays (--replays), or reconsider the rule."
        )
    else:
        lines.append(
            f"Recommended: {best.seeds} seeds x K = {best.k} x R = {best.replays} (the cheapest option that "
            f"holds the outcome in >= {STABILITY_TARGET:.0%} of runs with false go <= {target:.0%})."
        )
    return "\n".join(lines) + "\n"


def _pct(rate: Rate) -> str:
    return f"{100 * rate.value:.1f} % [{100 * rate.low:.1f}, {100 * rate.high:.1f}]"
