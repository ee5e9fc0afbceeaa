"""A newcomer's mistakes in a design or config: a misspelt field is offered the right spelling, a cell is
named by its id, and a design that fails its checks is not told to write an amendment."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from grpo_probe.prereg import PreregError, SchemaError
from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.run_config import load_config
from grpo_probe.prereg.run_design import load_run_design
from grpo_probe.prereg.schema import field_path

from .design_edits import edited, load_error

REPO = Path(__file__).resolve().parents[2]


def _rename(raw: dict, old: str, new: str) -> None:
    raw[new] = raw.pop(old)


def test_a_misspelt_top_level_field_is_offered_the_field_it_resembles(tmp_path: Path) -> None:
    path = edited(tmp_path, "smoke.yaml", lambda raw: _rename(raw, "group_size", "group_sise"))
    lines = load_error(path, SchemaError).splitlines()
    assert f"{path}: (top level): 'group_sise' was unexpected; did you mean 'group_size'?" in lines


def test_a_misspelt_field_of_a_cell_names_the_cell_by_its_id(tmp_path: Path) -> None:
    path = edited(tmp_path, "smoke.yaml", lambda raw: _rename(raw["cells"][1], "arm", "arme"))
    lines = load_error(path, SchemaError).splitlines()
    cell = read_yaml(REPO / "prereg/smoke.yaml")["cells"][1]["id"]
    assert f"{path}: cells[{cell}]: 'arme' was unexpected; did you mean 'arm'?" in lines
    assert f"{path}: cells[{cell}]: 'arm' is a required property" in lines


def test_a_field_like_none_the_schema_knows_is_not_given_a_guess(tmp_path: Path) -> None:
    path = edited(tmp_path, "smoke.yaml", lambda raw: raw.update(zzz_unrelated=1))
    message = load_error(path, SchemaError)
    assert f"{path}: (top level): 'zzz_unrelated' was unexpected" in message
    assert "did you mean" not in message


def test_a_misspelt_name_from_a_registry_is_offered_the_name_it_resembles(tmp_path: Path) -> None:
    """A sampling kind or a read is checked by the schema's enum of the registered names; a near miss
    is worded as the registry words one."""
    path = edited(tmp_path, "smoke.yaml", lambda raw: raw["cells"][1]["mode"].update(kind="flow_sd"))
    message = load_error(path, SchemaError)
    assert "'flow_sd' is not one of" in message and "did you mean 'flow_sde'?" in message

    def misspell(raw: dict) -> None:
        next(iter(raw["decision_rule"]["criteria"].values()))["all_of"][0]["read"] = (
            "median_group_std_progres_cm"
        )

    message = load_error(edited(tmp_path, "smoke.yaml", misspell), SchemaError)
    assert message.endswith("; did you mean 'median_group_std_progress_cm'?")


def test_a_misspelt_config_key_is_offered_the_key_it_resembles() -> None:
    raw = read_yaml(REPO / "config/config.yaml") | {"wrokers": 2}
    with pytest.raises(SchemaError, match=r"'wrokers' was unexpected; did you mean 'workers'\?"):
        load_config(raw)
    raw = read_yaml(REPO / "config/config.yaml") | {"arms": {"ar": {"sorce": "reference"}}}
    with pytest.raises(SchemaError, match=r"arms\.ar: .*'sorce' was unexpected; did you mean 'source'\?"):
        load_config(raw)


def test_list_items_are_named_by_id_only_where_the_ids_tell_them_apart() -> None:
    doc = {
        "cells": [{"id": "a", "mode": {}}, {"id": "b"}],
        "seeds": [{"first": 0}],
        "twins": [{"id": "x"}] * 2,
    }
    assert field_path(("cells", 1, "mode"), doc) == "cells[b].mode"
    assert field_path(("seeds", 0, "first"), doc) == "seeds[0].first"  # no ids
    assert field_path(("twins", 1), doc) == "twins[1]"  # two items share an id
    assert field_path(("cells", 1, "mode")) == "cells[1].mode"  # no document: positions
    assert field_path(()) == "(top level)"


def test_a_cell_whose_id_is_shared_is_named_by_its_position(tmp_path: Path) -> None:
    path = edited(tmp_path, "smoke.yaml", lambda raw: raw["cells"][1].update(id=raw["cells"][0]["id"]))
    assert f"{path}: cells[1].id: 'c1_ar_t1_0' is already the id of cells[0]" in load_error(path, PreregError)


@pytest.fixture
def designs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """prereg/ holding the smoke design and its lock; the working directory above it."""
    folder = tmp_path / "prereg"
    folder.mkdir()
    for name in ("smoke.yaml", "smoke.yaml.lock"):
        shutil.copy(REPO / "prereg" / name, folder / name)
    monkeypatch.chdir(tmp_path)
    return folder


def _problems(path: str) -> list[str]:
    with pytest.raises(PreregError) as raised:
        load_run_design(path, "results")
    return str(raised.value).splitlines()[1:]


def test_a_locked_design_with_a_typo_is_told_to_fix_it_not_to_amend_it(designs: Path) -> None:
    raw = read_yaml(designs / "smoke.yaml")
    _rename(raw, "group_size", "group_sise")
    (designs / "smoke.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    problems = _problems("prereg/smoke.yaml")
    assert any("did you mean 'group_size'?" in p for p in problems), problems
    (mismatch,) = [p for p in problems if "does not match its lock" in p]
    assert "changed sections: group_sise, group_size" in mismatch
    assert "amend" not in mismatch and "fix those first" in mismatch


def test_a_valid_change_to_a_locked_design_is_told_how_to_amend(designs: Path) -> None:
    raw = read_yaml(designs / "smoke.yaml")
    raw["group_size"] = 3
    (designs / "smoke.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    (mismatch,) = _problems("prereg/smoke.yaml")
    assert "changed sections: group_size" in mismatch and "changes only by amendment" in mismatch


def test_a_lock_copied_with_its_design_says_to_lock_the_copy(designs: Path) -> None:
    raw = read_yaml(designs / "smoke.yaml") | {"name": "mine"}
    (designs / "mine.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    shutil.copy(designs / "smoke.yaml.lock", designs / "mine.yaml.lock")
    (problem,) = _problems("prereg/mine.yaml")
    assert "locks 'smoke.yaml', not 'mine.yaml'" in problem
    assert "run `grpo-probe prereg lock prereg/mine.yaml`" in problem and "amend" not in problem
