"""The registered designs validate; schema and cross-field violations name the file and the field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.prereg import PreregError, SchemaError, load_prereg, split_seeds
from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.schema import PREREG_SCHEMA, default_schema_dir, load_prereg_schema
from grpo_probe.sampling import SamplingMode

from .design_edits import edited, load_error

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ["prereg/grpo_signal_probe.yaml", "prereg/smoke.yaml"]


def _edited_smoke(tmp_path: Path, edit) -> Path:
    """A copy of the smoke design with ``edit(raw)`` applied (not locked: these tests are about validity)."""
    return edited(tmp_path, "smoke.yaml", edit)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_prereg_validates_and_matches_its_lock(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    prereg = load_prereg(name)
    assert prereg.lock_date is not None
    assert read_yaml(REPO / (name + ".lock"))["sha256"] == prereg.sha256


def test_registered_probe_is_the_memo_design() -> None:
    """Memo section 4: 15 seeds x K = 8; cells AR T=1.0, AR T=1.6, two flow ODE arms, optional SDE a=0.5."""
    prereg = load_prereg(REPO / "prereg/grpo_signal_probe.yaml")
    assert len(prereg.seeds) == 15 and len(set(prereg.seeds)) == 15
    assert prereg.group_size == 8
    assert prereg.sim == SimParams()
    modes = [
        (c.arm, c.mode.kind, c.mode.temperature, c.mode.sde_a, c.optional, c.enabled) for c in prereg.cells
    ]
    assert modes == [
        ("ar", "temperature", 1.0, None, False, True),
        ("ar", "temperature", 1.6, None, False, True),
        ("flow_teacher", "flow_ode", None, None, False, True),
        ("flow_short", "flow_ode", None, None, False, True),
        ("flow_teacher", "flow_sde", None, 0.5, True, True),
    ]
    assert prereg.analysis.signal_bar_cm == 0.25
    assert {a: arm.anchor.kind for a, arm in prereg.arms.items()} == {
        "ar": "greedy",
        "flow_teacher": "flow_ode",
        "flow_short": "flow_ode",
    }


@pytest.mark.parametrize("name", SHIPPED)
def test_every_registered_mode_is_a_valid_sampling_mode(name: str) -> None:
    prereg = load_prereg(REPO / name)
    for mode in [c.mode for c in prereg.cells] + list(prereg.oracles.parallel.modes):
        assert SamplingMode(**vars(mode)).kind == mode.kind


def test_sim_schema_lists_every_simparams_field_with_its_default() -> None:
    sim = load_prereg_schema()["properties"]["sim"]
    fields = {f.name for f in dataclasses.fields(SimParams)}
    assert set(sim["properties"]) == fields
    assert set(sim["required"]) == fields
    defaults = SimParams().to_dict()
    assert {k: v["default"] for k, v in sim["properties"].items()} == defaults


def _walk_properties(schema: object, at: str):
    if isinstance(schema, dict):
        for key, sub in schema.get("properties", {}).items():
            yield f"{at}.{key}", sub
        for key, sub in schema.items():
            if key != "if":  # an `if` clause selects by value; it declares no key
                yield from _walk_properties(sub, f"{at}.{key}")
    elif isinstance(schema, list):
        for i, sub in enumerate(schema):
            yield from _walk_properties(sub, f"{at}[{i}]")


@pytest.mark.parametrize("schema_file", [PREREG_SCHEMA, "config.schema.yaml"])
def test_every_schema_key_has_a_type_and_a_description(schema_file: str) -> None:
    schema = read_yaml(default_schema_dir() / schema_file)
    typed = {"type", "$ref", "enum", "const", "oneOf", "allOf", "anyOf"}
    for at, sub in _walk_properties(schema, schema_file):
        assert "description" in sub, f"{at} has no description"
        assert typed & set(sub), f"{at} has no type"


def test_missing_cell_field_names_file_and_field(tmp_path: Path) -> None:
    path = _edited_smoke(tmp_path, lambda raw: raw["cells"][1].pop("arm"))
    assert f"{path}: cells[c3_teacher_ode]: 'arm' is a required property" in load_error(path, SchemaError)


def test_group_size_zero_names_file_and_field(tmp_path: Path) -> None:
    path = _edited_smoke(tmp_path, lambda raw: raw.update(group_size=0))
    assert f"{path}: group_size: 0 is less than the minimum of 1" in load_error(path, SchemaError)


def test_unknown_arm_names_file_field_and_the_arms(tmp_path: Path) -> None:
    path = _edited_smoke(tmp_path, lambda raw: raw["cells"][1].update(arm="nope"))
    message = load_error(path, PreregError)
    expected = "cells[c3_teacher_ode].arm: 'nope' is not one of the arms (ar, flow_teacher, flow_short)"
    assert f"{path}: {expected}" in message


def test_mode_that_does_not_fit_the_arm_head_is_refused(tmp_path: Path) -> None:
    path = _edited_smoke(tmp_path, lambda raw: raw["cells"][0].update(arm="flow_teacher"))
    message = load_error(path, PreregError)
    assert f"{path}: cells[c1_ar_t1_0].mode.kind: 'temperature' samples the ar head" in message


def test_duplicate_cell_id_is_refused(tmp_path: Path) -> None:
    path = _edited_smoke(tmp_path, lambda raw: raw["cells"][1].update(id=raw["cells"][0]["id"]))
    assert f"{path}: cells[1].id: 'c1_ar_t1_0' is already the id of cells[0]" in load_error(path, PreregError)


def test_temperature_without_value_is_refused(tmp_path: Path) -> None:
    path = _edited_smoke(tmp_path, lambda raw: raw["cells"][0]["mode"].pop("temperature"))
    message = load_error(path, SchemaError)
    assert f"{path}: cells[c1_ar_t1_0].mode: 'temperature' is a required property" in message


def test_oracle_subset_outside_registered_seeds_and_arms_is_refused(tmp_path: Path) -> None:
    def edit(raw: dict) -> None:
        raw["oracles"]["parallel"]["seeds"] = [1000, 5]
        raw["oracles"]["parallel"]["arms"] = ["ar", "ghost"]
        raw["oracles"]["draw0"]["seeds"] = [77]

    path = _edited_smoke(tmp_path, edit)
    message = load_error(path, PreregError)
    assert f"{path}: oracles.parallel.seeds[1]: seed 5 is not one of the registered seeds" in message
    assert f"{path}: oracles.parallel.arms[1]: 'ghost' is not one of the arms" in message
    assert f"{path}: oracles.draw0.seeds[0]: seed 77 is not one of the registered seeds" in message


def test_demo_seeds_overlapping_probe_seeds_are_refused(tmp_path: Path) -> None:
    path = _edited_smoke(
        tmp_path, lambda raw: raw["training"]["demos"].update(seeds={"first": 998, "count": 3})
    )
    assert f"{path}: training.demos.seeds: overlaps the probe's seeds (1000)" in load_error(path, PreregError)


def test_sim_cross_field_rule_names_file_and_field(tmp_path: Path) -> None:
    path = _edited_smoke(tmp_path, lambda raw: raw["sim"].update(executed_actions=60))
    assert f"{path}: sim.executed_actions (60) must not exceed sim.chunk_length (50)" in load_error(
        path, PreregError
    )


def test_duplicate_yaml_key_is_refused_naming_file(tmp_path: Path) -> None:
    text = (
        (REPO / "prereg/smoke.yaml").read_text().replace("group_size: 2\n", "group_size: 2\ngroup_size: 3\n")
    )
    path = tmp_path / "smoke.yaml"
    path.write_text(text)
    message = load_error(path)
    assert str(path) in message and "duplicate key 'group_size'" in message


def test_duplicate_seed_is_refused_naming_both_positions(tmp_path: Path) -> None:
    path = _edited_smoke(tmp_path, lambda raw: raw.update(seeds=[1001, 1000, 1001]))
    assert f"{path}: seeds[2]: seed 1001 is registered twice (first at seeds[0])" in load_error(
        path, PreregError
    )


def test_seeds_in_any_order_are_kept_in_that_order(tmp_path: Path) -> None:
    def edit(raw: dict) -> None:
        raw["seeds"] = [1001, 1000]

    path = _edited_smoke(tmp_path, edit)
    assert load_prereg(path, require_lock=False).seeds == (1001, 1000)


def test_anchor_sampler_must_fit_the_head_and_be_deterministic(tmp_path: Path) -> None:
    def edit(raw: dict) -> None:
        raw["arms"]["ar"]["anchor"] = {"kind": "flow_ode", "steps": 10}
        raw["arms"]["flow_short"]["anchor"] = {"kind": "flow_sde", "sde_a": 0.5, "steps": 10}

    path = _edited_smoke(tmp_path, edit)
    message = load_error(path, PreregError)
    assert (
        f"{path}: arms.ar.anchor.kind: 'flow_ode' samples the flow head, but the arm's head is 'ar'"
        in message
    )
    assert f"{path}: arms.flow_short.anchor.kind: an anchor is deterministic; 'flow_sde' is not" in message


def test_flow_ode_cell_must_match_its_arms_anchor(tmp_path: Path) -> None:
    path = _edited_smoke(tmp_path, lambda raw: raw["cells"][1]["mode"].update(steps=5))
    message = load_error(path, PreregError)
    assert (
        f"{path}: cells[c3_teacher_ode].mode: the draw-0 oracle compares draw 0 of a flow_ode cell" in message
    )


def test_split_seeds_is_by_position_in_the_registered_order() -> None:
    assert split_seeds((1004, 1000, 1003, 1001, 1002), 2) == [(1004, 1000), (1003, 1001), (1002,)]
    with pytest.raises(ValueError, match="seeds_per_shard must be an integer >= 1"):
        split_seeds((1, 2), 0)
