"""The schemas the package ships are valid against their metaschema, so the workflow need not check them.

Why here and not at run time: every job and every Snakemake start validates its design and config, and
checking a schema against the 2020-12 metaschema costs more than the validation itself. A schema from
outside the package (a ``schema_dir`` of your own) is still checked before it is used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from grpo_probe.prereg import schema as schemas
from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.rule import analysis_schema
from grpo_probe.prereg.run_config import load_config
from grpo_probe.study.design import study_schema

SHIPPED = {
    # the prereg schema as the workflow uses it: base and analysis fragment merged, with the sampler
    # registry's kinds and required parameters written in
    "prereg": schemas.load_prereg_schema,
    "analysis": analysis_schema,
    "config": schemas.load_config_schema,
    "study": study_schema,
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_each_shipped_schema_is_valid_against_its_metaschema(name: str) -> None:
    schema = SHIPPED[name]()
    validator = jsonschema.validators.validator_for(schema, default=None)
    assert validator is jsonschema.Draft202012Validator, f"{name}: $schema names {schema.get('$schema')}"
    validator.check_schema(schema)


def _broken(schema: dict[str, Any]) -> dict[str, Any]:
    """The config schema with a property whose ``type`` is no JSON type."""
    schema["properties"]["workers"]["type"] = "integr"
    return schema


def test_a_schema_from_outside_the_package_is_checked_before_use(tmp_path: Path) -> None:
    for file in schemas.default_schema_dir().iterdir():
        (tmp_path / file.name).write_bytes(file.read_bytes())
    broken = _broken(read_yaml(tmp_path / schemas.CONFIG_SCHEMA))
    (tmp_path / schemas.CONFIG_SCHEMA).write_text(json.dumps(broken))
    with pytest.raises(jsonschema.SchemaError, match="integr"):
        load_config({"prereg": "prereg/smoke.yaml"}, schema_dir=tmp_path)
