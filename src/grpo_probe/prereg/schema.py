"""The JSON schemas (package data in ``grpo_probe/prereg/schemas/``) and error messages that name the file
and the field.

Why package data: the workflow validates config and prereg through this module, so the schemas ship with
the package and a non-editable install reads the same files an editable one does; there is one definition
of what a valid design is, and no copy of it in the workflow's folder. The prereg schema is assembled
from two files: the base (``prereg.schema.yaml``, every section but the analysis) and the analysis
fragment (``prereg.analysis.schema.yaml``, whose ``properties`` hold the ``analysis`` and
``decision_rule`` sections, which :mod:`grpo_probe.prereg.rule` also validates on their own).
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError, best_match

from grpo_probe.name_registry import did_you_mean
from grpo_probe.prereg.canonical import canonical_json, read_yaml
from grpo_probe.prereg.vocabulary import interval_bounds, read_names
from grpo_probe.sampling import mode_schema_rules

__all__ = [
    "ANALYSIS_FRAGMENT",
    "CONFIG_SCHEMA",
    "PREREG_SCHEMA",
    "SchemaError",
    "analysis_fragment_path",
    "default_schema_dir",
    "describe",
    "field_path",
    "load_config_schema",
    "load_prereg_schema",
    "schema_errors",
    "validate_against",
    "with_read_vocabulary",
]

PREREG_SCHEMA = "prereg.schema.yaml"
ANALYSIS_FRAGMENT = "prereg.analysis.schema.yaml"
CONFIG_SCHEMA = "config.schema.yaml"

_MAX_REPORTED = 12
_NEAR = 0.7
"""difflib's similarity ratio above which an unknown field is offered the known one as its spelling."""
_MAX_LISTED = 8
"""An unknown field with no near match is told the known fields where there are at most this many."""


class SchemaError(ValueError):
    """A document does not satisfy its schema; the message names the file and each failing field."""


def default_schema_dir() -> Path:
    """The package's ``schemas`` folder, found through :mod:`importlib.resources`.

    Why a path and not a resource handle: error messages name the schema file a reader can open, and the
    package is always installed as files (pip unpacks wheels); a zipped install is refused by name.
    """
    found = resources.files("grpo_probe.prereg").joinpath("schemas")
    if not isinstance(found, Path):
        raise RuntimeError(f"{found}: the schemas must be files on disk (grpo_probe installed as an archive)")
    return found


def _schema_file(schema_dir: str | os.PathLike[str] | None, name: str) -> Path:
    path = Path(schema_dir) if schema_dir is not None else default_schema_dir()
    return path / name


