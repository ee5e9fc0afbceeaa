"""The default design's false go at each searched point of the null's boundary, without its tables.

Run by hand (about 40 CPU-s on 2 cores; not in CI):

    .venv/bin/python benchmarks/null_boundary_search.py [normal|t4]

The run's reward tables are not committed, so each cell's residual pool is synthesised from the committed
reference (docs/reference/grpo_signal_probe.decision.json): per replayed seed, K x (R + 1) normal (or
Student t with 4 degrees of freedom) residuals at that seed's measured chaos std. The cells are then
simulated as the decision job does (:func:`grpo_probe.analysis.error_rates.operating.cell_pass_rates`,
:func:`~grpo_probe.analysis.error_rates.operating.confirm_worst`), and the design's rate at every point
printed, with the worst and the CPU seconds of the cells' scenarios and of the confirmation.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

from grpo_probe.analysis.error_rates import operating as op
from grpo_probe.analysis.rule.decision_rule import Outcome
from grpo_probe.prereg import load_prereg

prereg = load_prereg(Path("prereg/grpo_signal_probe.yaml"))
rule, analysis = prereg.decision_rule, prereg.analysis
ref = json.loads(Path("docs/reference/grpo_signal_probe.decision.json").read_text())
tails = sys.argv[1] if len(sys.argv) > 1 else "normal"
rng = np.random.default_rng(7)
rates, reads = {}, {}
t0 = time.process_time()
for cell in prereg.enabled_cells:
    rc = next(c for c in ref["cells"] if c["id"] == cell.id)
    sd = np.array([s["chaos_std_cm"] for s in rc["replay"]["seeds"]])
    noise = (
        rng.standard_normal((15, 8, 5)) if tails == "normal" else rng.standard_t(4, (15, 8, 5)) / np.sqrt(2)
    )
    rewards = noise * sd[:, None, None]
    r = {k: v for k, v in rc["reads"].items()}
    reads[cell.id] = r
    size = op.CellSize(15, 15, 8, 4)
    rates[cell.id] = op.cell_pass_rates(
        rule, cell, size, r, np.array([s["std_progress_cm"] for s in rc["seeds"]]), analysis, rewards=rewards
    )
    rates[cell.id].verdicts["_rewards"] = rewards
t1 = time.process_time()
searched = op.searched_worst(prereg.enabled_cells, rates)
for cell in prereg.enabled_cells:
    found = rates[cell.id]
    pool = op.ResidualPool.of(found.verdicts.pop("_rewards"))
    found.verdicts["confirmed"] = op.simulate_cell(
        rule,
        cell,
        op.CellSize(15, 15, 8, 4),
        found.levels[searched],
        analysis,
        f"{searched}_full",
        None,
        analysis.operating,
        pool,
        op.SEARCH_SCENARIOS[searched],
    )
t2 = time.process_time()
outcome = Outcome("park", "", None, None, (), (), ())
design = op.design_rates(rule, prereg.enabled_cells, rates, reads, outcome)
for k, v in design.items():
    if v is not None and "measured" not in k:
        print(f"{k:20s} {100 * v.value:5.1f} % [{100 * v.low:.1f}, {100 * v.high:.1f}] of {v.runs}")
print("worst", op.worst_rate(design)[0], "searched", searched)
print(f"cpu-s: cells {t1 - t0:.1f}, confirm {t2 - t1:.1f}")
