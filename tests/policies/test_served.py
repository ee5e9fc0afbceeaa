"""The probe's client of a served policy: the contract over the wire, and each failure named by address."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from websockets.sync.server import ServerConnection, serve

from grpo_probe.policies.check import check_policy
from grpo_probe.policies.protocol import RowKey, SamplingMode
from grpo_probe.policies.served import ServedPolicy, ServedPolicyError, ServedPolicyRaised
from grpo_probe.serve import PolicyServer, wire
from serve.numpy_policy import NumpyFlowPolicy
from serve_processes import policy_server

OBS = np.linspace(-1, 1, 2 * 17, dtype=np.float32).reshape(2, 17)
KEYS = [RowKey(5, 1, 0, 0), RowKey(5, 1, 0, 1)]
ODE = SamplingMode("flow_ode")


@pytest.fixture
def numpy_server() -> Iterator[str]:
    """The numpy policy served on a thread of this process (the helper's own types)."""
    with PolicyServer(NumpyFlowPolicy(), "127.0.0.1", 0) as server:
        yield server.address


def test_a_served_policy_declares_what_it_is_and_returns_the_in_process_bytes(numpy_server: str) -> None:
    served = ServedPolicy(numpy_server, timeout_s=10)
    assert (served.head, served.obs_dim, served.input_keys, served.capabilities) == ("flow", 17, None, None)
    assert served.served_name.endswith(":NumpyFlowPolicy")
    for mode in (ODE, SamplingMode("flow_sde", sde_a=0.5)):
        local, remote = NumpyFlowPolicy().act(OBS, KEYS, mode), served.act(OBS, KEYS, mode)
        assert remote.actions.dtype == np.float32 and remote.actions.tobytes() == local.actions.tobytes()
        for a, b in zip(local.diagnostics, remote.diagnostics, strict=True):
            assert a.logprob == b.logprob
            assert (a.step_logprobs is None) == (b.step_logprobs is None)
            if a.step_logprobs is not None:
                assert a.step_logprobs.tobytes() == b.step_logprobs.tobytes()
    served.close()


def test_the_policy_checker_passes_a_served_policy_that_keeps_the_contract(numpy_server: str) -> None:
    report = check_policy(
        ServedPolicy(numpy_server, timeout_s=10),
        action_shape=(50, 6),
        modes=[ODE, SamplingMode("flow_sde", sde_a=0.5)],
        obs_dim=17,
        head="flow",
    )
    assert report.passed, report.format()


def test_the_served_policy_s_own_error_is_quoted_and_the_connection_stays_open(numpy_server: str) -> None:
    served = ServedPolicy(numpy_server, timeout_s=10)
    with pytest.raises(
        ServedPolicyRaised, match=rf"{numpy_server}: the served policy raised ValueError: .*'greedy'"
    ):
        served.act(OBS, KEYS, SamplingMode("greedy"))
    assert served.act(OBS, KEYS, ODE).actions.shape == (2, 50, 6)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_server_at_the_address_is_a_refused_connection_naming_it() -> None:
    address = f"ws://127.0.0.1:{_free_port()}"
    with pytest.raises(ServedPolicyError, match=rf"policy server {address}: connection refused"):
        ServedPolicy(address, timeout_s=5)


def test_an_address_that_is_not_ws_host_port_is_refused_before_connecting() -> None:
    with pytest.raises(ValueError, match="expected ws://HOST:PORT"):
        ServedPolicy("http://127.0.0.1:8765")


class _SlowPolicy(NumpyFlowPolicy):
    def act(self, obs, keys, mode):  # type: ignore[no-untyped-def]
        if mode.kind == "flow_sde":
            time.sleep(1.5)
        return super().act(obs, keys, mode)


def test_a_reply_later_than_timeout_s_is_an_error_and_the_next_call_reconnects() -> None:
    with PolicyServer(_SlowPolicy(), "127.0.0.1", 0) as server:
        served = ServedPolicy(server.address, timeout_s=0.3)
        with pytest.raises(
            ServedPolicyError,
            match=rf"{server.address}: no reply to act\(\) on 2 rows within timeout_s = 0.3 s",
        ):
            served.act(OBS, KEYS, SamplingMode("flow_sde", sde_a=0.5))
        time.sleep(1.5)  # the slow call ends; a new connection gets the next reply, not the late one
        assert (
            served.act(OBS, KEYS, ODE).actions.tobytes()
            == NumpyFlowPolicy().act(OBS, KEYS, ODE).actions.tobytes()
        )


def test_a_server_that_dies_between_calls_is_named(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "grpo_probe.serve",
        "serve.numpy_policy:make_policy",
        "--address",
        "ws://127.0.0.1:0",
    ]
    with policy_server(command, tmp_path / "server.log", cwd=Path(__file__).parents[1]) as address:
        served = ServedPolicy(address, timeout_s=10)
        served.act(OBS, KEYS, ODE)
    # the server process is gone: the open connection fails, and so does the reconnection it makes next
    with pytest.raises(
        ServedPolicyError, match=rf"policy server {address}: (the connection closed|the server closed)"
    ):
        served.act(OBS, KEYS, ODE)
    with pytest.raises(ServedPolicyError, match=rf"policy server {address}: connection refused"):
        served.act(OBS, KEYS, ODE)


def _good_reply(rows: int) -> dict:
    return {"actions": np.zeros((rows, 50, 6), np.float32), "diagnostics": [{"logprob": None}] * rows}


MALFORMED = {
    "float64 actions": (
        lambda: {**_good_reply(2), "actions": np.zeros((2, 50, 6))},
        "actions are float64, not float32",
    ),
    "one row short": (
        lambda: {**_good_reply(2), "actions": np.zeros((1, 50, 6), np.float32)},
        r"shape \[1, 50, 6\], not \[2, ",
    ),
    "2-D actions": (
        lambda: {**_good_reply(2), "actions": np.zeros((2, 300), np.float32)},
        r"shape \[2, 300\]",
    ),
    "no diagnostics": (lambda: {"actions": np.zeros((2, 50, 6), np.float32)}, "has no 'diagnostics' field"),
    "one diagnostics for two rows": (
        lambda: {**_good_reply(2), "diagnostics": [{"logprob": None}]},
        "holds 1 diagnostics for 2 rows",
    ),
    "float token ids": (
        lambda: {**_good_reply(2), "diagnostics": [{"logprob": -1.0, "token_ids": np.zeros(3)}] * 2},
        r"diagnostics\[0\].token_ids is float64 \[3\], not a 1-D array of integers",
    ),
    "text frame": (lambda: "Traceback: boom", "came as a text frame"),
}


@pytest.fixture(scope="module")
def scripted_server() -> Iterator[tuple[str, dict]]:
    """A server that says hello as a policy server does, then answers each request from ``reply["next"]``."""
    reply: dict = {}

    def handle(connection: ServerConnection) -> None:
        connection.send(wire.packb(wire.hello(NumpyFlowPolicy())))
        for _ in connection:
            made = reply["next"]()
            connection.send(made if isinstance(made, str) else wire.packb(made))

    with serve(handle, "127.0.0.1", 0) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}", reply
        server.shutdown()


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_reply_that_breaks_the_protocol_is_named_with_the_address(
    scripted_server: tuple[str, dict], case: str
) -> None:
    address, reply = scripted_server
    reply["next"], found = MALFORMED[case]
    served = ServedPolicy(address, timeout_s=10)
    with pytest.raises(ServedPolicyError, match=rf"policy server {address}: .*{found}"):
        served.act(OBS, KEYS, ODE)


def test_a_server_of_another_protocol_is_refused_at_hello() -> None:
    def handle(connection: ServerConnection) -> None:
        connection.send(wire.packb({"protocol": "grpo-probe-policy/0", "policy": {}}))
        connection.recv()

    with serve(handle, "127.0.0.1", 0) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        address = f"ws://127.0.0.1:{server.socket.getsockname()[1]}"
        with pytest.raises(
            ServedPolicyError, match=rf"{address}: the server speaks protocol 'grpo-probe-policy/0'"
        ):
            ServedPolicy(address, timeout_s=5)
        server.shutdown()


def test_the_config_schema_states_the_client_s_default_timeout() -> None:
    from grpo_probe.policies.served import DEFAULT_TIMEOUT_S
    from grpo_probe.prereg.schema import load_config_schema

    bindings = load_config_schema()["properties"]["arms"]["additionalProperties"]["oneOf"]
    server = next(b for b in bindings if b["properties"]["source"].get("const") == "server")
    assert server["properties"]["timeout_s"]["default"] == DEFAULT_TIMEOUT_S
