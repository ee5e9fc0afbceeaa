"""What a pilot can claim: whether it moved the policy, and the smallest held-out change its seeds detect."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.stats import t

from envs import chaos_envs
from grpo_probe.phase2 import pilot_jobs as steps
from grpo_probe.phase2.evaluate import (
    POWER,
    DetectableChange,
    PairedChange,
    evaluate_checkpoint,
    minimum_detectable_change,
)
from grpo_probe.phase2.movement import (
    ACTION_MOVEMENT_TOL,
    ACTION_RANGE,
    Movement,
    kl_floor,
    policy_movement,
)
from grpo_probe.phase2.page import _movement_markdown
from grpo_probe.phase2.report import _movement_text, stage_verdict
from grpo_probe.phase2.rollouts import read_batch, run_iteration, write_iteration_table
from grpo_probe.prereg import Prereg, PreregError, lock_prereg
from grpo_probe.prereg.canonical import read_yaml

from .conftest import write_decision, write_design

T_975_4 = 2.7764451051977934  # t_{0.975, 4}: two-sided 95 % at 5 seeds
T_80_4 = 0.9409645772351816  # t_{0.80, 4}: 80 % power at 5 seeds


# -- the minimum detectable change -----------------------------------------------------------------------
def _t_mde(differences: np.ndarray, confidence: float, power: float) -> float:
    """The paired t-test's MDE computed here, independently: scipy.stats' t quantiles, numpy's ddof-1 SD."""
    n = differences.size
    quantiles = t.ppf(1.0 - (1.0 - confidence) / 2.0, n - 1) + t.ppf(power, n - 1)
    return float(quantiles * np.std(differences, ddof=1) / math.sqrt(n))


def test_mde_is_the_t_sum_times_the_sd_of_the_paired_differences_over_root_n() -> None:
    """Initial values spread by metres, differences by a known 0.1: the MDE follows the differences."""
    initial = np.array([3.0, 150.0, 47.0, 220.0, 9.0])  # per-seed SD about 95 cm
    differences = np.array([0.1, -0.1, 0.2, 0.0, -0.2])  # mean 0, squares sum 0.1, SD sqrt(0.1 / 4)
    final = initial + differences
    found = minimum_detectable_change("progress_final_cm", final - initial, confidence=0.95)
    assert found.power == POWER == 0.8 and found.seeds == 5
    assert found.diff_sd == pytest.approx(math.sqrt(0.1 / 4.0), rel=1e-12)
    assert (found.t_confidence, found.t_power) == pytest.approx((T_975_4, T_80_4), rel=1e-12)
    assert found.mde == pytest.approx(_t_mde(differences, 0.95, 0.8), rel=1e-12)
    assert found.mde == pytest.approx((2.7764451 + 0.9409646) * 0.158113883 / math.sqrt(5), rel=1e-6)
    from_initial_sd = (T_975_4 + T_80_4) * float(np.std(initial, ddof=1)) / math.sqrt(5)
    assert found.mde < from_initial_sd / 100  # not the initial policy's spread
    z_form = (1.959963984540054 + 0.8416212335729143) * float(np.std(differences, ddof=1)) / math.sqrt(5)
    assert found.mde > 1.3 * z_form  # t quantiles at 4 degrees of freedom, not the normal ones


@pytest.mark.parametrize(("confidence", "power"), [(0.95, 0.8), (0.99, 0.9), (0.9, 0.5)])
@pytest.mark.parametrize("seeds", [2, 3, 10, 30])
def test_mde_matches_the_paired_t_formula_at_every_size(seeds: int, confidence: float, power: float) -> None:
    differences = np.random.default_rng(seeds).normal(0.5, 2.0, size=seeds)
    found = minimum_detectable_change("x", differences, confidence, power)
    assert found.mde == pytest.approx(_t_mde(differences, confidence, power), rel=1e-12)