def analysis_fragment_path(schema_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where the analysis schema fragment (analysis and decision_rule sections) lives."""
    return _schema_file(schema_dir, ANALYSIS_FRAGMENT)


def load_prereg_schema(schema_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The base prereg schema with the analysis fragment's ``properties`` (and ``$defs``) merged in, the
    sampling kinds of :mod:`grpo_probe.sampling`'s registry as ``sampling_mode``'s enum, and the reads of
    :mod:`grpo_probe.prereg.vocabulary` as the rule's read names."""
    base_path = _schema_file(schema_dir, PREREG_SCHEMA)
    schema = read_yaml(base_path)
    fragment_path = analysis_fragment_path(schema_dir)
    fragment = read_yaml(fragment_path)
    if not isinstance(fragment, Mapping) or not isinstance(fragment.get("properties"), Mapping):
        raise SchemaError(f"{fragment_path}: must be a JSON-schema object with a 'properties' mapping")
    schema = copy.deepcopy(schema)
    for key, sub in fragment["properties"].items():
        schema["properties"][key] = sub
        if key not in schema["required"]:
            schema["required"].append(key)
    for key, sub in fragment.get("$defs", {}).items():
        if key in schema.setdefault("$defs", {}):
            raise SchemaError(f"{fragment_path}: $defs.{key} is already defined in {base_path}")
        schema["$defs"][key] = sub
    with_read_vocabulary(schema)
    # The sampling kinds and the parameters each requires come from the sampler registry.
    kinds, required, cell_kinds = mode_schema_rules()
    schema["$defs"]["sampling_mode"]["properties"]["kind"]["enum"] = kinds
    schema["$defs"]["sampling_mode"]["allOf"] = required
    schema["$defs"]["cell_kind"]["enum"] = cell_kinds
    return schema


def with_read_vocabulary(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (the prereg schema or the analysis fragment) with the read names a rule may use filled
    in from :mod:`grpo_probe.prereg.vocabulary`, in place: the reads and the ends of their intervals."""
    defs = schema.get("$defs", {})
    if "rule_fixed_read_name" in defs:
        defs["rule_fixed_read_name"]["enum"] = list(read_names())
    if "rule_interval_bound" in defs:
        defs["rule_interval_bound"]["enum"] = list(interval_bounds())
    return schema


def load_config_schema(schema_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The run-config schema."""
    return read_yaml(_schema_file(schema_dir, CONFIG_SCHEMA))


def _item_ids(items: Sequence[Any]) -> list[str | None]:
    """Per item of a list, its ``id`` where every item that has one has a distinct string id."""
    ids = [item.get("id") if isinstance(item, Mapping) else None for item in items]
    named = [i for i in ids if i is not None]
    if not named or not all(isinstance(i, str) for i in named) or len(set(named)) != len(named):
        return [None] * len(items)
    return ids


def field_path(parts: Iterable[Any], document: Any = None) -> str:
    """``("cells", 1, "arm")`` -> ``"cells[1].arm"``; the empty path is ``"(top level)"``.

    With ``document`` (what the path points into), an item of a list whose items carry distinct string
    ``id`` fields is named by its id: ``"cells[c3_teacher_ode].arm"``. Why: the reader finds a cell by its
    id in the file, not by counting entries.
    """
    out = ""
    node = document
    for part in parts:
        if isinstance(part, int):
            name: Any = part
            if isinstance(node, Sequence) and not isinstance(node, str) and 0 <= part < len(node):
                name = _item_ids(node)[part] or part
                node = node[part]
            else:
                node = None
            out += f"[{name}]"
        else:
            out += f".{part}" if out else str(part)
            node = node.get(part) if isinstance(node, Mapping) else None
    return out or "(top level)"


def _unexpected(error: ValidationError) -> str | None:
    """An unknown field's message with the nearest field the schema has (``difflib``), or None for
    errors of other kinds.

    Why: a misspelt field is the commonest mistake in a hand-edited design or config, and jsonschema's
    "Additional properties are not allowed ('group_sise' was unexpected)" leaves the reader to find the
    right spelling in the schema.
    """
    if error.validator != "additionalProperties" or not isinstance(error.instance, Mapping):
        return None
    known = [str(k) for k in error.schema.get("properties", {})]
    if not known:
        return None
    parts = []
    for key in error.instance:
        if key in known:
            continue
        near = difflib.get_close_matches(str(key), known, n=1, cutoff=_NEAR)
        if near:
            parts.append(f"{key!r} was unexpected; did you mean {near[0]!r}?")
        elif len(known) <= _MAX_LISTED:
            parts.append(f"{key!r} was unexpected; the fields here are {', '.join(sorted(known))}")
        else:
            parts.append(f"{key!r} was unexpected")
    return "; ".join(parts) or None


def _message(error: ValidationError) -> str:
    """The error's message: an unknown field with its nearest known one (:func:`_unexpected`), a value
    outside an enum of names (a sampling kind, a read) with the closest name (``did you mean``, as a
    registry words an unknown name), else jsonschema's own."""
    unexpected = _unexpected(error)
    if unexpected is not None:
        return unexpected
    if error.validator == "enum":
        return error.message + _closest_name(error, [error])
    return error.message


def _closest_name(error: ValidationError, errors: Iterable[ValidationError]) -> str:
    """``"; did you mean 'x'?"`` where ``error``'s value is a string close to a name of an enum among
    ``errors`` (itself, or the alternatives of a oneOf/anyOf: a read is a declared name or a guard's rate
    pattern), else ``""``."""
    if not isinstance(error.instance, str):
        return ""
    names = [v for e in errors if e.validator == "enum" for v in e.validator_value if isinstance(v, str)]
    return did_you_mean(error.instance, names)


def _alternatives(error: ValidationError) -> str:
    """Why a oneOf/anyOf failed: the errors of the one alternative whose discriminating const/enum matched."""
    branches: dict[Any, list[ValidationError]] = {}
    for sub in error.context or []:
        branches.setdefault(sub.schema_path[0], []).append(sub)
    matching = [errs for errs in branches.values() if not any(e.validator in ("const", "enum") for e in errs)]
    if len(matching) == 1:
        chosen = matching[0]
    elif not matching:  # no alternative's discriminator matched: say what each one expects
        chosen = [e for errs in branches.values() for e in errs if e.validator in ("const", "enum")]
    else:
        chosen = [best_match(error.context)]
    parts = []
    for e in chosen:
        where = field_path(e.relative_path, error.instance) if e.relative_path else ""
        message = _unexpected(e) or e.message  # a near name is offered once, after the alternatives
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(dict.fromkeys(parts))


def describe(error: ValidationError, document: Any) -> str:
    """``"<field path>: <problem>"`` for one violation found in ``document``: list items named by their
    ids, an unknown field with the nearest known one, a failed oneOf/anyOf with why its alternative failed."""
    message = _message(error)
    if error.context:
        message = f"{message} ({_alternatives(error)}){_closest_name(error, error.context)}"
    return f"{field_path(error.absolute_path, document)}: {message}"


def schema_errors(
    document: Any, schema: Mapping[str, Any], *, shipped: bool = False
) -> list[ValidationError]:
    """Every violation of ``schema`` in ``document``, in a stable order (by field path, then message)."""
    validator = _validator(canonical_json(schema).decode("utf-8"), shipped)
    return sorted(validator.iter_errors(document), key=lambda e: (list(map(str, e.absolute_path)), e.message))


@functools.lru_cache(maxsize=16)
def _validator(schema_json: str, shipped: bool) -> Any:
    """A validator for one schema, by its canonical JSON; a schema from outside the package is first
    checked against its metaschema.

    Why the package's own are not checked here: they are code, not input. Checking a schema against the
    2020-12 metaschema costs more than validating a design with it (a fresh process loaded a design in
    0.15 CPU-s with the check, 0.04 without: benchmarks/design_read_cost.py), and every job and every
    Snakemake start loads one; tests/prereg/test_schemas.py checks each schema the package ships, with
    the sampler registry's rules merged in, instead.
    Why cached: one process validates with the same few schemas many times (the design, each registered
    version's analysis sections, the config).
    """
    schema = json.loads(schema_json)
    validator_cls = jsonschema.validators.validator_for(schema)
    if not shipped:
        validator_cls.check_schema(schema)
    return validator_cls(schema)


def validate_against(document: Any, schema: Mapping[str, Any], where: str, *, shipped: bool = False) -> None:
    """Raise :class:`SchemaError` listing every violation as ``"<where>: <field path>: <problem>"``.

    ``shipped``: ``schema`` is one the package ships (read from its default schema folder), which the
    test suite checks against its metaschema; any other schema is checked here before it is used.
    """
    errors = schema_errors(document, schema, shipped=shipped)
    if not errors:
        return
    lines = [f"{where}: {describe(e, document)}" for e in errors[:_MAX_REPORTED]]
    if len(errors) > _MAX_REPORTED:
        lines.append(f"{where}: ... and {len(errors) - _MAX_REPORTED} more")
    raise SchemaError("\n".join(lines))
