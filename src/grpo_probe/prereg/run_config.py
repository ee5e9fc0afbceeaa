"""Run settings (``config/config.yaml``): where and how a registered design runs, never what it measures.

Why separate from the prereg: workers, device and the checkpoint each arm is bound to may differ between
a workstation, a cluster and an auditor's machine without touching the registered design or its lock.
What a binding may not do is point at an arm the design does not register, or (when the prereg pins a
checkpoint sha256) at different bytes; the first is checked here, the second where the checkpoint is read.

Snakemake merges run settings from three places (the workflow's ``configfile:``, each ``--configfile``,
then ``--config``) and only the merged mapping reaches the workflow; a wrong value is reported here with
the place it came from, so ``--config workers=abc`` is named as such rather than as the shipped file.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema.exceptions import ValidationError

from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.design import Prereg
from grpo_probe.prereg.schema import (
    SchemaError,
    describe,
    load_config_schema,
    schema_errors,
    validate_against,
)

__all__ = [
    "WORKFLOW_CONFIG",
    "ArmBinding",
    "ConfigSource",
    "RunConfig",
    "arm_bindings",
    "binding_origins",
    "command_sources",
    "config_sources",
    "load_config",
    "merged_values",
]

WORKFLOW_CONFIG = Path("config/config.yaml")
"""The workflow's own run config (its ``configfile:``), relative to the folder a command runs in."""


@dataclass(frozen=True)
class ArmBinding:
    """Which policy an arm runs: the workflow's reference checkpoint (``source`` ``reference``), a user file
    and adapter (``checkpoint``), or a policy served at ``address`` (``server``)."""

    arm: str
    source: str
    path: str | None = None
    adapter: str | None = None
    address: str | None = None
    timeout_s: float | None = None


@dataclass(frozen=True)
class RunConfig:
    """A validated run config with schema defaults filled in."""

    prereg: Path
    workers: int
    seeds_per_shard: int
    device: str
    results: Path
    arms: dict[str, ArmBinding]
    raw: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class ConfigSource:
    """One place run settings came from, as an error names it, with the values it set.

    ``name`` is ``"config/config.yaml"`` (the workflow's own file), ``"--configfile PATH"`` or
    ``"--config"``; sources are listed in Snakemake's merge order, so a later one wins.
    """

    name: str
    values: Mapping[str, Any]


def _read_mapping(path: str | os.PathLike[str]) -> dict[str, Any]:
    values = read_yaml(path)
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ValueError(f"{path}: a config must be a YAML mapping, got {type(values).__name__}")
    return values


def config_sources(
    workflow_files: Iterable[str | os.PathLike[str]],
    cli_files: Iterable[str | os.PathLike[str]],
    cli_config: Mapping[str, Any],
) -> list[ConfigSource]:
    """The sources of a Snakemake run's config in merge order: the workflow's ``configfile:`` files,
    each ``--configfile``, then the ``--config`` values (Snakemake 9: ``workflow.configfiles``,
    ``workflow.overwrite_configfiles`` and ``workflow.config_settings.config``)."""
    cli = [Path(f).absolute() for f in cli_files]
    own = [f for f in workflow_files if Path(f).absolute() not in cli]
    sources = [ConfigSource(str(f), _read_mapping(f)) for f in own]
    sources += [ConfigSource(f"--configfile {f}", _read_mapping(f)) for f in cli]
    if cli_config:
        sources.append(ConfigSource("--config", copy.deepcopy(dict(cli_config))))
    return sources


def command_sources(cli_files: Iterable[str | os.PathLike[str]], prereg: str) -> list[ConfigSource]:
    """The sources of the run a command outside the workflow stands for: :data:`WORKFLOW_CONFIG` where
    there is one, each of its ``--configfile`` files, then ``prereg`` as a ``--config`` value.

    Why one function: ``check-policy`` and ``prereg check`` each read the arms' bindings as a Snakemake
    run of the same design would see them, and they must agree on which files that run merges.
    """
    shipped = [str(WORKFLOW_CONFIG)] if WORKFLOW_CONFIG.is_file() else []
    return config_sources(shipped, cli_files, {"prereg": prereg})