def test_mde_needs_two_seeds_and_differences_with_a_spread() -> None:
    single = minimum_detectable_change("x", [3.0], confidence=0.95)
    assert single.mde is None and single.diff_sd is None and single.t_confidence is None
    assert not single.resolves(-0.1, 0.1)
    alike = minimum_detectable_change("x", [0.4, 0.4, 0.4], confidence=0.95)  # every seed changed alike
    assert alike.diff_sd == 0.0 and alike.mde is None and not alike.resolves(-0.1, 0.1)
    with pytest.raises(ValueError, match="one paired difference per held-out seed"):
        minimum_detectable_change("x", [], confidence=0.95)


def test_an_interval_without_spread_in_its_differences_states_no_mde() -> None:
    alike = minimum_detectable_change("progress_final_cm", [0.0, 0.0, 0.0], confidence=0.95)
    verdict, sentence, detectability = stage_verdict(_change(0.0, 0.0, 0.0, seeds=3), True, alike)
    assert (verdict, detectability) == ("not shown", None)
    assert "the paired differences in held-out progress have no spread over 3 seed(s)" in sentence


def _change(low: float, high: float, delta: float = 0.0, seeds: int = 30) -> PairedChange:
    return PairedChange("progress_final_cm", "progress (cm)", 1.0, 1.0 + delta, delta, low, high, seeds)


def _mde(seeds: int, mde: float = 3.0) -> DetectableChange:
    return DetectableChange(
        "progress_final_cm", seeds, 5.0, 0.95, 0.8, t.ppf(0.975, seeds - 1), t.ppf(0.8, seeds - 1), mde
    )


MDE_3CM = _mde(30)


def test_not_shown_reads_as_absent_at_this_power_only_when_the_interval_is_inside_the_mde() -> None:
    verdict, sentence, detectability = stage_verdict(_change(-1.0, 2.0, 0.5), True, MDE_3CM)
    assert (verdict, detectability) == ("not shown", "absent at this power")
    assert "lies inside +-3 cm, the smallest change 30 held-out seeds detect (95% confidence" in sentence
    verdict, sentence, detectability = stage_verdict(_change(-4.3, 0.8, -1.7), True, MDE_3CM)
    assert (verdict, detectability) == ("not shown", "below what 30 seeds can detect")
    assert "a true change below what 30 held-out seeds can detect (MDE 3 cm" in sentence
    assert stage_verdict(_change(0.2, 2.0, 1.0), True, MDE_3CM)[0] == "held"
    assert stage_verdict(_change(-2.0, -0.2, -1.0), True, MDE_3CM)[0] == "did not hold"


@pytest.mark.parametrize("seeds", [2, 3, 9, 10, 30])
def test_an_interval_inside_the_mde_reads_absent_on_any_number_of_seeds(seeds: int) -> None:
    """The paired t interval covers the true change at its level on any n >= 2, so an interval inside
    +-MDE rules a change that large out on 3 seeds as on 30 (the percentile interval needed 10)."""
    verdict, sentence, detectability = stage_verdict(_change(-1.0, 2.0, 0.5, seeds), True, _mde(seeds))
    assert (verdict, detectability) == ("not shown", "absent at this power")
    assert sentence.endswith("a change that large is absent at this power")
    assert "percentile" not in sentence and "too few" not in sentence


def test_few_seeds_outside_the_mde_still_read_below_what_they_can_detect() -> None:
    verdict, _, detectability = stage_verdict(_change(-4.3, 0.8, -1.7, 3), True, _mde(3))
    assert (verdict, detectability) == ("not shown", "below what 3 seeds can detect")


def test_a_pilot_that_did_not_move_the_policy_is_not_tested_whatever_its_interval() -> None:
    for low, high in ((0.2, 2.0), (-1.0, 1.0), (-2.0, -0.5)):
        verdict, sentence, detectability = stage_verdict(_change(low, high), False, MDE_3CM, "KL 0")
        assert verdict == "not tested" and detectability is None
        assert sentence.startswith(
            "not tested: the pilot did not move the anchor, the policy the held-out evaluation runs (KL 0)"
        )


