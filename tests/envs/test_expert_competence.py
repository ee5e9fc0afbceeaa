"""The expert's measurement: what it reads from each episode's distance trace, and what it suggests.

Why: a design's episode length and success radius come from these numbers (``grpo-probe expert``,
``grpo-probe design new``), so each step is held to episodes whose answer is known by hand, and the
measurement of a real environment is held to the episodes the design itself would run.
"""

from __future__ import annotations

import numpy as np
import pytest

from grpo_probe.envs.boat import SimParams
from grpo_probe.envs.expert_competence import (
    ExpertEpisode,
    expert_episodes,
    measure_expert,
    report_lines,
    summarize,
    with_replans,
)
from grpo_probe.envs.registry import boat_env, env_config, make_env

PLANE = "grpo_probe.envs.planes:make_smooth_plane"
PLANE_PARAMS = {"state_perturbation": True, "replans": 3, "chunk_length": 10, "executed_actions": 8}


def _episode(seed: int, *distances_cm: float, contact: int | None = 1) -> ExpertEpisode:
    return ExpertEpisode(seed, tuple(d / 100 for d in distances_cm), contact)


def test_when_an_episode_reaches_and_stays_within_a_radius() -> None:
    episode = _episode(0, 10, 4, 2, 4, 2, 1)
    assert episode.ticks == 5 and episode.distance_at(2) == 0.02 and episode.distance_at(99) == 0.01
    assert episode.first_within(0.03) == 2 and episode.settled_within(0.03) == 4
    assert episode.first_within(0.05) == 1 and episode.settled_within(0.05) == 1
    assert episode.settled_within(0.005) is None and episode.first_within(0.005) is None
    assert _episode(1, 1, 1).settled_within(0.02) == 0
    assert episode.held_distance(2) == pytest.approx(0.04) and episode.held_distance(9) == pytest.approx(0.1)
    assert episode.held_within(0.04, 2) == 1 and episode.held_within(0.03, 2) == 4  # to the end: 2 ticks left
    assert episode.held_within(0.015, 2) == 5 and episode.held_within(0.005, 2) is None


def _summary(episodes: list[ExpertEpisode], **overrides: object) -> object:
    options: dict[str, object] = {
        "noise": 0.0,
        "run_key": 0,
        "executed_actions": 5,
        "horizon_replans": 8,
        "registered_replans": 2,
        "registered_radius_m": 0.05,
    }
    return summarize(episodes, **{**options, **overrides})


def test_the_suggestions_follow_the_expert_at_its_90th_percentile() -> None:
    """Ten seeds that come 1.0 to 1.9 cm from the goal: the radius is twice the 90th percentile (1.9 cm),
    rounded up to half centimetres (4 cm); seed i is within it from tick 10 + i, so the episode is
    1.25 x 19 ticks rounded up to whole replans of 5 (5 replans)."""
    episodes = []
    for i in range(10):
        trace = [20.0] * (10 + i) + [1.0 + i / 10] * (31 - i)
        episodes.append(_episode(i, *trace, contact=3 + i))
    report = _summary(episodes)
    assert report.suggested.radius_m == pytest.approx(0.04)
    assert report.settle_ticks == tuple(10 + i for i in range(10))
    assert report.suggested.replans == 5 and report.suggested.ticks == 25
    assert report.suggested.success == 1.0 and report.registered.success == 0.1  # seed 0 only, at tick 10
    assert report.registered.engagement == 0.8  # seeds 0..7 engaged by tick 10
    assert report.registered.mean_progress_cm == pytest.approx(1.9)
    assert report.suggested.mean_progress_cm == pytest.approx(np.mean([20 - 1 - i / 10 for i in range(10)]))
    assert report.notes == ()
    found = report.to_dict()
    assert found["ticks"]["settle"] == {"median": 15, "p90": 19, "seeds": 10, "of": 10}
    assert found["per_seed"][3] == {
        "seed": 3,
        "spawn_cm": pytest.approx(20.0),
        "held_cm": pytest.approx(1.3),
        "final_cm": pytest.approx(1.3),
        "reach_tick": 13,
        "hold_tick": 13,
        "settle_tick": 13,
        "first_contact_tick": 6,
    }
    table = "\n".join(report_lines(report))
    assert "| episode | 2 replans x 5 = 10 ticks | 5 replans x 5 = 25 ticks |" in table
    assert "| success radius | 5 cm | 4 cm |" in table
    assert "- within 4 cm for 4 replans from: 15, 19 (10 of 10 seeds)" in table
    assert "- within 4 cm from then on to the end: 15, 19 (10 of 10 seeds)" in table


