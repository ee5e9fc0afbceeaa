"""How often the signal criterion passes, by simulation: the earlier point rule against the interval rule.

Run by hand (minutes on 2 cores; not in CI):

    .venv/bin/python benchmarks/rule_error_rates.py [--simulations 2000] [--chaos-std 4.3]

For one flow cell of the default design (its registered bootstrap, 2000 resamples), the pass rate of:

- the earlier point clause ``chaos_fraction <= 0.5`` at the earlier sizes (15 seeds, 6 replayed, K = 8,
  R = 2), and the earlier choice clause ``median_choice_std_cm >= 0.25`` under pure chaos;
- the registered interval rule (``choice_std_cm.lower >= 0.25`` and ``chaos_share.upper <= 0.5``) at the
  registered sizes (15 seeds, all replayed, K = 8, R = 4), and its point twin ``chaos_share <= 0.5``;

each at a true chaos share of 1 (pure chaos), 0.6, 0.5 (the bar) and 0.43 (the default's flow cells'
earlier read), chaos std ``--chaos-std`` cm. Every rate is the share of simulated runs
(:mod:`grpo_probe.analysis.error_rates.operating`) in which the criterion passes.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from grpo_probe.analysis.error_rates.operating import CellSize, Levels, Rate, simulate_cell
from grpo_probe.prereg import load_prereg
from grpo_probe.prereg.rule import DecisionRule, OperatingSpec

REPO = Path(__file__).resolve().parents[1]
BAR = {"analysis": "signal_bar_cm"}


def _rule(analysis: dict, *conditions: dict) -> DecisionRule:
    raw = {
        "criteria": {"signal": {"description": "signal", "all_of": list(conditions)}},
        "qualifies": {"ar": ["signal"], "flow": ["signal"]},
        "arm_choice": {"rank_by": []},
    }
    return DecisionRule.from_dict(raw, analysis, "benchmark")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=2000)
    parser.add_argument("--chaos-std", type=float, default=4.3)
    args = parser.parse_args()
    prereg = load_prereg(REPO / "prereg" / "grpo_signal_probe.yaml")
    raw = {**prereg.analysis.to_dict()}
    cell = next(c for c in prereg.enabled_cells if c.head == "flow")
    spec = OperatingSpec(args.simulations, 11)
    earlier, registered = CellSize(15, 6, 8, 2), CellSize(15, 15, 8, 4)
    fraction = {"read": "chaos_fraction", "op": "<=", "threshold": 0.5}
    first_choice = {"read": "median_choice_std_cm", "op": ">=", "threshold": BAR}
    share = {"read": "chaos_share", "op": "<=", "threshold": 0.5}
    rows = [
        ("chaos_fraction <= 0.5 (earlier point rule)", earlier, _rule(raw, fraction)),
        ("median_choice_std_cm >= 0.25 (earlier choice clause)", earlier, _rule(raw, first_choice)),
        ("chaos_share <= 0.5 (point)", registered, _rule(raw, share)),
        ("registered interval rule", registered, prereg.decision_rule),
    ]
    shares = (1.0, 0.6, 0.5, 0.43)
    print(f"{args.simulations} simulated runs per entry, chaos std {args.chaos_std} cm; pass rate in percent")
    print("| criterion | sizes | " + " | ".join(f"true chaos share {s:g}" for s in shares) + " |")
    print("|---|---|" + "---|" * len(shares))
    for label, size, rule in rows:
        cells = []
        for true_share in shares:
            choice = args.chaos_std * math.sqrt((1 - true_share) / true_share)
            scenario = "pure_chaos" if true_share == 1.0 else "measured"
            hits = simulate_cell(
                rule, cell, size, Levels(choice, args.chaos_std), prereg.analysis, scenario, {}, spec
            )
            rate = Rate.of(hits)
            cells.append(f"{100 * rate.value:.1f} [{100 * rate.low:.1f}, {100 * rate.high:.1f}]")
        print(f"| {label} | {size.text()} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
