"""The CPU seconds of the servers a run talks to (a served policy, a served simulator), for compute.md.

Why: a served arm's policy and a served environment's simulator compute in the lab's processes, which
Snakemake's benchmark files never see. Each server reports its process's CPU seconds on request
(:mod:`grpo_probe.serve.stats`); the step that binds it (``bind_server`` for an arm, ``prereg_check``
for the design's environment) records a reading in its manifest (``extra.server_cpu``), and compute.md
reads the server again and counts the difference as the server's own line. That is the server's CPU
from binding to the report: a server shared with other clients in that time counts their calls too,
and one that restarted (another pid or start time) counts only since its restart, which the line says.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_probe.serve.stats import ServerStats, fetch_server_stats

__all__ = ["ServerCompute", "read_server_bindings", "server_compute", "server_reading"]

Fetch = Callable[[str, float], "ServerStats | None"]


def server_reading(role: str, address: str, timeout_s: float | None = None) -> dict[str, Any]:
    """What a binding step records (``extra.server_cpu``): the server's role, address and a stats
    reading, or why there is none (an older server, or one that did not answer the stats request)."""
    record: dict[str, Any] = {"role": role, "address": address, "timeout_s": timeout_s}
    try:
        stats = fetch_server_stats(address, 30.0 if timeout_s is None else float(timeout_s))
    except ConnectionError as exc:
        return {**record, "stats": None, "why": str(exc)}
    if stats is None:
        return {**record, "stats": None, "why": f"the server at {address} answers no stats request"}
    return {**record, "stats": stats.as_dict(), "why": None}


def read_server_bindings(results_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every ``extra.server_cpu`` record of the manifests under ``results_dir``, by role (a role bound
    twice keeps its latest file's record); a malformed record is a ``ValueError`` naming its manifest."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(results_dir).rglob("*.manifest.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8")).get("extra", {}).get("server_cpu")
        except (json.JSONDecodeError, AttributeError) as exc:
            raise ValueError(f"{path}: not a readable manifest ({exc})") from None
        if record is None:
            continue
        where = f"{path}: extra.server_cpu"
        if not isinstance(record, dict) or not all(
            isinstance(record.get(k), str) for k in ("role", "address")
        ):
            raise ValueError(f"{where} must be a map with a role and an address, got {record!r}")
        if record.get("stats") is not None:
            ServerStats.from_dict(record["stats"], f"{where}.stats")
        found[record["role"]] = {**record, "manifest": str(path)}
    return [found[role] for role in sorted(found)]


@dataclass(frozen=True)
class ServerCompute:
    """One server's line of compute.md: CPU seconds from its binding to the report, or why not measured."""

    role: str
    address: str
    cpu_s: float | None
    note: str
    """Empty, or what the number means beyond the plain difference (a restart), or why it is missing."""


def server_compute(bindings: list[dict[str, Any]], fetch: Fetch = fetch_server_stats) -> list[ServerCompute]:
    """Each bound server's CPU seconds since its binding: read again now, minus the binding's reading."""
    lines = []
    for record in bindings:
        role, address = record["role"], record["address"]
        timeout_s = 30.0 if record.get("timeout_s") is None else float(record["timeout_s"])
        try:
            now = fetch(address, timeout_s)
        except ConnectionError as exc:
            lines.append(ServerCompute(role, address, None, f"not measured: {exc}"))
            continue
        if now is None:
            lines.append(
                ServerCompute(role, address, None, "not measured: the server answers no stats request")
            )
            continue
        if record.get("stats") is None:
            note = f"since the server started (no reading when it was bound: {record.get('why')})"
            lines.append(ServerCompute(role, address, now.cpu_s, note))
            continue
        then = ServerStats.from_dict(record["stats"], f"{record['manifest']}: extra.server_cpu.stats")
        if not now.same_process(then):
            note = (
                f"since the server restarted (pid {now.pid}; it was pid {then.pid} when bound): a lower bound"
            )
            lines.append(ServerCompute(role, address, now.cpu_s, note))
            continue
        lines.append(ServerCompute(role, address, max(now.cpu_s - then.cpu_s, 0.0), ""))
    return lines
