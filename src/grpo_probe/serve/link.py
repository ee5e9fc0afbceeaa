"""One WebSocket link between the probe and a server of this package, from either end.

Why one module for both protocols: the policy's (:mod:`grpo_probe.serve.wire`) and the environment's
(:mod:`grpo_probe.serve.env_wire`) messages differ, but a link is opened, greeted and kept the same way.
The server greets every connection with its hello and then answers one request at a time until the
client leaves (:class:`LinkServer`); the client connects, reads and checks the hello and sends requests,
naming the address and what happened when the server refuses, is not there, does not answer within its
timeout or breaks the protocol (:class:`ClientLink`). The two sides of the probe (a served policy, a
served simulator) differ only in their error's class and in how to start the server that is missing.

This module imports numpy, msgpack and websockets only (it ships in ``grpo-probe-serve``).
"""

from __future__ import annotations

import abc
import contextlib
import inspect
import logging
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.sync.client import ClientConnection, connect
from websockets.sync.server import Server, ServerConnection, serve

from grpo_probe.serve import wire
from grpo_probe.serve.stats import is_stats_request, stats_reply

__all__ = ["ClientLink", "LinkServer", "serve_until_interrupted"]

_DIRECT: dict[str, Any] = {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}
"""websockets 17 asks ``connect`` to be a context manager unless ``legacy=True``; a client holds its
connection across requests, so it opts in where the flag exists (older versions connect directly)."""

_Server = TypeVar("_Server", bound="LinkServer")


