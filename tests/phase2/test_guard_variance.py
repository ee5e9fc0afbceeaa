"""Phase 2 refuses an arm whose penalised guard trips in every episode of nearly every probe group.

A penalty charged in every episode of a group cancels from GRPO's normalised advantage, so the plan counts,
in the probe's groups of the cell that samples the trained arm, the groups in which each penalised guard
varies, and refuses the arm when it nearly never does while tripping.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from analysis.rollout_factory import rollout_row, write_table
from grpo_probe.envs.registry import env_spec
from grpo_probe.phase2 import pilot_jobs as steps
from grpo_probe.phase2.gate import Phase2Plan, Stage, apply_guard_checks, read_plan
from grpo_probe.phase2.guard_variance import (
    GuardCheck,
    GuardVariance,
    check_guard_variance,
    guard_variance,
    trained_cell,
)
from grpo_probe.prereg import Prereg, load_prereg
from grpo_probe.prereg.phase2 import DEFAULT_MIN_GUARD_VARIANCE_SHARE
from grpo_probe.prereg.schema import SchemaError

from .conftest import PHASE2_SECTION, write_decision, write_design

SEEDS = range(15)
K = 8


def _cell_table(path: Path, strikes: dict[int, int]) -> Path:
    """The flow cell's probe table of the test design: K draws of 15 seeds; ``strikes[seed]`` of a
    seed's draws have a reset strike (the first ones), every other guard stays quiet."""
    rows = [
        rollout_row(
            "c3_teacher_ode", "flow_teacher", "flow", seed, draw, 1.0,
            reset_strikes=int(draw < strikes.get(seed, 0)),
        )
        for seed in SEEDS
        for draw in range(K)
    ]  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_table(path, rows)


def _plan(tmp_path: Path, design: Path, strikes: dict[int, int]) -> tuple[Path, Path]:
    decision = write_decision(tmp_path / "decision.json", "phase2_flow", flow_arm="flow_teacher")
    table = _cell_table(tmp_path / "cells" / "c3_teacher_ode.parquet", strikes)
    plan = tmp_path / "phase2" / "plan.json"
    steps.phase2_plan(
        design, decision, [], plan, tmp_path / "phase2" / "plan.manifest.json",
        cell_tables={"c3_teacher_ode": table},
    )  # fmt: skip
    return plan, decision


def test_groups_are_counted_as_varying_always_or_never() -> None:
    seeds = np.repeat([1, 2, 3, 4], 3)
    trips = {
        "a": np.array([1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0], bool),  # always, always, some, never
        "b": np.zeros(12, bool),
        "c": np.ones(12, bool),
    }
    a, c = guard_variance(seeds, trips, {"a": 5.0, "b": 0.0, "c": 2.0})  # b costs nothing: not counted
    assert (a.guard, a.groups, a.varying, a.always, a.never, a.trips, a.episodes) == ("a", 4, 1, 2, 1, 7, 12)
    assert a.share == 0.25 and not a.saturated(0.1) and a.saturated(0.3)
    assert (c.varying, c.always, c.never, c.share) == (0, 4, 0, 0.0) and c.saturated(0.1)


def test_a_guard_that_never_trips_has_no_variance_and_is_not_refused() -> None:
    """Its penalty is a constant 0: nothing to correct, so nothing to refuse."""
    (quiet,) = guard_variance(np.repeat([1, 2, 3], 4), {"g": np.zeros(12, bool)}, {"g": 10.0})
    assert quiet.share == 0.0 and not quiet.saturated(0.1)
    (mostly_quiet,) = guard_variance(np.repeat([1, 2, 3], 4), {"g": np.arange(12) < 4}, {"g": 10.0})
    assert (mostly_quiet.always, mostly_quiet.never) == (1, 2) and not mostly_quiet.saturated(0.1)


def test_the_cell_read_is_the_one_that_samples_under_phase_2s_sampler(design: Prereg) -> None:
    """AR: c1_ar_t1_0 samples at temperature 1.0, the AR recipe's sampler. Flow: no cell samples with the
    SDE, so the decision's ranked cell, else the arm's first enabled cell."""
    assert trained_cell(design, "ar", {}) == "c1_ar_t1_0"
    assert trained_cell(design, "flow_teacher", {}) == "c3_teacher_ode"
    ranked = {"outcome": {"ranking": {"flow": ["c3_teacher_ode"]}}}
    assert trained_cell(design, "flow_teacher", ranked) == "c3_teacher_ode"
    assert trained_cell(design, "flow_short", {}) is None  # no enabled cell samples it


