"""The served policy's wire format: msgpack messages over a WebSocket, numpy arrays carried bit for bit.

Why msgpack and this array encoding: it is what openpi's policy server and client speak
(``openpi_client/msgpack_numpy.py``): safe to decode (no pickle), schemaless, fast for large arrays, and
readable from any language. An ndarray travels as a map ``{"__ndarray__": True, "data": <bytes>,
"dtype": <dtype.str>, "shape": [...]}`` (its C-order bytes and a dtype string that names the byte
order), a numpy scalar as ``{"__npgeneric__": True, "data": <value>, "dtype": <dtype.str>}``, so a
peer that decodes openpi's arrays decodes ours. Decoding checks that the bytes fill the shape and
returns a writable copy, so a policy may write into what it is given.

The messages (protocol :data:`PROTOCOL`; docs/serving.md has the full table):

- ``hello``, server to client once per connection: what the policy is (head, obs_dim, input_keys,
  capabilities, name) and the server's ``metadata``;
- ``act`` request, client to server: ``obs`` (float32 [B, obs_dim], or a map of the declared
  observation keys), ``keys`` (B rows of [run_key, seed, replan, draw]) and ``mode`` (kind, temperature,
  sde_a, steps, noise);
- ``act`` reply: ``actions`` (float32 [B, chunk_length, action_dims]) and ``diagnostics`` (B maps of
  logprob, token_ids, token_logprobs, entropy, step_logprobs), or ``error`` (what the policy raised).

This module imports numpy and msgpack only: it is shared by the probe's client and by the server a lab
runs in its own environment (:mod:`grpo_probe.serve`), on Python 3.10 to 3.13.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack
import numpy as np

__all__ = [
    "DIAGNOSTIC_FIELDS",
    "MODE_FIELDS",
    "PROTOCOL",
    "ProtocolError",
    "act_reply",
    "act_request",
    "error_reply",
    "hello",
    "packb",
    "read_act_reply",
    "read_act_request",
    "read_hello",
    "unpackb",
]

PROTOCOL = "grpo-probe-policy/1"
"""The protocol's name and version, sent in every ``hello``; a client refuses another."""

MODE_FIELDS = ("kind", "temperature", "sde_a", "steps", "noise")
"""The fields of a sampling mode as an ``act`` request carries them (those of ``SamplingMode``)."""

DIAGNOSTIC_FIELDS: dict[str, str] = {
    "token_ids": "iu",
    "token_logprobs": "f",
    "entropy": "f",
    "step_logprobs": "f",
}
"""The array fields of a row's diagnostics and the numpy dtype kinds each may have (``iu``: integers,
``f``: floats); ``logprob`` is a number or nil."""

KEY_FIELDS = ("run_key", "seed", "replan", "draw")
"""A row key's fields, in the order a request's ``keys`` rows list them."""

_UNSUPPORTED_KINDS = ("V", "O", "c")
"""Structured, object and complex dtypes: their bytes alone do not say what they hold (openpi refuses
the same kinds)."""


class ProtocolError(ValueError):
    """A message that does not follow the protocol; the text says what was found and where."""


# -- arrays --------------------------------------------------------------------------------------------
def _pack_array(obj: Any) -> Any:
    """msgpack's ``default`` hook: an ndarray or numpy scalar as openpi's map; anything else is an error."""
    if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in _UNSUPPORTED_KINDS:
        raise ProtocolError(f"cannot send a numpy array of dtype {obj.dtype} (structured, object, complex)")
    if isinstance(obj, np.ndarray):
        return {
            b"__ndarray__": True,
            b"data": np.ascontiguousarray(obj).tobytes(),
            b"dtype": obj.dtype.str,
            b"shape": list(obj.shape),
        }
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"cannot send a {type(obj).__name__} over the policy wire")


