"""The design names its environment (``env: {id, params}``); what the rule reads must exist there.

Why: a design that reads a guard its environment never records would be decided on a column of nulls
(or crash after the compute is spent). The boat designs, registered before ``env:`` existed, keep their
bytes and their locks: their ``sim:`` section names the boat scene.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.registry import EnvConfig, env_spec
from grpo_probe.prereg import load_prereg
from grpo_probe.probe_jobs.prepare import prereg_check

from .design_edits import edited, load_error

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["grpo_signal_probe.yaml", "smoke.yaml"])
def test_a_boat_design_names_the_boat_scene_by_its_sim_section(name: str) -> None:
    prereg = load_prereg(REPO / "prereg" / name)  # its lock still matches: no amendment was needed
    assert prereg.env == EnvConfig("boat_push", prereg.sim)
    assert isinstance(prereg.sim, SimParams)


@pytest.mark.parametrize("name", ["designs/probes/pusher_probe.yaml", "designs/smoke/pusher_smoke.yaml"])
def test_the_pusher_designs_are_locked_and_typed(name: str) -> None:
    prereg = load_prereg(REPO / "prereg" / name)
    spec = env_spec(prereg.env)
    assert prereg.sim is None and prereg.env.id == "pusher"
    assert (spec.action_dims, spec.obs_dim) == (7, 23)
    assert spec.guard_names == ("joint_limit", "off_table", "away_tail", "swat")


def test_the_pusher_probe_registers_the_memos_cells() -> None:
    prereg = load_prereg(REPO / "prereg/designs/probes/pusher_probe.yaml")
    modes = [(c.arm, c.mode.kind, c.mode.temperature, c.mode.sde_a) for c in prereg.enabled_cells]
    assert modes == [
        ("ar", "temperature", 1.0, None),
        ("ar", "temperature", 1.6, None),
        ("flow_teacher", "flow_ode", None, None),
        ("flow_teacher", "flow_sde", None, 0.5),
    ]
    assert len(prereg.seeds) == 15 and prereg.group_size == 8


def test_a_rule_reading_a_guard_the_environment_lacks_names_the_field(tmp_path: Path) -> None:
    def edit(raw: dict) -> None:
        raw["decision_rule"]["arm_choice"]["rank_by"][1] = {
            "read": "sampled_reset_strike_rate",
            "prefer": "min",
        }

    message = load_error(edited(tmp_path, "designs/smoke/pusher_smoke.yaml", edit))
    assert (
        "pusher_smoke.yaml: decision_rule.arm_choice.rank_by[1].read: 'sampled_reset_strike_rate' reads "
        "guard 'reset_strike', which environment 'pusher' does not define (its guards: joint_limit, "
        "off_table, away_tail, swat)"
    ) in message


def test_a_guard_read_of_the_boat_is_valid_for_the_boat_only(tmp_path: Path) -> None:
    def edit(raw: dict) -> None:
        raw["decision_rule"]["criteria"]["competence"]["all_of"].append(
            {"read": "sampled_joint_limit_rate", "op": "<=", "threshold": 0.5}
        )

    message = load_error(edited(tmp_path, "smoke.yaml", edit))
    assert "decision_rule.criteria.competence.all_of[1].read: 'sampled_joint_limit_rate'" in message
    assert "environment 'boat_push' does not define" in message


def test_a_design_names_its_environment_once(tmp_path: Path) -> None:
    both = edited(
        tmp_path, "smoke.yaml", lambda raw: raw.update(env={"id": "boat_push", "params": raw["sim"]})
    )
    assert "env, sim: a design names its environment once" in load_error(both)
    neither = edited(tmp_path, "smoke.yaml", lambda raw: raw.pop("sim"))
    assert "smoke.yaml: env: missing" in load_error(neither)


def test_the_boat_named_by_env_reads_the_same_numbers(tmp_path: Path) -> None:
    def edit(raw: dict) -> None:
        raw["env"] = {"id": "boat_push", "params": raw.pop("sim")}

    prereg = load_prereg(edited(tmp_path, "smoke.yaml", edit), require_lock=False)
    assert prereg.env == load_prereg(REPO / "prereg/smoke.yaml").env


def test_an_invalid_env_param_names_the_file_and_field(tmp_path: Path) -> None:
    path = edited(
        tmp_path, "designs/smoke/pusher_smoke.yaml", lambda raw: raw["env"]["params"].update(replans=0)
    )
    assert "pusher_smoke.yaml: env.params.replans must be a positive integer, got 0" in load_error(path)


def test_prereg_check_builds_a_users_environment_and_names_an_unimportable_factory(tmp_path: Path) -> None:
    def edit(raw: dict) -> None:
        raw["env"] = {"id": "no_such_lab.sims:make_env", "params": {}}
        raw.pop("sim")

    path = edited(tmp_path, "smoke.yaml", edit)
    from grpo_probe.prereg import lock_prereg

    lock_prereg(path)
    with pytest.raises(ValueError, match=r"smoke\.yaml: env\.id: cannot import module 'no_such_lab\.sims'"):
        prereg_check(path, tmp_path / "check.manifest.json")
    assert not (tmp_path / "check.manifest.json").exists()
