"""The served environment's wire format: the policy wire's msgpack and arrays, with its own messages.

Why a second protocol beside the policy's: a simulator may need its own Python and MuJoCo build (MetaWorld
pins ``mujoco==3.3.0``, the probe ``4.0.0``), so it runs behind :mod:`grpo_probe.serve.env_server` in its
own environment while the probe's Gymnasium adapter measures it from the rollout process. The adapter
needs what it reads from an in-process environment: the spaces, ``reset(seed)``, ``step(action)`` with
its observation, ``terminated``, ``truncated`` and ``info``, and the scene's positions (and its state
shift and engagement when offered). Arrays and floats travel bit for bit (:mod:`grpo_probe.serve.wire`),
so the adapter computes the rows it computes in process.

The messages (protocol :data:`PROTOCOL`; docs/your-simulator-served.md has the table):

- ``hello``, server to client once per connection: ``factory``, ``scene``, ``python``, ``packages``
  (every installed distribution's version) and ``sha256`` (of those, the factory's and the scene's
  source files and this protocol): what a client pins and a manifest records;
- ``make`` {gym_id, kwargs}: build this connection's environment; the reply describes it (spaces, dt,
  what the scene offers, its ``cameras``: the named MuJoCo cameras in model order, then ``default``);
- ``reset`` {seed}; ``step`` {actions: float [n, action_dims]}: the ticks are stepped in order and each
  one's result comes back (``obs``, ``terminated``, ``truncated``, ``info``, ``positions``,
  ``engaged``), stopping after the first that ends the episode; ``perturb`` {rng, scale}: the scene's
  state shift, drawn from the client's generator sent as its state and sent back advanced;
  ``expert`` {obs, key, noise, chunk_length}: the scene's scripted expert's chunk;
- ``reset``, ``step`` and ``perturb`` may carry ``render`` ([[camera, height, width], ...]): their reply's
  ``frames`` are those cameras drawn once the request's work is done (uint8 [height, width, 3] each, in
  the order asked), so a camera-fed replan costs no round trip of its own; ``render`` {cameras} draws
  them at the state now;
- any reply may instead be ``error`` (what the environment raised) and ``traceback``.

This module imports numpy and msgpack only (through :mod:`grpo_probe.serve.wire`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from grpo_probe.serve.wire import ProtocolError

__all__ = [
    "POSITION_FIELDS",
    "PROTOCOL",
    "plain_info",
    "read_hello",
    "read_space",
    "rng_from_state",
    "rng_state",
    "space_message",
]

PROTOCOL = "grpo-probe-env/1"
"""The environment protocol's name and version, sent in every ``hello``; a client refuses another."""

POSITION_FIELDS = ("object_xy", "goal_xy", "effector_xy")
"""What a scene's ``positions()`` carries, as the ``positions`` map of a reply names it."""

HELLO_FIELDS = ("protocol", "factory", "scene", "python", "packages", "sha256")


def read_hello(message: Any) -> dict[str, Any]:
    """The hello's fields, checked; the protocol must be :data:`PROTOCOL`."""
    if not isinstance(message, Mapping):
        raise ProtocolError(f"the environment server's hello is a {type(message).__name__}, not a map")
    missing = [name for name in HELLO_FIELDS if name not in message]
    if missing:
        raise ProtocolError(f"the environment server's hello has no {', '.join(missing)}")
    if message["protocol"] != PROTOCOL:
        raise ProtocolError(f"the server speaks protocol {message['protocol']!r}, this client {PROTOCOL!r}")
    packages = message["packages"]
    if not isinstance(packages, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in packages.items()
    ):
        raise ProtocolError("the hello's packages must map distribution names to version strings")
    digest = message["sha256"]
    if not isinstance(digest, str) or len(digest) != 64:
        raise ProtocolError(f"the hello's sha256 must be 64 hex digits, got {digest!r}")
    return {name: message[name] for name in HELLO_FIELDS}


# -- spaces --------------------------------------------------------------------------------------------
def space_message(space: Any) -> dict[str, Any]:
    """A Gymnasium ``Box`` or ``Dict`` of ``Box`` entries as plain data (bounds bit for bit, entry order
    kept); another space is a ``ProtocolError`` naming it."""
    kind = type(space).__name__
    if kind == "Box":
        return {
            "kind": "box",
            "low": np.asarray(space.low),
            "high": np.asarray(space.high),
            "dtype": np.dtype(space.dtype).str,
        }
    if kind == "Dict":
        return {"kind": "dict", "entries": [[str(k), space_message(v)] for k, v in space.spaces.items()]}
    raise ProtocolError(f"cannot serve a {kind} space (a Box, or a Dict of Box entries)")


def read_space(message: Any, gymnasium: Any) -> Any:
    """The Gymnasium space :func:`space_message` described."""
    if not isinstance(message, Mapping) or message.get("kind") not in ("box", "dict"):
        raise ProtocolError(f"a space must be a map of kind box or dict, got {message!r}")
    if message["kind"] == "box":
        low, high = message.get("low"), message.get("high")
        if not isinstance(low, np.ndarray) or not isinstance(high, np.ndarray) or low.shape != high.shape:
            raise ProtocolError("a box space needs low and high arrays of one shape")
        return gymnasium.spaces.Box(low=low, high=high, dtype=np.dtype(message["dtype"]))
    entries = message.get("entries")
    if not isinstance(entries, list):
        raise ProtocolError("a dict space needs a list of [name, space] entries")
    return gymnasium.spaces.Dict({str(name): read_space(entry, gymnasium) for name, entry in entries})


# -- info and generators -------------------------------------------------------------------------------
def _plain(value: Any) -> tuple[bool, Any]:
    if value is None or isinstance(value, (bool, str, float)):
        return True, value
    if isinstance(value, int):
        return -(2**63) <= value < 2**64, value
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return True, value
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return True, value
    return False, None


def plain_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of a step's ``info`` that travel: numbers, booleans, strings, None and numeric arrays
    (values unchanged); an entry of any other type (a nested map, an object) is left out, always."""
    kept: dict[str, Any] = {}
    for key, value in info.items():
        ok, plain = _plain(value)
        if ok and isinstance(key, str):
            kept[key] = plain
    return kept


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """A generator's bit-generator state as msgpack data (its integers, which may exceed 64 bits, as
    decimal strings)."""

    def encode(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): encode(v) for k, v in value.items()}
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return {"int": str(int(value))}
        if isinstance(value, np.ndarray):
            return value
        return value

    state: dict[str, Any] = encode(rng.bit_generator.state)
    return state


def _decode_state(value: Any) -> Any:
    if isinstance(value, Mapping):
        if set(value) == {"int"}:
            return int(value["int"])
        return {k: _decode_state(v) for k, v in value.items()}
    return value


def rng_from_state(state: Mapping[str, Any]) -> np.random.Generator:
    """A generator whose bit generator continues from ``state`` (as :func:`rng_state` encoded it)."""
    decoded = _decode_state(state)
    name = decoded.get("bit_generator") if isinstance(decoded, Mapping) else None
    kind = getattr(np.random, str(name), None)
    if not isinstance(name, str) or kind is None:
        raise ProtocolError(f"unknown bit generator {name!r}")
    bit_generator = kind()
    bit_generator.state = decoded
    return np.random.Generator(bit_generator)


def set_rng_state(rng: np.random.Generator, state: Mapping[str, Any]) -> None:
    """Advance ``rng`` to ``state`` (the generator the server drew from, sent back)."""
    rng.bit_generator.state = _decode_state(state)