def _unpack_array(obj: dict[Any, Any]) -> Any:
    """msgpack's ``object_hook``: openpi's array and scalar maps back to numpy, checked and writable."""
    if b"__ndarray__" in obj:
        try:
            dtype = np.dtype(obj[b"dtype"])
            shape = tuple(int(n) for n in obj[b"shape"])
            data = obj[b"data"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"an array map lacks a valid dtype, shape or data ({exc})") from None
        if dtype.kind in _UNSUPPORTED_KINDS or not isinstance(data, bytes):
            raise ProtocolError(f"an array map holds dtype {dtype} or non-bytes data")
        if len(data) != math.prod(shape) * dtype.itemsize:
            raise ProtocolError(
                f"an array map of dtype {dtype} and shape {list(shape)} holds {len(data)} bytes, not "
                f"{math.prod(shape) * dtype.itemsize}"
            )
        return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
    if b"__npgeneric__" in obj:
        try:
            return np.dtype(obj[b"dtype"]).type(obj[b"data"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"a numpy scalar map lacks a valid dtype or value ({exc})") from None
    return obj


def packb(obj: Any) -> bytes:
    """``obj`` as msgpack bytes, numpy arrays and scalars in openpi's encoding (bit for bit)."""
    return msgpack.packb(obj, default=_pack_array, use_bin_type=True)


def unpackb(data: bytes) -> Any:
    """The value :func:`packb` packed; a :class:`ProtocolError` for bytes that are not such a message."""
    try:
        return msgpack.unpackb(data, object_hook=_unpack_array, raw=False)
    except ProtocolError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise ProtocolError(f"not a msgpack message ({type(exc).__name__}: {exc})") from None


def _field(message: Any, name: str, what: str) -> Any:
    if not isinstance(message, Mapping):
        raise ProtocolError(f"{what} is a {type(message).__name__}, not a map")
    if name not in message:
        raise ProtocolError(f"{what} has no {name!r} field (fields: {', '.join(map(str, message))})")
    return message[name]


# -- hello ---------------------------------------------------------------------------------------------
def hello(policy: Any, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the server says first: the policy's ``head``, ``obs_dim``, ``input_keys`` (nil: the state
    only), ``capabilities`` (nil: none declared) and ``name``, and the server's own ``metadata``."""
    declared = getattr(policy, "capabilities", None)
    if declared is not None and not isinstance(declared, Mapping):
        to_dict = getattr(declared, "to_dict", None)
        if not callable(to_dict):
            raise ProtocolError(
                f"policy capabilities must be a PolicyCapabilities or a map of kinds, logprobs and "
                f"trainable, got {declared!r}"
            )
        declared = to_dict()
    keys = getattr(policy, "input_keys", None)
    kind = type(policy)
    return {
        "protocol": PROTOCOL,
        "policy": {
            "head": str(policy.head),
            "obs_dim": int(policy.obs_dim),
            "input_keys": None if keys is None else [str(k) for k in keys],
            "capabilities": None if declared is None else dict(declared),
            "name": f"{kind.__module__}:{kind.__qualname__}",
        },
        "metadata": dict(metadata or {}),
    }


def read_hello(message: Any) -> dict[str, Any]:
    """The ``policy`` map of a ``hello``, its fields checked; the protocol must be :data:`PROTOCOL`."""
    protocol = _field(message, "protocol", "the server's hello")
    if protocol != PROTOCOL:
        raise ProtocolError(f"the server speaks protocol {protocol!r}, this client {PROTOCOL!r}")
    policy = _field(message, "policy", "the server's hello")
    head = _field(policy, "head", "the hello's policy")
    obs_dim = _field(policy, "obs_dim", "the hello's policy")
    keys = policy.get("input_keys")
    if not isinstance(head, str) or isinstance(obs_dim, bool) or not isinstance(obs_dim, int) or obs_dim < 1:
        raise ProtocolError(f"the hello's policy has head {head!r} and obs_dim {obs_dim!r}")
    if keys is not None and (not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)):
        raise ProtocolError(f"the hello's input_keys must be a list of strings or nil, got {keys!r}")
    metadata = message.get("metadata", {})
    if not isinstance(metadata, Mapping):
        raise ProtocolError(f"the hello's metadata must be a map, got {metadata!r}")
    return {**policy, "metadata": dict(metadata)}


# -- act -----------------------------------------------------------------------------------------------
def act_request(obs: Any, keys: Sequence[Any], mode: Any) -> dict[str, Any]:
    """An ``act`` request: the observation batch as it is (an array, or a map of arrays and the task
    strings), each key's four integers, and the mode's fields (:data:`MODE_FIELDS`)."""
    if isinstance(obs, Mapping):
        obs = {str(k): (list(v) if isinstance(v, (tuple, list)) else v) for k, v in obs.items()}
    return {
        "type": "act",
        "obs": obs,
        "keys": [[int(getattr(k, name)) for name in KEY_FIELDS] for k in keys],
        "mode": {name: getattr(mode, name) for name in MODE_FIELDS},
    }


