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
happened; after one, the next ``act`` opens a new connection. A connection whose hello declares another
policy, or another ``checkpoint_sha256``, than the client's first one or the one the arm's binding
recorded (:class:`RecordedCheckpoint`) is refused: a different checkpoint restarted behind the address
stops the job at connect, before a row is computed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grpo_probe.policies.protocol import PolicyCapabilities, PolicyOutput, RowDiagnostics, RowKey
from grpo_probe.sampling import SamplingMode
from grpo_probe.serve import wire
from grpo_probe.serve.link import ClientLink

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "RecordedCheckpoint",
    "ServedPolicy",
    "ServedPolicyError",
    "ServedPolicyRaised",
    "check_address",
]

DEFAULT_TIMEOUT_S = 120.0
"""Seconds to wait for the server to accept a connection, and for each ``act`` reply (config:
``arms.<id>.timeout_s``): long enough for a large batch on a busy GPU, short enough that a hung server
stops a job within minutes."""


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


@dataclass(frozen=True)
class RecordedCheckpoint:
    """The checkpoint sha256 a served arm's binding read from the server's hello, and the file that
    records it (the arm's source.json): every later connection must declare the same."""

    sha256: str
    where: str


def _checkpoint_sha256(hello: Mapping[str, Any]) -> str | None:
    found = hello["metadata"].get("checkpoint_sha256")
    return None if found is None else str(found)


class ServedPolicy:
    """The policy served at ``address``; its ``head``, ``obs_dim``, ``input_keys`` and ``capabilities``
    are what the server's hello declares (read when the client connects, on construction).

    ``recorded``: the checkpoint the arm was bound to; a server declaring another is refused at connect.
    """

    def __init__(
        self, address: str, timeout_s: float = DEFAULT_TIMEOUT_S, recorded: RecordedCheckpoint | None = None
    ) -> None:
        self.address = check_address(address)
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
            raise ValueError(f"policy server {address}: timeout_s must be a number > 0, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        self.recorded = recorded
        self._link = ClientLink(
            self.address,
            self.timeout_s,
            where=f"policy server {self.address}",
            error=ServedPolicyError,
            start_hint="start it with grpo_probe.serve, or `grpo-probe serve` for a checkpoint, and check "
            "the address",
        )
        self._hello: dict[str, Any] | None = None
        self._checkpoint: str | None = None
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
        """Open a connection and read the hello; on a reconnection it must declare what the first did,
        its checkpoint's sha256 included, and that sha256 must be the one the arm's binding recorded."""
        hello = self._link.open(wire.read_hello)
        refused = self._refusal(hello)
        if refused is not None:
            self._link.close()
            raise ServedPolicyError(f"{self._link.where}: {refused}")
        self._hello = {k: v for k, v in hello.items() if k != "metadata"}
        self._checkpoint = _checkpoint_sha256(hello)
        return hello

    def _refusal(self, hello: dict[str, Any]) -> str | None:
        """Why the policy this hello declares is not the one this client is held to (None: it is)."""
        policy = {k: v for k, v in hello.items() if k != "metadata"}
        found = _checkpoint_sha256(hello)
        if self.recorded is not None and found != self.recorded.sha256:
            return (
                f"the server declares checkpoint_sha256 {found}, but {self.recorded.where} records "
                f"{self.recorded.sha256} for this arm; refused: a different checkpoint restarted behind the "
                "same address (serve the recorded checkpoint again, or bind the arm anew)"
            )
        if self._hello is None:
            return None
        if policy != self._hello:
            return (
                f"the server now serves {policy}, not the policy it served when this client connected "
                f"first ({self._hello}); a run must not change its policy"
            )
        if found != self._checkpoint:
            return (
                f"the server now declares checkpoint_sha256 {found}, was {self._checkpoint} when this "
                "client connected first; a run must not change its policy"
            )
        return None

    def close(self) -> None:
        """Close the connection (a later ``act`` opens a new one)."""
        self._link.close()

    def act(self, obs: Any, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        """Send the batch, keys and mode; return the server's chunks and diagnostics, checked against the
        protocol. The policy's own error comes back as a ``ServedPolicyError`` quoting it."""
        where = f"policy server {self.address}"
        rows = len(keys)
        try:
            request = wire.packb(wire.act_request(obs, keys, mode))
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"{where}: cannot send this act() call ({exc})") from None
        if not self._link.connected:
            self._connect()
        try:
            reply = self._link.exchange(request, f"act() on {rows} rows")
            if isinstance(reply, dict) and "error" in reply:
                raise ServedPolicyRaised(
                    f"{where}: the served policy raised {reply['error']}", str(reply.get("traceback", ""))
                )
            actions, diagnostics = wire.read_act_reply(reply, rows)
        except wire.ProtocolError as exc:
            self.close()
            raise ServedPolicyError(f"{where}: {exc}") from None
        return PolicyOutput(actions=actions, diagnostics=[RowDiagnostics(**d) for d in diagnostics])
