"""A guard is one declaration (:class:`grpo_probe.envs.protocol.Guard`): a toy guard added to the boat's
spec here is counted, named in the reads and the glossary, and priced by phase 2's reward, with no other
file changed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from grpo_probe.analysis.cells.guards import guard_rates
from grpo_probe.analysis.cells.reads import read_rows
from grpo_probe.analysis.cells.tables import read_anchor_table, read_probe_table
from grpo_probe.analysis.rule.glossary import glossary
from grpo_probe.envs.boat.spec import BOAT_GUARDS, boat_spec
from grpo_probe.envs.protocol import EnvSpec, Guard
from grpo_probe.phase2.reward import guard_trips, shaped_rewards
from grpo_probe.prereg.design import environment_problems
from grpo_probe.prereg.phase2 import penalty_problems
from grpo_probe.prereg.rule import parse_analysis_sections

from .rollout_factory import anchor_rows, as_prereg, rollout_row, write_table

REPO = Path(__file__).resolve().parents[2]

TILTED = Guard(
    "toy_tilted",
    "final_tilt_deg",
    ">",
    "the boat ended more than {threshold:g} degrees from upright (toy)",
    threshold=10.0,
)
"""A toy guard of the shape of docs/extending.md's ``tilted``, under a name of its own (a reader who adds the
example keeps this test passing: tests/test_docs_examples.py)."""


def _with_tilted() -> EnvSpec:
    """The boat's spec with the toy guard registered last, as docs/extending.md registers ``tilted``."""
    with BOAT_GUARDS.registered(TILTED.name, lambda params: TILTED):
        return boat_spec()


def test_a_registered_guard_comes_last_and_leaves_with_its_registration() -> None:
    spec = _with_tilted()
    assert spec.guards[-1] is TILTED and spec.guards[:-1] == boat_spec().guards
    assert TILTED.name not in boat_spec().guard_names


def test_a_guard_built_under_another_name_than_its_registration_is_refused() -> None:
    with (
        BOAT_GUARDS.registered("toy_leaning", lambda params: TILTED),
        pytest.raises(
            ValueError, match=r"boat guard 'toy_leaning': its factory .* not a Guard named 'toy_le"
        ),
    ):
        boat_spec()


def test_the_boats_guard_names_are_read_off_its_declarations() -> None:
    assert boat_spec().guard_names == boat_spec().guard_names
    assert {"reset_strike", "swat"} <= set(boat_spec().guard_names)


def test_a_rule_may_name_a_declared_guards_rates_and_no_other() -> None:
    """The schema names no guard: a guard's rates are read by pattern, and the design check asks the
    environment's declarations, so a guard added to the spec is readable with no schema change."""
    raw = {
        "criteria": {
            "calm": {
                "description": "few tilts",
                "all_of": [{"read": "sampled_toy_tilted_rate", "op": "<=", "threshold": 0.1}],
            }
        },
        "qualifies": {"ar": ["calm"], "flow": ["calm"]},
        "arm_choice": {"rank_by": [{"read": "anchor_toy_tilted_rate", "prefer": "min"}]},
    }
    analysis = yaml.safe_load((REPO / "prereg" / "smoke.yaml").read_text())["analysis"]
    _, rule = parse_analysis_sections({"analysis": analysis, "decision_rule": raw}, "toy.yaml")
    assert environment_problems(rule, None, _with_tilted()) == []
    problems = environment_problems(rule, None, boat_spec())
    assert len(problems) == 2 and all(
        "reads guard 'toy_tilted', which environment 'boat_push'" in p for p in problems
    )


def test_a_toy_guard_flows_through_counting_reads_glossary_and_the_phase2_reward(
    tmp_path: Path, prereg: dict
) -> None:
    spec = _with_tilted()
    tilted = {(0, 0), (1, 2)}  # (seed, draw) of the sampled episodes that end tilted
    rows = [
        rollout_row("c1", "ar", "ar", seed, draw, 1.0, final_tilt_deg=20.0 if (seed, draw) in tilted else 1.0)
        for seed in (0, 1)
        for draw in range(3)
    ]
    probe = read_probe_table(write_table(tmp_path / "probe.parquet", rows), "c1", "ar", "ar", 1, env=spec)
    anchor = read_anchor_table(
        write_table(tmp_path / "anchor.parquet", anchor_rows("ar", "ar", {0: 1.0, 1: 1.0})),
        "ar",
        "ar",
        env=spec,
    )
    design = as_prereg(prereg)
    rates = {r.guard: r for r in guard_rates(probe, anchor, design.analysis)}
    assert list(rates) == [*boat_spec().guard_names, "toy_tilted"]
    toy = rates["toy_tilted"]
    assert (toy.sampled_count, toy.sampled_n, toy.anchor_count, toy.anchor_n) == (2, 6, 0, 2)

    assert {
        "term": "toy_tilted",
        "meaning": "the boat ended more than 10 degrees from upright (toy)",
    } in glossary(design, env=spec)
    assert "sampled_toy_tilted_rate" in [row.read for row in read_rows(spec.guard_names)]

    columns = {"final_tilt_deg": [20.0, 1.0, 12.0]}
    trips = guard_trips(columns, [TILTED], design.analysis.to_dict())
    assert trips["toy_tilted"].tolist() == [True, False, True]
    rewards = shaped_rewards(np.array([5.0, 5.0, 5.0]), trips, {"toy_tilted": 3.0})
    assert rewards.tolist() == [2.0, 5.0, 2.0]
    assert penalty_problems({"toy_tilted": 3.0}, spec) == []
    assert penalty_problems({"toy_tilted": 3.0}, boat_spec()) != []  # the boat without it refuses the key
