"""A new design made from another: its name and task changed, the fields its expert's measurement suggests
written in, and no history.

Why: a lab that wanted another task of a served suite (MetaWorld's drawer-open-v3 beside the shipped
push-v3) copied a design's YAML by hand, changed ``name`` and ``gym_id``, guessed the episode length and
the success radius, and had to remember to clear the copied amendments. ``grpo-probe design new`` does
each of those steps from the source design and a measurement of the new task's expert
(:mod:`grpo_probe.envs.expert_competence`); this module holds the steps that touch the design itself:

- :func:`start_from` the source's mapping as read from its file (``extends:`` kept, not merged), renamed,
  its task changed (``env.params.gym_id``, and that id in its description), with ``amendments: []``;
- :func:`episode_field` and :func:`radius_field` where the environment registers its episode's replans
  and its success radius (``env.params.replans``, ``sim.replans``; ``env.params.success_radius_m``,
  ``sim.disk_radius_m``), and :func:`set_field` to write a measured value there;
- :func:`design_text` the YAML a design file holds, under a comment that says how it was made.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from grpo_probe.envs.registry import EnvConfig, is_builtin

__all__ = ["design_text", "episode_field", "radius_field", "set_field", "start_from"]

FieldPath = tuple[str, ...]
"""A field of a design as the keys that lead to it: ``("env", "params", "replans")``."""

_ADAPTER_FACTORIES = ("grpo_probe.envs.gym_adapter:make_gymnasium_env", "grpo_probe.envs.served:served_env")
"""Environments whose params are the Gymnasium adapter's (a served one included): they register a
``success_radius_m`` whether the design writes it or leaves the default."""


def start_from(raw: Mapping[str, Any], source: str, name: str, task: str | None) -> dict[str, Any]:
    """The design ``raw`` (read from ``source``) as a new design named ``name``: no amendments, and with
    ``task`` its ``env.params.gym_id`` (the old id replaced in ``description`` too). A ``ValueError``
    names ``source`` and the field when the design names no task to change."""
    design = copy.deepcopy(dict(raw))
    design["name"] = name
    design["amendments"] = []
    if task is None:
        return design
    params = design.get("env", {}).get("params") if isinstance(design.get("env"), Mapping) else None
    if not isinstance(params, dict) or not isinstance(params.get("gym_id"), str):
        where = "sim" if "sim" in design else "env.params"
        raise ValueError(
            f"{source}: {where}: the design names no task (env.params.gym_id) for --task to change; its "
            "environment is chosen by env.id"
        )
    old = params["gym_id"]
    params["gym_id"] = task
    if isinstance(design.get("description"), str):
        design["description"] = design["description"].replace(old, task)
    return design


def _params_fields(config: EnvConfig) -> tuple[str, ...]:
    """The params an environment takes whether the design writes them or not (a built-in's typed
    params, the adapter's ``success_radius_m``); a user's factory: only those the design writes."""
    if is_builtin(config.id):
        return tuple(f.name for f in dataclasses.fields(config.params))
    if config.id in _ADAPTER_FACTORIES:
        return ("replans", "success_radius_m")
    return ()


def episode_field(raw: Mapping[str, Any], config: EnvConfig) -> FieldPath | None:
    """Where the design registers its episode's replans; None when its environment takes none."""
    if "sim" in raw:
        return ("sim", "replans")
    params = raw["env"].get("params", {})
    known = "replans" in params or "replans" in _params_fields(config)
    return ("env", "params", "replans") if known else None


def radius_field(raw: Mapping[str, Any], config: EnvConfig) -> FieldPath | None:
    """Where the design registers its success radius; None when its environment takes none (the planes
    fix theirs)."""
    if "sim" in raw:
        return ("sim", "disk_radius_m")
    params = raw["env"].get("params", {})
    known = _params_fields(config)
    for name in ("success_radius_m", "disk_radius_m"):
        if name in params or name in known:
            return ("env", "params", name)
    return None


def set_field(design: dict[str, Any], path: FieldPath, value: Any) -> Any:
    """Set ``path`` of ``design`` to ``value``; the value it held (None when it was not written)."""
    *parents, last = path
    node = design
    for key in parents:
        node = node[key]
    before = node.get(last)
    node[last] = value
    return before


def design_text(design: Mapping[str, Any], header: Sequence[str]) -> str:
    """The YAML of ``design`` in its fields' order (small mappings and lists on one line, as the shipped
    designs write them), under ``header`` as comment lines."""
    body = yaml.safe_dump(
        dict(design), sort_keys=False, default_flow_style=None, width=110, allow_unicode=True
    )
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header)
    return comments + body