def merged_values(sources: Sequence[ConfigSource]) -> dict[str, Any]:
    """The config Snakemake would hand the workflow: each source's values merged over the ones before
    (a mapping key by key, anything else replaced), for a command that reads a run config outside it."""

    def merge(into: dict[str, Any], values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            if isinstance(value, Mapping) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = copy.deepcopy(value)

    merged: dict[str, Any] = {}
    for source in sources:
        merge(merged, source.values)
    return merged


def binding_origins(sources: Sequence[ConfigSource]) -> dict[str, str]:
    """Per arm a source binds, the last source that set its binding (what a message about it names)."""
    origins: dict[str, str] = {}
    for source in sources:
        arms = source.values.get("arms")
        if isinstance(arms, Mapping):
            origins.update((arm, source.name) for arm in arms)
    return origins


def _sets(values: Mapping[str, Any], path: Sequence[Any]) -> bool:
    """Whether a source's values hold the field at ``path`` (or a mapping above it that replaces it)."""
    node: Any = values
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def _origin(error: ValidationError, sources: Sequence[ConfigSource]) -> str:
    """The last source that set the field an error is about; for an unknown key, the one that added it."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        known = error.schema.get("properties", {})
        path += [key for key in error.instance if key not in known][:1]
    while path:
        for source in reversed(sources):
            if _sets(source.values, path):
                return source.name
        path.pop()
    return sources[-1].name


def _validate_sources(
    values: Mapping[str, Any], schema: Mapping[str, Any], sources: Sequence[ConfigSource], shipped: bool
) -> None:
    """Validate the merged values; each error line names the source that set the field, not "config"."""
    errors = schema_errors(values, schema, shipped=shipped)
    if errors:
        raise SchemaError("\n".join(f"{_origin(e, sources)}: {describe(e, values)}" for e in errors))


def _fill_defaults(values: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(values)
    for key, sub in schema["properties"].items():
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
    return out


def load_config(
    path_or_dict: str | os.PathLike[str] | Mapping[str, Any],
    schema_dir: str | os.PathLike[str] | None = None,
    *,
    sources: Sequence[ConfigSource] = (),
) -> RunConfig:
    """Validate a run config (a YAML file or an already-parsed mapping, e.g. Snakemake's ``config``).

    ``sources``: where a merged mapping came from (:func:`config_sources`); an error then names the
    source that set the wrong field instead of "config".
    """
    if isinstance(path_or_dict, Mapping):
        where, values = "config", dict(path_or_dict)
    else:
        where, values = str(path_or_dict), _read_mapping(path_or_dict)
    schema = load_config_schema(schema_dir)
    if sources:
        _validate_sources(values, schema, sources, shipped=schema_dir is None)
    else:
        validate_against(values, schema, where, shipped=schema_dir is None)
    values = _fill_defaults(values, schema)
    return RunConfig(
        prereg=Path(values["prereg"]),
        workers=values["workers"],
        seeds_per_shard=values["seeds_per_shard"],
        device=values["device"],
        results=Path(values["results"]),
        arms={
            arm: ArmBinding(arm, b["source"], b.get("path"), b.get("adapter"), b.get("address"), _timeout(b))
            for arm, b in values["arms"].items()
        },
        raw=values,
    )


def _timeout(binding: Mapping[str, Any]) -> float | None:
    """A server binding's reply timeout; None where not given (the client's default, which the schema
    states) and for other bindings."""
    value = binding.get("timeout_s")
    return None if value is None else float(value)


def arm_bindings(config: RunConfig, prereg: Prereg) -> dict[str, ArmBinding]:
    """The binding of every registered arm (reference where config is silent), in registered arm order.

    A checkpoint or server binding of an arm the design does not register is an error; a ``reference`` binding
    of one is the default anyway and is ignored, so the shipped config (which names the registered
    probe's arms) runs designs whose arms have other ids, such as the camera-fed designs.
    """
    unknown = [arm for arm, b in config.arms.items() if arm not in prereg.arms and b.source != "reference"]
    if unknown:
        raise ValueError(
            f"config: arms.{unknown[0]}: {unknown[0]!r} is not one of the arms of {prereg.path} "
            f"({', '.join(prereg.arms)})"
        )
    return {arm: config.arms.get(arm, ArmBinding(arm, "reference")) for arm in prereg.arms}