class ClientLink:
    """The client's end: one connection at a time to the server at ``address``, every wait bounded by
    ``timeout_s``; every failure is ``error(message)``, the message starting with ``where`` (e.g.
    ``policy server ws://h:p``). ``start_hint`` says how to start a server where none listens."""

    def __init__(
        self,
        address: str,
        timeout_s: float,
        *,
        where: str,
        error: Callable[[str], Exception],
        start_hint: str,
    ) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.where = where
        self._error = error
        self._start_hint = start_hint
        self._connection: ClientConnection | None = None

    @property
    def connected(self) -> bool:
        """Whether a connection is open (a broken one is closed, so the next open makes a new one)."""
        return self._connection is not None

    def open(self, read_hello: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        """Connect and return the server's hello as ``read_hello`` checked it; a hello that breaks the
        protocol closes the connection. The caller compares the hello with what it expects and calls
        :meth:`close` before refusing it."""
        self.close()
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
            raise self._error(
                f"{self.where}: connection refused: no server listens there ({self._start_hint})"
            ) from None
        except TimeoutError:
            raise self._error(
                f"{self.where}: no connection within timeout_s = {self.timeout_s:g} s"
            ) from None
        except (OSError, InvalidHandshake, InvalidURI) as exc:
            raise self._error(f"{self.where}: cannot connect ({type(exc).__name__}: {exc})") from None
        self._connection = connection
        with self._closed_on_failure("the hello"):
            return read_hello(self._receive(connection, "the hello"))

    def exchange(self, request: bytes, what: str) -> Any:
        """Send one request and return the decoded reply. A closed connection, a reply not in time or not
        a msgpack message closes the link (the next :meth:`open` starts afresh) and is the error, naming
        ``what`` was asked."""
        connection = self._connection
        if connection is None:
            raise self._error(f"{self.where}: not connected (the connection broke earlier)")
        with self._closed_on_failure(what):
            connection.send(request)
            return self._receive(connection, what)

    @contextlib.contextmanager
    def _closed_on_failure(self, what: str) -> Iterator[None]:
        """Any failure while ``what`` is asked closes the link, so the next :meth:`open` starts afresh
        rather than reading a half-answered reply; a closed connection or a reply that breaks the
        protocol becomes the link's own error, naming the address."""
        try:
            yield
        except ConnectionClosed as exc:
            self.close()
            raise self._error(f"{self.where}: the connection closed during {what} ({exc})") from None
        except wire.ProtocolError as exc:
            self.close()
            raise self._error(f"{self.where}: {exc}") from None
        except BaseException:
            self.close()
            raise

    def _receive(self, connection: ClientConnection, what: str) -> Any:
        try:
            data = connection.recv(timeout=self.timeout_s)
        except TimeoutError:
            raise self._error(
                f"{self.where}: no reply to {what} within timeout_s = {self.timeout_s:g} s"
            ) from None
        except ConnectionClosed as exc:
            raise self._error(
                f"{self.where}: the server closed the connection before {what} ({exc}); is it still running?"
            ) from None
        if not isinstance(data, bytes):
            raise self._error(
                f"{self.where}: {what} came as a text frame, not a msgpack message: {data[:500]}"
            )
        return wire.unpackb(data)

    def close(self) -> None:
        """Close the connection, if one is open."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class LinkServer(abc.ABC):
    """The server's end: listen at ``host:port`` (port 0: a free one), greet every connection with
    ``hello`` (packed bytes) and answer its requests in order until the client leaves. Connections are
    served on threads; each has its own session (:meth:`_open_session`), closed when it ends."""

    def __init__(self, hello: bytes, host: str, port: int) -> None:
        self._hello = hello
        self._server: Server = serve(self._handle, host, port, compression=None, max_size=None)

    @property
    def address(self) -> str:
        """``ws://host:port`` the server listens on (the port it was given, or the one port 0 picked)."""
        host, port = self._server.socket.getsockname()[:2]
        return f"ws://{host}:{port}"

    def serve_forever(self) -> None:
        """Answer requests until :meth:`shutdown` (or Ctrl-C)."""
        self._server.serve_forever()

    def shutdown(self) -> None:
        """Stop accepting connections and return from :meth:`serve_forever`."""
        self._server.shutdown()

    def __enter__(self: _Server) -> _Server:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _handle(self, connection: ServerConnection) -> None:
        """One client: the hello, then one reply per request until it disconnects."""
        session = self._open_session()
        try:
            connection.send(self._hello)
            while True:
                connection.send(self._answer(session, connection.recv()))
        except ConnectionClosed:  # the client left (a job ended, or was stopped)
            return
        finally:
            self._close_session(session)

    def _open_session(self) -> Any:
        """What one connection holds (None: nothing of its own)."""
        return None

    _failed = "request failed"
    """What the server's log says when a request fails (its traceback follows, and goes to the client)."""

    def _answer(self, session: Any, data: Any) -> bytes:
        """The reply to one request frame: the packed answer, or the packed error (never an exception,
        so the connection stays open after a request the server refuses or fails on).

        Why here and not in each server: both servers take a binary msgpack frame, answer the stats
        request alike (:mod:`grpo_probe.serve.stats`), and reply with the error and the traceback, logged
        under the server's own module, where anything else goes wrong, an answer that cannot be packed
        included. Only :meth:`_reply` differs.
        """
        try:
            if not isinstance(data, bytes):
                raise wire.ProtocolError("a request must be a binary msgpack frame")
            request = wire.unpackb(data)
            return wire.packb(stats_reply() if is_stats_request(request) else self._reply(session, request))
        except Exception as exc:
            logging.getLogger(type(self).__module__).exception(self._failed)
            return wire.packb(wire.error_reply(exc, traceback.format_exc()))

    @abc.abstractmethod
    def _reply(self, session: Any, request: Any) -> Any:
        """The answer to one decoded request other than stats (packed by :meth:`_answer`); raise to refuse
        it or when it fails."""

    def _close_session(self, session: Any) -> None:
        """Release what :meth:`_open_session` made: its ``close()``, where it has one."""
        close = getattr(session, "close", None)
        if callable(close):
            close()


def serve_until_interrupted(server: LinkServer, ready: Callable[[str], None]) -> None:
    """Tell ``ready`` the server's address once it listens, then serve until interrupted (Ctrl-C)."""
    ready(server.address)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