def test_an_expert_that_stays_too_far_keeps_the_radius_and_one_that_never_arrives_the_horizon() -> None:
    far = [_episode(i, 10, 8, 6, 6) for i in range(5)]  # never held nearer than 10 cm for 4 ticks
    report = _summary(far, horizon_replans=3, executed_actions=1, registered_radius_m=0.02)
    assert report.suggested.radius_m == 0.02 and report.suggested.replans == 3
    assert "holds the object no nearer the goal than 10.00 cm" in report.notes[0]
    assert "registered radius is kept" in report.notes[0]
    assert "is held within 2 cm on only 0 of 5 seeds in 3 replans" in report.notes[1]
    short = [_episode(0, 10, 0.5), _episode(1, 10)]  # one episode ended at spawn
    notes = _summary(short, horizon_replans=1, executed_actions=1).notes
    assert any("ended before the horizon" in n for n in notes)


def test_the_radius_is_one_the_expert_holds_and_a_report_says_when_it_leaves_again() -> None:
    """An expert that passes through the goal, or reaches it and pushes the object on, is measured where
    it holds the object for four replans (here 4 ticks): 1 cm, so a radius of 2 cm; the episode is
    1.25 x the 90th-percentile tick it is held from (8), 10 ticks."""
    held = [20.0] * 8 + [1.0] * 12  # within 1 cm from tick 8 to the end
    passing = [20.0] * 4 + [1.0] + [15.0] * 15  # through the goal at tick 4, never held
    leaving = [20.0] * 4 + [1.0] * 5 + [15.0] * 11  # held from tick 4 to 8, 15 cm away from tick 9
    report = _summary(
        [_episode(i, *held) for i in range(19)] + [_episode(19, *passing)],
        horizon_replans=19,
        executed_actions=1,
    )
    assert report.suggested.radius_m == 0.02 and report.reach_ticks[-2:] == (8, 4)
    assert report.hold_ticks[-2:] == (8, None) and report.settle_ticks[-2:] == (8, None)
    assert report.suggested.replans == 10 and report.suggested.success == 0.95 and report.notes == ()
    away = _summary(
        [_episode(i, *held) for i in range(16)] + [_episode(16 + i, *leaving) for i in range(4)],
        horizon_replans=19,
        executed_actions=1,
    )
    assert away.suggested.replans == 10 and away.suggested.success == 0.8
    assert away.hold_ticks[-1] == 4 and away.settle_ticks[-1] is None
    assert "within 2 cm on 0.80 of seeds: the expert moves it away again" in away.notes[0]


def test_a_longer_episode_keeps_the_chunks_and_an_environment_without_replans_is_named() -> None:
    boat = with_replans(boat_env(SimParams(replans=3)), 9)
    assert boat.params.replans == 9 and boat.params.executed_actions == SimParams().executed_actions
    plane = with_replans(env_config(PLANE, PLANE_PARAMS, "prereg/p.yaml: env"), 7)
    assert plane.params == {**PLANE_PARAMS, "replans": 7}
    fixed = env_config(PLANE, {k: v for k, v in PLANE_PARAMS.items() if k != "replans"}, "prereg/p.yaml: env")
    with pytest.raises(ValueError, match=r"prereg/p.yaml: env.params: .* registers no replans"):
        with_replans(fixed, 7)


def test_the_measurement_at_the_registered_episode_is_the_designs_own_episodes() -> None:
    """The expert is run four times longer; read at the registered episode, its numbers are those of the
    episodes the design itself runs (the same keys, the same environment)."""
    config = env_config(PLANE, PLANE_PARAMS, "env")
    seeds, noise, run_key = range(4), 0.05, 23
    report = measure_expert(config, seeds, noise, run_key)
    assert report.horizon_replans == 12 and report.registered.replans == 3
    rows = [e.row for e in expert_episodes(config, seeds, noise, run_key)]
    assert report.registered.success == np.mean([r["success"] for r in rows])
    assert report.registered.mean_progress_cm == pytest.approx(
        np.mean([r["progress_final_cm"] for r in rows])
    )
    assert report.registered.radius_m == make_env(config).spec.view.target_radius_m
    longer = measure_expert(config, seeds, noise, run_key, replans=5)
    assert longer.horizon_replans == 5 and longer.registered == report.registered


def test_an_environment_that_cannot_run_longer_is_measured_over_its_own_episode() -> None:
    """The plane's params may leave replans out (its default, 3): the expert then runs the registered
    episode, and says so; asking for more replans is refused."""
    fixed = env_config(PLANE, {"state_perturbation": True}, "prereg/p.yaml: env")
    report = measure_expert(fixed, range(2), 0.0, 0)
    assert report.horizon_replans == report.registered.replans == 3
    assert (
        report.notes[0].startswith("prereg/p.yaml: env.params: ") and "its own 3 replans" in report.notes[0]
    )
    with pytest.raises(ValueError, match="registers no replans"):
        measure_expert(fixed, range(2), 0.0, 0, replans=6)
