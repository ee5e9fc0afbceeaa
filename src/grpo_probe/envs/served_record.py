"""Which simulator a run with a served environment is held to, at every connection to its server.

Why: a simulator served from its own environment can be restarted between two jobs of a run, or in the
middle of one, and a restart may bring another version (a MuJoCo upgraded in its venv, an edited scene).
The rows would then mix two simulators while every manifest only showed a changed version string. So a
connection is refused, naming what differs and both values, when its hello is not

- the one the design pins (``env.sha256``), where it pins one;
- the one this results folder recorded (``prereg/served_env.json``: the prereg check, the first job of a
  run, writes the hello it read there; every later job of the workflow declares the file as an input,
  and :func:`hold_to_record` makes every connection of that job and of its rollout workers compare);
- the first one this process read from the same address (a reconnection after a server restart).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grpo_probe.atomic_io import atomic_write_json

__all__ = [
    "RECORD_NAME",
    "RECORD_VARIABLE",
    "first_hello",
    "hold_to_record",
    "key_packages",
    "refusal",
    "write_record",
]

RECORD_NAME = "served_env.json"
"""The record's file name, in the results folder's ``prereg/`` beside the prereg check's manifest."""
RECORD_VARIABLE = "GRPO_PROBE_SERVED_ENV_RECORD"
"""The process environment variable that names a job's record: rollout workers inherit it."""
COMPARED = ("sha256", "protocol", "factory", "scene", "python", "packages")
"""The hello's fields a record holds and a connection is compared on (the sha256 covers the rest)."""

_FIRST: dict[str, dict[str, Any]] = {}
"""The first hello this process read from each address."""


def first_hello(address: str) -> dict[str, Any] | None:
    """The first hello this process accepted from ``address`` (None: it has not connected there)."""
    return _FIRST.get(address)


def hold_to_record(path: str | os.PathLike[str]) -> None:
    """Hold every later connection of this process and of the processes it starts to the record at
    ``path`` (a job's declared input)."""
    os.environ[RECORD_VARIABLE] = str(Path(path).resolve())


def write_record(path: str | os.PathLike[str], address: str, hello: Mapping[str, Any]) -> None:
    """Record ``hello`` (read from ``address``) as the results folder's simulator, atomically."""
    atomic_write_json(path, {"address": address, "hello": {name: hello[name] for name in COMPARED}})


def key_packages(hello: Mapping[str, Any]) -> str:
    """The simulator's packages worth naming in a version: the factory's, the simulators this project
    serves (MetaWorld; gym-aloha and the dm_control it runs MuJoCo through), MuJoCo, Gymnasium, NumPy."""
    packages = hello["packages"]
    top = str(hello["factory"]).partition(":")[0].split(".")[0].replace("_", "-")
    named = (top, "metaworld", "gym-aloha", "dm-control", "mujoco", "gymnasium", "numpy")
    names = [n for n in dict.fromkeys(named) if n in packages]
    return ", ".join(f"{n} {packages[n]}" for n in names) or "no packages named"


def _differences(was: Mapping[str, Any], now: Mapping[str, Any], limit: int = 8) -> list[str]:
    """Each compared field that differs, ``field was -> now``; packages one by one (``packages.NAME``)."""
    found = [
        f"{name} {was.get(name)} -> {now.get(name)}"
        for name in COMPARED
        if name != "packages" and was.get(name) != now.get(name)
    ]
    before, after = was.get("packages") or {}, now.get("packages") or {}
    names = sorted(set(before) | set(after))
    found += [
        f"packages.{n} {before.get(n, '-')} -> {after.get(n, '-')}"
        for n in names
        if before.get(n) != after.get(n)
    ][:limit]
    return found


def _read_record(path: str) -> dict[str, Any]:
    """The recorded hello; a ``ValueError`` naming the file and the field that is missing or malformed."""
    try:
        raw = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ValueError(
            f"{path}: the served simulator's record is missing (the prereg check writes it; rerun it)"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable JSON record ({exc})") from None
    hello = raw.get("hello") if isinstance(raw, dict) else None
    if not isinstance(hello, dict):
        raise ValueError(f"{path}: field 'hello' must be the map of the server's hello")
    missing = [name for name in COMPARED if name not in hello]
    if missing:
        raise ValueError(f"{path}: field hello.{missing[0]} is missing")
    return hello


def refusal(where: str, address: str, hello: Mapping[str, Any], pinned: str | None) -> str | None:
    """Why a connection whose hello is ``hello`` must be refused, naming ``where`` (the server), each
    differing field and both values; None to accept it (the process then remembers it, if it is the
    first from ``address``)."""
    digest = hello["sha256"]
    if pinned is not None and digest != pinned:
        return (
            f"{where}: the server's simulator has sha256 {digest}, the design pins {pinned} "
            f"(env.sha256); refused: it serves {hello['factory']} with {key_packages(hello)}"
        )
    record = os.environ.get(RECORD_VARIABLE)
    if record:
        try:
            recorded = _read_record(record)
        except ValueError as exc:
            return f"{where}: {exc}"
        if recorded["sha256"] != digest:
            return (
                f"{where}: the server's simulator is not the one {record} records for this results "
                f"folder (recorded -> now: {'; '.join(_differences(recorded, hello))}); refused: a run must "
                "not change its environment (serve the recorded simulator again, or delete the record to "
                "rerun the prereg check and every job after it on the new one)"
            )
    first = _FIRST.get(address)
    if first is not None and first["sha256"] != digest:
        changed = [d for d in _differences(first, hello) if not d.startswith("sha256 ")]
        return (
            f"{where}: the server now serves another simulator (sha256 {digest}, was {first['sha256']}; "
            f"{'; '.join(changed) or 'its source changed'}); refused: a run must not change its environment"
        )
    _FIRST.setdefault(address, dict(hello))
    return None
