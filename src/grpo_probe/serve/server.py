"""Serve an object with the act() contract over a WebSocket, one act() call at a time.

Why a server of its own: a lab's policy often needs its own Python, torch or CUDA, which cannot live in
the probe's environment. The probe's rollout workers each open a connection to this server and send
each replan's batch; the server calls ``policy.act`` with the batch exactly as sent (same rows, same
order, same keys) and returns what it computed, bytes unchanged, so a policy that keeps the contract in
process keeps it over the wire, and the probe's oracles check that it does.

Calls are serialised by a lock: connections are served on threads, but one ``act`` runs at a time, so
a policy need not be thread-safe and its arithmetic never shares the device with another call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from grpo_probe.serve import wire
from grpo_probe.serve.checkpoint import checkpoint_sha256
from grpo_probe.serve.contract import RowKey, SamplingMode
from grpo_probe.serve.link import LinkServer, serve_until_interrupted

__all__ = ["PolicyServer", "parse_address", "serve_policy"]


def parse_address(address: str) -> tuple[str, int]:
    """``ws://host:port`` as (host, port); a ``ValueError`` saying what is wrong otherwise."""
    parts = urlsplit(address)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "ws" or not parts.hostname or port is None or parts.path not in ("", "/"):
        raise ValueError(
            f"policy server address {address!r}: expected ws://HOST:PORT (e.g. ws://0.0.0.0:8765)"
        )
    return parts.hostname, port


class PolicyServer(LinkServer):
    """Serve ``policy`` (``head``, ``obs_dim``, ``act(obs, keys, mode)``; optionally ``input_keys`` and
    ``capabilities``) at ``host:port``; port 0 picks a free port (:attr:`address` says which).

    ``row_key`` and ``sampling_mode`` build each request's keys and mode from their fields: by default
    this package's numpy-only :class:`~grpo_probe.serve.contract.RowKey` and
    :class:`~grpo_probe.serve.contract.SamplingMode`; a policy written for the probe's own types (its
    reference heads) is given ``grpo_probe.policies.RowKey`` and ``SamplingMode`` here, which is what
    ``grpo-probe serve`` does. ``metadata`` (JSON-like values) is sent in every hello: the probe records
    it where the arm is bound, and checks ``checkpoint_sha256`` there against a design that pins one.
    ``checkpoint`` (the file or folder the policy was loaded from) adds ``checkpoint`` and its
    ``checkpoint_sha256`` (:func:`~grpo_probe.serve.checkpoint.checkpoint_sha256`) to the metadata: the
    arm's binding records that sha256, and every later connection of the run must declare the same, so a
    different checkpoint restarted behind the address is refused at connect.
    """

    def __init__(
        self,
        policy: Any,
        host: str = "127.0.0.1",
        port: int = 8765,
        *,
        metadata: Mapping[str, Any] | None = None,
        checkpoint: str | os.PathLike[str] | None = None,
        row_key: Callable[..., Any] = RowKey,
        sampling_mode: Callable[..., Any] = SamplingMode,
    ) -> None:
        for name in ("head", "obs_dim", "act"):
            if not hasattr(policy, name):
                raise ValueError(
                    f"cannot serve {type(policy).__name__}: it has no {name!r} (the act() contract)"
                )
        self.policy = policy
        self._row_key = row_key
        self._sampling_mode = sampling_mode
        self._lock = threading.Lock()
        metadata = dict(metadata or {})
        if checkpoint is not None:
            metadata.update(checkpoint=str(checkpoint), checkpoint_sha256=checkpoint_sha256(checkpoint))
        super().__init__(wire.packb(wire.hello(policy, metadata)), host, port)

    _failed = "act() failed"

    def _reply(self, session: Any, request: Any) -> dict[str, Any]:
        """The policy's output for one act request; what goes wrong, an output field that cannot be sent
        included, is replied as the policy's error (the connection stays open, so a mode the policy
        refuses does not end the client's session)."""
        obs, keys, mode = wire.read_act_request(request)
        row_keys = [self._row_key(**k) for k in keys]
        sampling_mode = self._sampling_mode(**mode)
        with self._lock:
            output = self.policy.act(obs, row_keys, sampling_mode)
        return wire.act_reply(output)


def serve_policy(
    policy: Any,
    address: str = "ws://127.0.0.1:8765",
    *,
    metadata: Mapping[str, Any] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    row_key: Callable[..., Any] = RowKey,
    sampling_mode: Callable[..., Any] = SamplingMode,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``policy`` at ``address`` (``ws://HOST:PORT``; port 0: a free one) until interrupted.

    ``checkpoint``: the file or folder the policy was loaded from, declared with its sha256 in the hello
    (:class:`PolicyServer`). ``ready`` is called with the address once the server listens (the default
    prints it, flushed, so a script that starts the server can read where it is).
    """
    host, port = parse_address(address)
    server = PolicyServer(
        policy,
        host,
        port,
        metadata=metadata,
        checkpoint=checkpoint,
        row_key=row_key,
        sampling_mode=sampling_mode,
    )
    serve_until_interrupted(server, ready or _print_ready)


def _print_ready(address: str) -> None:
    print(f"serving policy at {address}", flush=True)
