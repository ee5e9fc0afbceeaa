"""Run settings (``config/config.yaml``): where and how a registered design runs, never what it measures.

Why separate from the prereg: workers, device and the checkpoint each arm is bound to may differ between
a workstation, a cluster and an auditor's machine without touching the registered design or its lock.
What a binding may not do is point at an arm the design does not register, or (when the prereg pins a
checkpoint sha256) at different bytes; the first is checked here, the second where the checkpoint is read.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.design import Prereg
from grpo_probe.prereg.schema import load_config_schema, validate_against

__all__ = ["ArmBinding", "RunConfig", "arm_bindings", "load_config"]


@dataclass(frozen=True)
class ArmBinding:
    """Which checkpoint an arm runs: the workflow's reference checkpoint, or a user file and adapter."""

    arm: str
    source: str
    path: str | None = None
    adapter: str | None = None


@dataclass(frozen=True)
class RunConfig:
    """A validated run config with schema defaults filled in."""

    prereg: Path
    workers: int
    device: str
    results: Path
    arms: dict[str, ArmBinding]
    raw: dict[str, Any] = field(repr=False)


def _fill_defaults(values: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(values)
    for key, sub in schema["properties"].items():
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
    return out


def load_config(
    path_or_dict: str | os.PathLike[str] | Mapping[str, Any], schema_dir: str | os.PathLike[str] | None = None
) -> RunConfig:
    """Validate a run config (a YAML file or an already-parsed mapping, e.g. Snakemake's ``config``)."""
    if isinstance(path_or_dict, Mapping):
        where, values = "config", dict(path_or_dict)
    else:
        where, values = str(path_or_dict), read_yaml(path_or_dict)
        if values is None:
            values = {}
        if not isinstance(values, dict):
            raise ValueError(f"{where}: a config must be a YAML mapping, got {type(values).__name__}")
    schema = load_config_schema(schema_dir)
    validate_against(values, schema, where)
    values = _fill_defaults(values, schema)
    return RunConfig(
        prereg=Path(values["prereg"]),
        workers=values["workers"],
        device=values["device"],
        results=Path(values["results"]),
        arms={
            arm: ArmBinding(arm, b["source"], b.get("path"), b.get("adapter"))
            for arm, b in values["arms"].items()
        },
        raw=values,
    )


def arm_bindings(config: RunConfig, prereg: Prereg) -> dict[str, ArmBinding]:
    """The binding of every registered arm (reference where config is silent), in registered arm order."""
    unknown = [arm for arm in config.arms if arm not in prereg.arms]
    if unknown:
        raise ValueError(
            f"config: arms.{unknown[0]}: {unknown[0]!r} is not one of the arms of {prereg.path} "
            f"({', '.join(prereg.arms)})"
        )
    return {arm: config.arms.get(arm, ArmBinding(arm, "reference")) for arm in prereg.arms}
