"""``grpo-probe plan``: a noisier pilot needs a bigger design, and the command refuses what it cannot plan.

Why: a lab sizes its design from a pilot before locking it. The plan simulates the registered rule at
other sizes with the pilot's measured levels; if the same choice spread comes with more chaos, holding
the outcome takes more seeds or replays, and the recommendation must grow with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from grpo_probe.analysis.error_rates.plan import plan_options, plan_text, recommended
from grpo_probe.cli import main
from grpo_probe.prereg import load_prereg
from grpo_probe.prereg.rule import OperatingSpec

REPO = Path(__file__).resolve().parents[2]
SMOKE = load_prereg(REPO / "prereg" / "smoke.yaml")


def _pilot(choice: float, chaos: float) -> dict[str, Any]:
    """A pilot's decision.json, as far as the plan reads it: every smoke cell at these levels, the AR
    cell keeping its anchor's competence, the outcome both heads qualifying."""
    reads = {
        "choice_std_cm": choice, "choice_std_cm_ci_low": choice / 2, "choice_std_cm_ci_high": choice * 2,
        "chaos_std_cm": chaos, "chaos_std_cm_ci_low": chaos / 2, "chaos_std_cm_ci_high": chaos * 2,
        "mean_progress_delta_cm": 0.0,
    }  # fmt: skip
    return {
        "prereg": {"name": "smoke"},
        "cells": [{"id": c.id, "reads": dict(reads)} for c in SMOKE.enabled_cells],
        "outcome": {"kind": "ar_then_flow"},
    }


SIZES = {"seeds": (3, 6, 12, 24), "draws": (8,), "replays": (2, 4)}


def test_a_noisier_pilot_names_its_arm_less_often_and_the_recommendation_rests_on_the_lower_end() -> None:
    spec = OperatingSpec(simulations=150, seed=8)
    quiet = plan_options(SMOKE, _pilot(4.0, 2.0), spec=spec, **SIZES)
    noisy = plan_options(SMOKE, _pilot(4.0, 2.6), spec=spec, **SIZES)
    # the same keyed runs at each size: more chaos names the pilot's arms less often
    assert all(n.held.count <= q.held.count for q, n in zip(quiet, noisy, strict=True))
    assert sum(n.held.count for n in noisy) < sum(q.held.count for q in quiet)
    best = recommended(noisy, 0.05)
    assert best is not None and best.held.low >= 0.95 and best.false_go.value <= 0.05
    # an option whose point clears 95 % but whose Wilson lower end does not is not recommended
    assert all(o.held.low >= 0.95 for o in noisy if o.meets(0.05))
    assert any(o.held.value >= 0.95 > o.held.low for o in quiet + noisy)
    # every option's false-go rate is a rate of the runs simulated, and the text says which was chosen
    assert all(o.false_go.runs == 150 for o in quiet)
    assert f"Recommended: {best.seeds} seeds" in plan_text(SMOKE, _pilot(4.0, 2.6), noisy, spec, None)


def test_the_false_go_at_the_bar_shrinks_with_seeds_and_does_not_depend_on_the_scale() -> None:
    """At the bar the chaos share is 0.5 whatever the spread's scale, so the rate is the same for any
    levels; more seeds tighten the interval the rule reads and bring it down."""
    spec = OperatingSpec(simulations=150, seed=8)
    small = plan_options(SMOKE, _pilot(4.0, 2.0), spec=spec, **SIZES)
    large = plan_options(SMOKE, _pilot(40.0, 20.0), spec=spec, **SIZES)
    assert [o.false_go.count for o in small] == [o.false_go.count for o in large]
    by_seeds = {o.seeds: o.false_go.value for o in small if o.replays == 2}
    assert by_seeds[24] < by_seeds[3]


def test_a_pilot_without_replays_cannot_be_planned() -> None:
    pilot = _pilot(4.0, 2.0)
    for cell in pilot["cells"]:
        cell["reads"]["chaos_std_cm"] = None
    with pytest.raises(ValueError, match=r"no chaos std.*replay"):
        plan_options(SMOKE, pilot, spec=OperatingSpec(10, 1), **SIZES)


def test_the_command_names_the_missing_pilot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--prereg", str(REPO / "prereg/smoke.yaml"), "--results", str(tmp_path)]) == 2
    assert "no finished probe of smoke" in capsys.readouterr().err


def test_the_command_prints_and_writes_the_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "smoke"
    folder.mkdir()
    (folder / "decision.json").write_text(json.dumps(_pilot(4.0, 1.0)))
    out = tmp_path / "plan.json"
    code = main(
        ["plan", "--prereg", str(REPO / "prereg/smoke.yaml"), "--results", str(tmp_path), "--seeds", "4,8",
         "--replays", "2", "--simulations", "50", "--json", str(out)]
    )  # fmt: skip
    text = capsys.readouterr().out
    record = json.loads(out.read_text())
    assert [(o["seeds"], o["replays"]) for o in record["options"]] == [(4, 2), (8, 2)]
    assert code == (0 if any(o["meets_targets"] for o in record["options"]) else 1)
    assert "arm named" in text and "false go at the bar" in text and "CPU-h" in text
