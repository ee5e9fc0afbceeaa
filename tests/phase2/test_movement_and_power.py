"""What a pilot can claim: whether it moved the policy, and the smallest held-out change its seeds detect."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from envs import chaos_envs
from grpo_probe.phase2 import pilot_jobs as steps
from grpo_probe.phase2.evaluate import (
    POWER,
    DetectableChange,
    PairedChange,
    evaluate_checkpoint,
    minimum_detectable_change,
)
from grpo_probe.phase2.movement import ACTION_MOVEMENT_TOL, ACTION_RANGE, kl_floor, policy_movement
from grpo_probe.phase2.report import stage_verdict
from grpo_probe.phase2.rollouts import read_batch, run_iteration, write_iteration_table
from grpo_probe.prereg import Prereg, PreregError, lock_prereg
from grpo_probe.prereg.canonical import read_yaml

from .conftest import write_decision, write_design

# -- the minimum detectable change -----------------------------------------------------------------------
Z_975 = 1.959963984540054  # z_{0.975}: two-sided 95 %
Z_80 = 0.8416212335729143  # z_{0.80}: 80 % power


def test_mde_is_z_sum_times_the_initial_sd_over_root_n() -> None:
    values = [1.0, 2.0, 4.0, 7.0]  # mean 3.5, squared deviations 6.25 + 2.25 + 0.25 + 12.25 = 21
    sd = math.sqrt(21.0 / 3.0)  # ddof 1
    found = minimum_detectable_change("progress_final_cm", values, confidence=0.95)
    assert found.power == POWER == 0.8
    assert found.initial_sd == pytest.approx(sd, rel=1e-15)
    assert (found.z_confidence, found.z_power) == pytest.approx((Z_975, Z_80), rel=1e-12)
    assert found.mde == pytest.approx((Z_975 + Z_80) * sd / 2.0, rel=1e-12)  # sqrt(4) = 2
    assert found.mde == pytest.approx(3.7061, abs=1e-4)


def test_mde_scales_with_confidence_and_power_and_needs_two_seeds() -> None:
    wide = minimum_detectable_change("x", [0.0, 1.0, 2.0], confidence=0.99, power=0.9)
    assert wide.mde == pytest.approx((2.5758293035489 + 1.2815515655446) * 1.0 / math.sqrt(3), rel=1e-9)
    single = minimum_detectable_change("x", [3.0], confidence=0.95)
    assert single.mde is None and single.initial_sd is None and not single.resolves(-0.1, 0.1)
    alike = minimum_detectable_change("x", [3.0, 3.0, 3.0], confidence=0.95)
    assert alike.initial_sd == 0.0 and alike.mde is None  # no spread: the approximation says nothing


def _change(low: float, high: float, delta: float = 0.0) -> PairedChange:
    return PairedChange("progress_final_cm", "progress (cm)", 1.0, 1.0 + delta, delta, low, high, 30)


MDE_3CM = DetectableChange("progress_final_cm", 30, 5.864, 0.95, 0.8, Z_975, Z_80, 3.0)


def test_not_shown_reads_as_absent_at_this_power_only_when_the_interval_is_inside_the_mde() -> None:
    verdict, sentence, detectability = stage_verdict(_change(-1.0, 2.0, 0.5), True, MDE_3CM)
    assert (verdict, detectability) == ("not shown", "absent at this power")
    assert "lies inside +-3 cm, the smallest change 30 held-out seeds detect (95% confidence" in sentence
    verdict, sentence, detectability = stage_verdict(_change(-4.3, 0.8, -1.7), True, MDE_3CM)
    assert (verdict, detectability) == ("not shown", "below what 30 seeds can detect")
    assert "a true change below what 30 held-out seeds can detect (MDE 3 cm" in sentence
    assert stage_verdict(_change(0.2, 2.0, 1.0), True, MDE_3CM)[0] == "held"
    assert stage_verdict(_change(-2.0, -0.2, -1.0), True, MDE_3CM)[0] == "did not hold"


def test_a_pilot_that_did_not_move_the_policy_is_not_tested_whatever_its_interval() -> None:
    for low, high in ((0.2, 2.0), (-1.0, 1.0), (-2.0, -0.5)):
        verdict, sentence, detectability = stage_verdict(_change(low, high), False, MDE_3CM, "KL 0")
        assert verdict == "not tested" and detectability is None
        assert sentence.startswith("not tested: the pilot did not move the policy (KL 0)")


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