def _movement(kl: float, action_change: float) -> Movement:
    return Movement("flow", kl, "nats per SDE step", 120, 5e-5, action_change, 9, 2e-3)


def test_a_kl_above_its_floor_with_the_anchor_below_its_floor_has_not_moved() -> None:
    """The smoke pilot's reads: the sampling distribution moved, the anchor the evaluation runs did not."""
    still = _movement(2.6e-4, 1.5e-5)
    assert still.sampling_moved and not still.moved
    record = still.to_dict()
    assert record["moved"] is False and record["sampling_moved"] is True
    assert _movement(0.0, 2e-3).moved and _movement(0.0, 0.5).moved  # at or above the floor: moved
    assert not _movement(0.0, 1.999e-3).moved
    for low, high in ((0.2, 2.0), (-1.0, 1.0), (-2.0, -0.5)):
        verdict, sentence, detectability = stage_verdict(
            _change(low, high, seeds=3), still.moved, _mde(3), _movement_text(record)
        )
        assert (verdict, detectability) == ("not tested", None)
        assert "anchor actions mean |delta a| 1.5e-05 (floor 0.002); KL to the initial policy" in sentence
    page = _movement_markdown(record)
    assert "the pilot **did not move** the anchor" in page
    assert "Here the sampling distribution moved (KL above its floor) but the anchor" in page


# -- movement --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("head", "arm"), [("ar", "ar"), ("flow", "flow_teacher")])
def test_a_final_checkpoint_equal_to_the_initial_one_has_not_moved(
    head: str, arm: str, design: Prereg, heads: dict[str, Path], tmp_path: Path
) -> None:
    """theta_N = theta_0: the anchor's actions move by exactly 0 and the KL stays within the floor."""
    table = tmp_path / "rollouts.parquet"
    write_iteration_table(run_iteration(design, arm, heads[head], 0, show_progress=False), table)
    held_out = evaluate_checkpoint(design, arm, heads[head], "initial", tmp_path / "initial.parquet")
    assert len(held_out.keys) == len(held_out.obs) == 3 * 2  # 3 held-out seeds x 2 replans
    atol = design.phase2.recipe(head).replay_atol  # type: ignore[union-attr]
    movement = policy_movement(
        heads[head], heads[head], read_batch(table, design.run_key), held_out, design.arms[arm].anchor, atol
    )
    assert movement.action_change == 0.0
    assert 0.0 <= movement.kl_to_initial <= movement.kl_floor == kl_floor(atol) == 0.5 * atol**2
    assert movement.action_floor == ACTION_MOVEMENT_TOL * ACTION_RANGE
    assert not movement.moved and movement.to_dict()["moved"] is False
    assert movement.kl_entries > 0 and movement.action_observations == 6


def test_a_user_environment_without_the_penalised_guards_is_refused_before_phase_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user factory's guards are known only once it is built: phase2_plan checks the penalties then."""
    monkeypatch.chdir(tmp_path)
    path = write_design(tmp_path / "d.yaml")
    raw = read_yaml(path)
    del raw["sim"]
    raw["env"] = {"id": chaos_envs.factory_name(chaos_envs.make_luck_plane), "params": {}}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    Path(f"{path}.lock").unlink()
    lock_prereg(path)
    decision = write_decision(tmp_path / "decision.json", "phase2_flow", flow_arm="flow_teacher")
    with pytest.raises(PreregError) as err:
        steps.phase2_plan(path, decision, [], tmp_path / "plan.json", tmp_path / "plan.manifest.json")
    first = str(err.value).splitlines()[0]
    assert first.startswith(f"{path}: phase2.reward.penalties.reset_strike: environment ")
    assert first.endswith("declares no guard 'reset_strike' (its guards: away_tail)")
