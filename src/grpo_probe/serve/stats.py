"""The server's own CPU seconds, asked for by a ``stats`` request: the part of a run's compute that is
spent in the lab's process, not in the probe's jobs.

Why: a served policy (or a served simulator) computes in a process Snakemake's benchmarks never see, so
compute.md would count only the probe's side of every ``act``. Both servers answer ``{"type": "stats"}``
with the CPU seconds their process has used since it started (all its threads, torch's included), its
pid and when it started; the workflow reads that when it binds the server and again when it writes
compute.md, and counts the difference as the server's own line. The request is optional on both
protocols (``grpo-probe-policy/1``, ``grpo-probe-env/1``): a server from before it answers with an
error reply, which :func:`fetch_server_stats` reads as "not measured", and an older client never asks.
"""

from __future__ import annotations

import inspect
import math
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from grpo_probe.serve import wire

__all__ = ["STATS_REQUEST", "ServerStats", "fetch_server_stats", "is_stats_request", "stats_reply"]

STATS_REQUEST: dict[str, str] = {"type": "stats"}
"""What a client sends to ask a server for its CPU seconds."""

_STARTED = time.time()
"""When this process imported the server (seconds since the epoch): with the pid, which process answered."""


@dataclass(frozen=True)
class ServerStats:
    """What a server said of its process: CPU seconds since it started, its pid and its start time."""

    cpu_s: float
    pid: int
    started: float

    def as_dict(self) -> dict[str, Any]:
        """The reading as plain data (what a manifest records)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str) -> ServerStats:
        """A reading from a stats reply or a manifest; a ``ValueError`` naming ``where`` and the field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: a server's stats are a map, got {type(data).__name__}")
        values = {}
        for name, kind in (("cpu_s", float), ("pid", int), ("started", float)):
            value = data.get(name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{where}.{name} must be a finite number, got {value!r}")
            if value < 0 or (kind is int and value != int(value)):
                raise ValueError(f"{where}.{name} must be a non-negative {kind.__name__}, got {value!r}")
            values[name] = kind(value)
        return cls(**values)

    def same_process(self, other: ServerStats) -> bool:
        """Whether ``other`` was read from the same server process (no restart in between)."""
        return self.pid == other.pid and self.started == other.started


def is_stats_request(message: Any) -> bool:
    """Whether a decoded request asks for the server's stats."""
    return isinstance(message, Mapping) and message.get("type") == "stats"


def stats_reply() -> dict[str, Any]:
    """The reply to a stats request: this process's CPU seconds (all threads), pid and start time."""
    return {"type": "stats", "cpu_s": time.process_time(), "pid": os.getpid(), "started": _STARTED}


def fetch_server_stats(address: str, timeout_s: float = 30.0) -> ServerStats | None:
    """Ask the server at ``address`` (a policy or an environment server) for its stats over a connection
    of its own; None when it predates the request (it answers with an error). A server that cannot be
    reached, or answers outside the protocol, is a ``ConnectionError`` naming the address."""
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    direct: dict[str, Any] = {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}
    where = f"server {address}"
    try:
        connection = connect(
            address, open_timeout=timeout_s, close_timeout=min(timeout_s, 10.0), max_size=None, **direct
        )
        try:
            connection.recv(timeout=timeout_s)  # the hello: whoever answers, its process is what we read
            connection.send(wire.packb(STATS_REQUEST))
            data = connection.recv(timeout=timeout_s)
        finally:
            connection.close()
    except (OSError, TimeoutError, WebSocketException) as exc:
        raise ConnectionError(f"{where}: no stats ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, bytes):
        raise ConnectionError(f"{where}: the stats reply came as a text frame")
    try:
        reply = wire.unpackb(data)
    except wire.ProtocolError as exc:
        raise ConnectionError(f"{where}: {exc}") from None
    if isinstance(reply, Mapping) and "error" in reply:
        return None  # a server from before the stats request
    try:
        return ServerStats.from_dict(reply, f"{where}: the stats reply")
    except ValueError as exc:
        raise ConnectionError(str(exc)) from None