def test_a_guard_tripped_in_every_episode_refuses_the_pilot_and_the_page_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    design = write_design(tmp_path / "d.yaml")
    plan_path, decision = _plan(tmp_path, design, dict.fromkeys(SEEDS, K))
    plan = read_plan(plan_path)
    assert plan.stages == ()
    assert plan.reason.startswith(
        "phase 2 refuses to train arm flow_teacher: reset_strike trips in 120/120 sampled episodes of "
        "c3_teacher_ode (in every episode of 15/15 groups, in some but not all of 0: a share of 0 against "
        "phase2.reward.min_guard_variance_share 0.1): its 2 cm penalty is the same in every episode of "
        "nearly every group, so GRPO's advantage carries nothing against it"
    )
    assert plan.reason.endswith("; so nothing is trained (the decision is phase2_flow)")
    (check,) = plan.guard_checks
    assert [g.guard for g in check.saturated] == ["reset_strike"]
    steps.phase2_report(
        design, plan_path, decision, [tmp_path / "phase2" / "plan.manifest.json"], tmp_path / "phase2.md",
        tmp_path / "phase2.json", tmp_path / "figures", tmp_path / "phase2.manifest.json",
    )  # fmt: skip
    page = (tmp_path / "phase2.md").read_text()
    assert "Not tested: nothing was trained, because phase 2 refuses to train arm flow_teacher: " in page
    row = "| flow_teacher | c3_teacher_ode | {} | {} | {}/120 | 0/15 | {} | {} | 0.000 | {} |"
    assert row.format("reset_strike", 2, 120, 15, 0, "**refused**") in page
    assert row.format("knocked_off", 10, 0, 0, 15, "acts") in page
    record = json.loads((tmp_path / "phase2.json").read_text())
    assert record["trained"] is False and record["guard_checks"][0]["refused"] is True
    strike = record["guard_checks"][0]["guards"][0]
    assert (strike["guard"], strike["always"], strike["groups"]) == ("reset_strike", 15, 15)


def test_a_guard_that_varies_in_enough_groups_lets_the_pilot_train(tmp_path: Path) -> None:
    """Two groups in 15 with some strikes (a share of 0.133) clear the default 0.1; one does not."""
    design = write_design(tmp_path / "d.yaml")
    nearly = {**dict.fromkeys(SEEDS, K), 0: 3, 1: 5}
    plan = read_plan(_plan(tmp_path, design, nearly)[0])
    assert [s.arm for s in plan.stages] == ["flow_teacher"]
    assert plan.reason == "the decision is phase2_flow: GRPO on the flow arm flow_teacher"
    (check,) = plan.guard_checks
    assert check.refusal() is None and check.guards[0].varying == 2
    assert read_plan(_plan(tmp_path, design, {**nearly, 1: K})[0]).stages == ()
    decision = json.loads((tmp_path / "decision.json").read_text())
    guards = env_spec(load_prereg(design).env).guards
    with pytest.raises(ValueError, match=r"needs the probe table of cell 'c3_teacher_ode'.*tables of: c1_ar"):
        check_guard_variance(load_prereg(design), "flow_teacher", decision, {"c1_ar_t1_0": "x"}, guards)


def test_the_share_is_registered(tmp_path: Path) -> None:
    """A design that names no share gets the default; one that names 0.5 refuses two varying groups in 15."""
    default = load_prereg(write_design(tmp_path / "a.yaml")).phase2
    assert default is not None and default.min_guard_variance_share == DEFAULT_MIN_GUARD_VARIANCE_SHARE == 0.1
    reward = {**PHASE2_SECTION["reward"], "min_guard_variance_share": 0.5}
    strict = write_design(tmp_path / "b.yaml", reward=reward)
    registered = load_prereg(strict).phase2
    assert registered is not None and registered.min_guard_variance_share == 0.5
    plan = read_plan(_plan(tmp_path, strict, {**dict.fromkeys(SEEDS, K), 0: 3, 1: 5})[0])
    assert plan.stages == () and "against phase2.reward.min_guard_variance_share 0.5" in plan.reason
    with pytest.raises(
        SchemaError, match=r"phase2\.reward\.min_guard_variance_share: 1\.5 is greater than the maximum of 1"
    ):
        write_design(tmp_path / "c.yaml", reward={**reward, "min_guard_variance_share": 1.5})


def test_a_pilot_on_every_arm_drops_only_the_refused_arm(design: Prereg) -> None:
    plan = Phase2Plan(
        design.sha256, "park", None, None, True,
        (Stage("ar", "ar"), Stage("flow", "flow_teacher")), "every arm",
    )  # fmt: skip
    saturated = GuardVariance("swat", 2.0, 15, 0, 15, 0, 120, 120)
    fine = GuardVariance("swat", 2.0, 15, 9, 3, 3, 120, 70)
    checks = [
        GuardCheck("ar", "c1_ar_t1_0", 0.1, (fine,)),
        GuardCheck("flow_teacher", "c3_teacher_ode", 0.1, (saturated,)),
    ]
    assert design.phase2 is not None
    every_arm = replace(design, phase2=replace(design.phase2, pilot="every_arm"))
    kept = apply_guard_checks(every_arm, plan, checks)
    assert [s.arm for s in kept.stages] == ["ar"] and kept.guard_checks == tuple(checks)
    assert kept.reason.startswith("every arm; but phase 2 refuses to train arm flow_teacher: swat trips")
    assert apply_guard_checks(design, plan, checks).stages == ()  # gated: nothing
    assert apply_guard_checks(design, plan, checks[:1]).stages == plan.stages
