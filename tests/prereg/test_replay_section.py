"""The ``replay:`` section: what the smoke design registers, and the designs refused before anything runs.

Why: the perturbations' kind and size change every chaos read, so they are registered and locked like
the cells, and a design that cannot be replayed as registered (an unregistered seed, one replay per
draw, a spawn shift the environment does not offer) must be refused with its file and field named, not
discovered after the draws are spent. A user's environment is only known once it is built, so its
refusal comes from the prereg_check step, which builds it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from envs import chaos_envs
from grpo_probe.envs.registry import boat_env, env_config, env_spec
from grpo_probe.prereg import PreregError, environment_problems, load_prereg, lock_prereg
from grpo_probe.prereg.replay import Perturbation, ReplaySection
from grpo_probe.prereg.schema import SchemaError
from grpo_probe.probe_jobs.prepare import prereg_check

from .design_edits import edited, load_error

REPO = Path(__file__).resolve().parents[2]
ACTION = {"kind": "action", "std": 1.0e-3}
STATE = {"kind": "state", "scale_m": 1.0e-4}
ADAPTER = "grpo_probe.envs.gym_adapter:make_gymnasium_env"
REACHER = {
    "gym_id": "Reacher-v5",
    "replans": 2,
    "chunk_length": 50,
    "executed_actions": 5,
    "object_body": "fingertip",
    "goal_body": "target",
    "success_radius_m": 0.01,
}
"""Reacher-v5 through the Gymnasium adapter, as tests/envs/test_gymnasium.py builds it (no perturb_joints)."""


def test_the_smoke_design_registers_two_replays_of_every_draw() -> None:
    prereg = load_prereg(REPO / "prereg" / "smoke.yaml")
    replay = prereg.replay
    assert isinstance(replay, ReplaySection)
    assert replay.seeds == prereg.seeds == (1000, 1001)  # seeds: all
    assert replay.perturbations == (Perturbation("action", 1e-3), Perturbation("state", 1e-4))
    assert (replay.replays_per_draw, replay.replays) == (1, 2)
    assert replay.needs_state and replay.divergence_m == 1e-3 and replay.oracle_seeds == (1000,)
    assert replay.to_dict()["perturbations"] == [ACTION, STATE]


def test_a_design_without_a_replay_section_registers_no_replays(tmp_path: Path) -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw.pop("replay")
        raw["amendments"] = []  # the section is then simply not registered (no amendment added it)
        signal = raw["decision_rule"]["criteria"]["signal"]
        signal["all_of"] = [
            {"read": "median_group_std_progress_cm", "op": ">=", "threshold": {"analysis": "signal_bar_cm"}}
        ]

    assert load_prereg(edited(tmp_path, "smoke.yaml", edit), require_lock=False).replay is None


# -- cross-field problems and the schema ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda r: r["replay"].update(seeds=[1000, 5]),
            "smoke.yaml: replay.seeds: [5] are not registered seeds",
        ),
        (
            lambda r: r["replay"].update(seeds=[1000], oracle={"seeds": [1001]}),
            "smoke.yaml: replay.oracle.seeds: [1001] are not replayed seeds (replay.seeds)",
        ),
        (
            lambda r: r["replay"].update(replays_per_draw=1, perturbations=[ACTION]),
            "smoke.yaml: replay.replays_per_draw: 1 replay(s) under 1 perturbation(s) give 1 replay of "
            "each draw; the within-draw variance needs at least 2",
        ),
    ],
    ids=["unregistered-seed", "oracle-outside-replayed", "one-replay-per-draw"],
)
def test_a_replay_section_that_breaks_a_cross_field_rule_names_the_file_and_field(
    tmp_path: Path, edit: Any, message: str
) -> None:
    assert message in load_error(edited(tmp_path, "smoke.yaml", edit), PreregError)


def test_two_replays_of_one_perturbation_are_enough(tmp_path: Path) -> None:
    path = edited(
        tmp_path, "smoke.yaml", lambda r: r["replay"].update(replays_per_draw=2, perturbations=[ACTION])
    )
    replay = load_prereg(path, require_lock=False).replay
    assert replay is not None and replay.replays == 2 and not replay.needs_state


@pytest.mark.parametrize(
    ("perturbation", "problem"),
    [
        ({"kind": "action", "std": -1.0e-3}, "std: -0.001 is less than or equal to the minimum of 0"),
        ({"kind": "action", "std": 0}, "std: 0 is less than or equal to the minimum of 0"),
        ({"kind": "state", "scale_m": 0.0}, "scale_m: 0.0 is less than or equal to the minimum of 0"),
        ({"kind": "gravity", "std": 1.0e-3}, "kind: 'action' was expected; kind: 'state' was expected"),
    ],
    ids=["negative-std", "zero-std", "zero-scale", "unknown-kind"],
)
def test_a_perturbation_the_schema_refuses_names_the_file_and_field(
    tmp_path: Path, perturbation: dict[str, Any], problem: str
) -> None:
    path = edited(tmp_path, "smoke.yaml", lambda r: r["replay"]["perturbations"].insert(1, perturbation))
    message = load_error(path, SchemaError)
    assert f"smoke.yaml: replay.perturbations[1]: {perturbation!r} is not valid" in message
    assert problem in message


# -- THE REFUSAL: a spawn shift the environment does not offer -----------------------------------------
def _reacher_design(tmp_path: Path, **params: Any) -> Path:
    """The smoke design on Reacher-v5 through the adapter's factory, locked as a fresh registration.

    Reacher records no boat guards and has no phase 2, so those reads and the section go; the smoke
    amendments (which rebuild the boat design's history) are dropped with them.
    """

    def edit(raw: dict[str, Any]) -> None:
        raw.pop("sim")
        raw.pop("phase2")
        raw["env"] = {"id": ADAPTER, "params": {**REACHER, **params}}
        raw["decision_rule"]["arm_choice"]["rank_by"][1] = {"read": "sampled_away_tail_rate", "prefer": "min"}
        raw["amendments"] = []
        assert raw["replay"]["perturbations"] == [ACTION, STATE]

    tmp_path.mkdir(parents=True, exist_ok=True)
    path = edited(tmp_path, "smoke.yaml", edit)
    lock_prereg(path)
    return path


def test_prereg_check_refuses_a_state_perturbation_on_a_users_env_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the manifest root
    path = _reacher_design(tmp_path)
    prereg = load_prereg(path)  # the design alone cannot know: the factory is built by prereg_check
    spec = env_spec(prereg.env)
    assert prereg.env.id == ADAPTER and spec.state_perturbation is None
    manifest = tmp_path / "prereg_check.manifest.json"
    with pytest.raises(PreregError) as refused:
        prereg_check(path, manifest)
    message = str(refused.value)
    assert message.startswith(f"{path}: replay.perturbations[1].kind: 'state' asks environment ")
    assert f"environment {spec.id!r} to shift its spawn, which it does not offer" in message
    assert "register kind: action" in message
    assert "perturbations[0]" not in message  # the action perturbation is any environment's
    assert not manifest.exists()


def test_the_same_design_with_perturb_joints_passes_prereg_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = _reacher_design(tmp_path, perturb_joints=["target_x", "target_y"])
    prereg = load_prereg(path)
    assert env_spec(prereg.env).state_perturbation == "joint(s) target_x, target_y shifted at spawn"
    prereg_check(path, tmp_path / "prereg_check.manifest.json")
    assert (tmp_path / "prereg_check.manifest.json").is_file()


@functools.cache
def _rule():  # -> DecisionRule
    return load_prereg(REPO / "prereg" / "smoke.yaml", require_lock=False).decision_rule


def _section(*perturbations: Perturbation) -> ReplaySection:
    return ReplaySection(1, (1000, 1001), perturbations, 1e-3, (1000,))


def test_environment_problems_name_each_state_perturbation_an_env_cannot_apply() -> None:
    config = env_config(chaos_envs.factory_name(chaos_envs.make_luck_plane), {})
    spec = env_spec(config)
    assert spec.state_perturbation is None
    action, state = Perturbation("action", 1e-3), Perturbation("state", 1e-4)
    rule = _rule()  # its reads (engagement, reset strikes) are beside the point: filtered out below

    def replay_problems(replay: ReplaySection | None) -> list[str]:
        return [p for p in environment_problems(rule, False, spec, replay) if p.startswith("replay.")]

    assert replay_problems(_section(state, action, state)) == [
        f"replay.perturbations[{i}].kind: 'state' asks environment {spec.id!r} to shift its spawn, which it "
        "does not offer (no perturb_state: its spec.state_perturbation is None); register kind: action, "
        "which the engine applies in any environment"
        for i in (0, 2)
    ]
    assert replay_problems(_section(action)) == []
    assert replay_problems(None) == []


ENVS_WITH_STATE = {
    "boat": boat_env,
    "pusher": lambda: load_prereg(REPO / "prereg/designs/smoke/pusher_smoke.yaml", require_lock=False).env,
    "smooth-plane": lambda: env_config(
        chaos_envs.factory_name(chaos_envs.make_smooth_plane), {"state_perturbation": True}
    ),
}


@pytest.mark.parametrize("make_config", ENVS_WITH_STATE.values(), ids=ENVS_WITH_STATE.keys())
def test_an_env_offering_a_state_perturbation_has_no_replay_problem(make_config: Any) -> None:
    spec = env_spec(make_config())
    assert spec.state_perturbation
    problems = environment_problems(
        _rule(), False, spec, _section(Perturbation("action", 1e-3), Perturbation("state", 1e-4))
    )
    assert not [p for p in problems if p.startswith("replay.")]