def read_act_request(message: Any) -> tuple[Any, list[dict[str, int]], dict[str, Any]]:
    """An ``act`` request's observations (task strings as a tuple), keys (one map of
    :data:`KEY_FIELDS` per row) and mode fields."""
    kind = _field(message, "type", "the request")
    if kind != "act":
        raise ProtocolError(f"unknown request type {kind!r} (known: 'act', 'stats')")
    obs = _field(message, "obs", "the act request")
    keys = _field(message, "keys", "the act request")
    mode = _field(message, "mode", "the act request")
    if isinstance(obs, Mapping):
        obs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in obs.items()}
    elif not isinstance(obs, np.ndarray):
        raise ProtocolError(f"the act request's obs is a {type(obs).__name__}, not an array or a map")
    if not isinstance(keys, list) or not all(
        isinstance(k, list) and len(k) == len(KEY_FIELDS) and all(isinstance(v, int) for v in k) for k in keys
    ):
        raise ProtocolError("the act request's keys must be rows of [run_key, seed, replan, draw] integers")
    if not isinstance(mode, Mapping) or set(mode) != set(MODE_FIELDS):
        raise ProtocolError(f"the act request's mode must be a map of {', '.join(MODE_FIELDS)}, got {mode!r}")
    return obs, [dict(zip(KEY_FIELDS, k, strict=True)) for k in keys], dict(mode)


def act_reply(output: Any) -> dict[str, Any]:
    """The reply to an ``act`` request from a ``PolicyOutput`` (anything with ``actions`` and
    ``diagnostics`` whose items have the ``RowDiagnostics`` fields), sent as it is: no cast, no copy."""
    rows = []
    for row in output.diagnostics:
        logprob = row.logprob
        fields = {"logprob": None if logprob is None else float(logprob)}
        fields.update({name: getattr(row, name, None) for name in DIAGNOSTIC_FIELDS})
        rows.append(fields)
    return {"actions": output.actions, "diagnostics": rows}


def error_reply(exc: BaseException, trace: str) -> dict[str, Any]:
    """The reply when the policy raised: its type and message, and the server's traceback."""
    return {"error": f"{type(exc).__name__}: {exc}", "traceback": trace}


def read_act_reply(message: Any, rows: int) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """A reply's actions and one diagnostics map per row, checked against the contract: float32 actions
    [rows, chunk_length, action_dims], ``rows`` diagnostics, each array field of its kind and 1-D.

    Nothing is cast: a reply of another dtype is an error, so a served row carries the bytes the policy
    computed. A reply with ``error`` is returned by the caller as the policy's own error, not checked here.
    """
    actions = _field(message, "actions", "the act reply")
    diagnostics = _field(message, "diagnostics", "the act reply")
    if not isinstance(actions, np.ndarray):
        raise ProtocolError(f"the act reply's actions are a {type(actions).__name__}, not an array")
    if actions.dtype != np.float32:
        raise ProtocolError(f"the act reply's actions are {actions.dtype}, not float32")
    if actions.ndim != 3 or actions.shape[0] != rows:
        raise ProtocolError(
            f"the act reply's actions have shape {list(actions.shape)}, not [{rows}, chunk_length, "
            f"action_dims] for a batch of {rows} rows"
        )
    if not isinstance(diagnostics, list) or len(diagnostics) != rows:
        found = len(diagnostics) if isinstance(diagnostics, list) else type(diagnostics).__name__
        raise ProtocolError(f"the act reply holds {found} diagnostics for {rows} rows")
    checked = []
    for i, row in enumerate(diagnostics):
        logprob = _field(row, "logprob", f"the act reply's diagnostics[{i}]")
        if logprob is not None and (isinstance(logprob, bool) or not isinstance(logprob, (int, float))):
            raise ProtocolError(f"the act reply's diagnostics[{i}].logprob is {logprob!r}, not a number")
        fields: dict[str, Any] = {"logprob": None if logprob is None else float(logprob)}
        for name, kinds in DIAGNOSTIC_FIELDS.items():
            value = row.get(name)
            if value is not None and (
                not isinstance(value, np.ndarray) or value.ndim != 1 or value.dtype.kind not in kinds
            ):
                found = f"{value.dtype} {list(value.shape)}" if isinstance(value, np.ndarray) else repr(value)
                wanted = "integers" if kinds == "iu" else "floats"
                raise ProtocolError(
                    f"the act reply's diagnostics[{i}].{name} is {found}, not a 1-D array of {wanted}"
                )
            fields[name] = value
        checked.append(fields)
    return actions, checked
