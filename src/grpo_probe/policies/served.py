"""A policy served by another process: the probe's side of ``arms.<id>: {source: server, address}``.

Why: a lab's policy may need its own Python, torch or CUDA. It runs there behind
:mod:`grpo_probe.serve`, and this client is the :class:`~grpo_probe.policies.protocol.Policy` the
rollout engine calls: each ``act`` sends the batch's observations, each row's key and the sampling mode,
and returns the chunks and diagnostics the server computed, checked against the contract but never
cast, so a served row has the bytes the policy computed. Rows are keyed and independent whichever
process computes them, so the probe's oracles (parallel, draw-0, replay) hold over the wire as in
process, and check that they do.

Every rollout process builds its own client from the arm's picklable
:class:`~grpo_probe.policies.policy_source.PolicySource` and opens its own connection; the server answers
one ``act`` at a time. A refused connection, a reply that does not come within ``timeout_s`` and a
reply that breaks the protocol are each a :class:`ServedPolicyError` naming the address and what
happened; after one, the next ``act`` opens a new connection.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.sync.client import ClientConnection, connect

from grpo_probe.policies.protocol import PolicyCapabilities, PolicyOutput, RowDiagnostics, RowKey
from grpo_probe.sampling import SamplingMode
from grpo_probe.serve import wire

__all__ = ["DEFAULT_TIMEOUT_S", "ServedPolicy", "ServedPolicyError", "ServedPolicyRaised", "check_address"]

DEFAULT_TIMEOUT_S = 120.0
"""Seconds to wait for the server to accept a connection, and for each ``act`` reply (config:
``arms.<id>.timeout_s``): long enough for a large batch on a busy GPU, short enough that a hung server
stops a job within minutes."""


_DIRECT: dict[str, Any] = {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}
"""websockets 17 asks ``connect`` to be a context manager unless ``legacy=True``; a client holds its
connection across ``act`` calls, so it opts in where the flag exists (older versions connect directly)."""


class ServedPolicyError(RuntimeError):
    """The policy server could not be reached, did not answer in time, or answered outside the protocol."""


class ServedPolicyRaised(ServedPolicyError):
    """The served policy's ``act`` raised; the server answered with its error and keeps the connection."""

    def __init__(self, message: str, server_traceback: str) -> None:
        super().__init__(message)
        self.server_traceback = server_traceback
        """The traceback on the server (the server's log has it too)."""


def check_address(address: str) -> str:
    """``ws://HOST:PORT`` as given; a ``ValueError`` saying what a served arm's address must look like."""
    from grpo_probe.serve import parse_address

    parse_address(address)
    return address


class ServedPolicy:
    """The policy served at ``address``; its ``head``, ``obs_dim``, ``input_keys`` and ``capabilities``
    are what the server's hello declares (read when the client connects, on construction)."""

    def __init__(self, address: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.address = check_address(address)
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
            raise ValueError(f"policy server {address}: timeout_s must be a number > 0, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        self._connection: ClientConnection | None = None
        self._hello: dict[str, Any] | None = None
        hello = self._connect()
        self.head: str = hello["head"]
        self.obs_dim: int = hello["obs_dim"]
        self.input_keys: tuple[str, ...] | None = (
            None if hello["input_keys"] is None else tuple(hello["input_keys"])
        )
        self.served_name: str = str(hello.get("name", "?"))
        """The served policy's ``module:Class`` on the server."""
        self.metadata: dict[str, Any] = hello["metadata"]
        """What the server declares beside the policy (e.g. ``checkpoint_sha256``)."""
        declared = hello.get("capabilities")
        try:
            self.capabilities: PolicyCapabilities | None = (
                None if declared is None else PolicyCapabilities.from_dict(declared, "capabilities")
            )
        except ValueError as exc:
            raise ServedPolicyError(f"policy server {self.address}: the hello's {exc}") from None

    def __repr__(self) -> str:
        return f"ServedPolicy({self.address!r}, head={self.head!r}, serving {self.served_name})"

    def _connect(self) -> dict[str, Any]:
        """Open a connection and read the hello; on a reconnection it must declare what the first did."""
        where = f"policy server {self.address}"
        try:
            connection = connect(
                self.address,
                open_timeout=self.timeout_s,
                close_timeout=min(self.timeout_s, 10.0),
                max_size=None,
                compression=None,
                **_DIRECT,
            )
        except ConnectionRefusedError:
            raise ServedPolicyError(
                f"{where}: connection refused: no server listens there (start it with "
                "grpo_probe.serve, or `grpo-probe serve` for a checkpoint, and check the address)"
            ) from None
        except TimeoutError:
            raise ServedPolicyError(
                f"{where}: no connection within timeout_s = {self.timeout_s:g} s"
            ) from None
        except (OSError, InvalidHandshake, InvalidURI) as exc:
            raise ServedPolicyError(f"{where}: cannot connect ({type(exc).__name__}: {exc})") from None
        try:
            hello = wire.read_hello(self._receive(connection, "the hello"))
        except wire.ProtocolError as exc:
            connection.close()
            raise ServedPolicyError(f"{where}: {exc}") from None
        except ServedPolicyError:
            connection.close()
            raise
        policy = {k: v for k, v in hello.items() if k != "metadata"}
        if self._hello is not None and policy != self._hello:
            connection.close()
            raise ServedPolicyError(
                f"{where}: the server now serves {policy}, not the policy it served when this client "
                f"connected first ({self._hello}); a run must not change its policy"
            )
        self._hello = policy
        self._connection = connection
        return hello

    def _receive(self, connection: ClientConnection, what: str) -> Any:
        where = f"policy server {self.address}"
        try:
            data = connection.recv(timeout=self.timeout_s)
        except TimeoutError:
            raise ServedPolicyError(
                f"{where}: no reply to {what} within timeout_s = {self.timeout_s:g} s"
            ) from None
        except ConnectionClosed as exc:
            raise ServedPolicyError(
                f"{where}: the server closed the connection before {what} ({exc})"
            ) from None
        if not isinstance(data, bytes):
            raise ServedPolicyError(
                f"{where}: {what} came as a text frame, not a msgpack message: {data[:500]}"
            )
        return wire.unpackb(data)

    def close(self) -> None:
        """Close the connection (a later ``act`` opens a new one)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def act(self, obs: Any, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        """Send the batch, keys and mode; return the server's chunks and diagnostics, checked against the
        protocol. The policy's own error comes back as a ``ServedPolicyError`` quoting it."""
        where = f"policy server {self.address}"
        rows = len(keys)
        try:
            request = wire.packb(wire.act_request(obs, keys, mode))
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"{where}: cannot send this act() call ({exc})") from None
        if self._connection is None:
            self._connect()
        connection = self._connection
        assert connection is not None
        try:
            connection.send(request)
            reply = self._receive(connection, f"act() on {rows} rows")
            if isinstance(reply, dict) and "error" in reply:
                raise ServedPolicyRaised(
                    f"{where}: the served policy raised {reply['error']}", str(reply.get("traceback", ""))
                )
            actions, diagnostics = wire.read_act_reply(reply, rows)
        except ServedPolicyRaised:
            raise
        except ConnectionClosed as exc:
            self.close()
            raise ServedPolicyError(f"{where}: the connection is closed ({exc})") from None
        except wire.ProtocolError as exc:
            self.close()
            raise ServedPolicyError(f"{where}: {exc}") from None
        except ServedPolicyError:
            self.close()  # the transport broke or timed out: the next act() starts a new connection
            raise
        return PolicyOutput(actions=actions, diagnostics=[RowDiagnostics(**d) for d in diagnostics])
