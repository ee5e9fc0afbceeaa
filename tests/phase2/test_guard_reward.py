"""The pilot's reward charges the guards the environment declares, and a design cannot name any other."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grpo_probe.envs.boat.spec import boat_spec
from grpo_probe.envs.protocol import EnvSpec, Guard
from grpo_probe.envs.pusher.spec import pusher_spec
from grpo_probe.phase2.reward import guard_trips, shaped_rewards
from grpo_probe.prereg import PreregError
from grpo_probe.prereg.phase2 import penalty_problems

from .conftest import PHASE2_SECTION, write_design

ANALYSIS = {"swat_speed_m_s": 0.6, "away_tail_cm": -2.0}
"""The registered thresholds the boat's and the pusher's swat and away_tail guards name."""

BOAT_COLUMNS = {  # four episodes: clean, two strikes and knocked off, tilted and swatted, drifted away
    "progress_final_cm": [7.5, 3.0, 1.0, -4.0],
    "reset_strikes": [0, 2, 0, 0],
    "knocked_off": [False, True, False, False],
    "final_upright": [True, True, False, True],
    "max_boat_speed_m_s": [0.1, 0.3, 0.9, 0.2],
}
PUSHER_COLUMNS = {  # clean, a joint-limit hit and off the table, struck, drifted away
    "progress_final_cm": [6.0, 2.0, 4.0, -3.0],
    "joint_limit_hits": [0, 3, 0, 0],
    "object_off_table": [False, True, False, False],
    "max_object_speed_m_s": [0.2, 0.1, 0.8, 0.1],
}


def _untripped(guard: Guard, episodes: int) -> list:
    """A column on which ``guard`` never trips: at its threshold, or the boolean that does not trip it."""
    if guard.trips_when in (">", "<"):
        return [guard.threshold_value(ANALYSIS)] * episodes
    return [guard.trips_when == "false"] * episodes


def _episodes(spec: EnvSpec, columns: dict) -> dict:
    """``columns`` with a never-tripping column for each guard of ``spec`` they do not hold: a guard added
    to the environment's declarations (docs/extending.md) leaves these episodes' rewards as they are."""
    episodes = len(columns["progress_final_cm"])
    return {g.column: _untripped(g, episodes) for g in spec.guards} | columns


def _rewards(spec: EnvSpec, columns: dict, penalties: dict) -> np.ndarray:
    columns = _episodes(spec, columns)
    return shaped_rewards(
        columns["progress_final_cm"], guard_trips(columns, spec.guards, ANALYSIS), penalties
    )


def test_the_boat_reward_charges_each_tripped_guard_once_per_episode() -> None:
    penalties = {"reset_strike": 5.0, "knocked_off": 10.0, "not_upright": 10.0, "swat": 2.0}
    rewards = _rewards(boat_spec(), BOAT_COLUMNS, penalties)
    # two strikes trip reset_strike once; away_tail is not penalised, so the last episode keeps -4
    np.testing.assert_array_equal(rewards, [7.5, 3.0 - 5.0 - 10.0, 1.0 - 10.0 - 2.0, -4.0])


def test_the_pusher_reward_charges_the_pusher_guards() -> None:
    penalties = {"joint_limit": 3.0, "off_table": 10.0, "away_tail": 1.0, "swat": 2.0}
    rewards = _rewards(pusher_spec(), PUSHER_COLUMNS, penalties)
    np.testing.assert_array_equal(rewards, [6.0, 2.0 - 3.0 - 10.0, 4.0 - 2.0, -3.0 - 1.0])


def test_trips_follow_the_environment_order_and_its_declarations() -> None:
    trips = guard_trips(_episodes(boat_spec(), BOAT_COLUMNS), boat_spec().guards, ANALYSIS)
    assert list(trips) == list(boat_spec().guard_names)
    assert {"reset_strike", "knocked_off", "not_upright", "away_tail", "swat"} <= set(trips)
    assert trips["reset_strike"].tolist() == [False, True, False, False]
    assert trips["away_tail"].tolist() == [False, False, False, True]  # -4 < analysis.away_tail_cm = -2


def test_no_penalty_leaves_progress() -> None:
    rewards = _rewards(pusher_spec(), PUSHER_COLUMNS, {})
    np.testing.assert_array_equal(rewards, PUSHER_COLUMNS["progress_final_cm"])


def test_a_penalty_on_a_guard_the_reward_cannot_see_is_an_error_naming_the_guards() -> None:
    with pytest.raises(ValueError, match=r"phase2\.reward\.penalties\.knocked_off: .* \(its guards: "):
        _rewards(pusher_spec(), PUSHER_COLUMNS, {"knocked_off": 1.0})


@pytest.mark.parametrize(
    ("spec", "foreign"),
    [(boat_spec(), "joint_limit"), (pusher_spec(), "not_upright")],
    ids=["boat", "pusher"],
)
def test_penalty_problems_name_the_field_and_the_environment_guards(spec: EnvSpec, foreign: str) -> None:
    assert penalty_problems({"swat": 1.0, foreign: 2.0}, spec) == [
        f"phase2.reward.penalties.{foreign}: environment {spec.id!r} declares no guard {foreign!r} "
        f"(its guards: {', '.join(spec.guard_names)})"
    ]


def test_a_misspelt_guard_penalty_is_offered_the_guard_it_resembles() -> None:
    (problem,) = penalty_problems({"knocked_of": 1.0}, boat_spec())
    assert problem.endswith("; did you mean 'knocked_off'?")


def test_a_design_penalising_a_guard_its_environment_lacks_is_refused(tmp_path: Path) -> None:
    reward = {"penalties": {**PHASE2_SECTION["reward"]["penalties"], "joint_limit": 1.0}}
    with pytest.raises(PreregError) as err:
        write_design(tmp_path / "d.yaml", reward=reward)
    assert str(err.value) == (
        f"{tmp_path / 'd.yaml'}: phase2.reward.penalties.joint_limit: environment 'boat_push' declares no "
        f"guard 'joint_limit' (its guards: {', '.join(boat_spec().guard_names)})"
    )
