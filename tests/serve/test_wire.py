"""The wire format: arrays cross it bit for bit, openpi's peers read it, and bad bytes are named."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from grpo_probe.serve import wire

ARRAYS = {
    # a NaN with a payload, -0.0, +-inf, the smallest subnormal and the largest float32, by their bits
    "float32 edge bits": np.array(
        [0x7FC00001, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001, 0x7F7FFFFF], dtype=np.uint32
    ).view(np.float32),
    "float64 chunk": np.random.default_rng(0).standard_normal((3, 50, 6)),
    "float16": np.linspace(-1, 1, 7, dtype=np.float16),
    "big-endian float64": np.arange(5, dtype=">f8") / 3,
    "uint64 extremes": np.array([0, 2**64 - 1, 2**63], dtype=np.uint64),
    "int32 token ids": np.array([1025, 0, 7], dtype=np.int32),
    "bool": np.array([[True, False]]),
    "uint8 frames": np.random.default_rng(1).integers(0, 256, (2, 4, 5, 3), dtype=np.uint8),
    "0-d": np.array(1.5, dtype=np.float32),
    "empty": np.zeros((0, 50, 6), dtype=np.float32),
    "non-contiguous": np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2],
    "Fortran order": np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)),
}


@pytest.mark.parametrize("name", list(ARRAYS))
def test_arrays_cross_the_wire_bit_for_bit(name: str) -> None:
    array = ARRAYS[name]
    back = wire.unpackb(wire.packb({"a": array, "nested": [array]}))
    for got in (back["a"], back["nested"][0]):
        assert got.dtype == array.dtype and got.shape == array.shape
        assert got.tobytes() == np.ascontiguousarray(array).tobytes()
        assert got.flags.writeable  # a policy may write into its observations


def test_numpy_scalars_and_plain_values_keep_their_types() -> None:
    value = {"x": np.float32(0.1), "n": np.int64(-3), "s": "task", "f": 0.1, "none": None, "l": [1, 2]}
    back = wire.unpackb(wire.packb(value))
    assert type(back["x"]) is np.float32 and back["x"] == np.float32(0.1)
    assert type(back["n"]) is np.int64 and back["n"] == -3
    assert back["s"] == "task" and back["f"] == 0.1 and back["none"] is None and back["l"] == [1, 2]


def test_an_openpi_style_peer_decodes_our_arrays_and_we_decode_its() -> None:
    """openpi_client/msgpack_numpy.py's encoding: a map with byte keys __ndarray__, data, dtype, shape."""
    array = np.arange(12, dtype=np.float32).reshape(3, 4)

    def theirs_unpack(obj: dict) -> object:
        if b"__ndarray__" in obj:
            return np.ndarray(buffer=obj[b"data"], dtype=np.dtype(obj[b"dtype"]), shape=obj[b"shape"])
        return obj

    def theirs_pack(obj: object) -> object:
        assert isinstance(obj, np.ndarray)
        return {b"__ndarray__": True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": obj.shape}

    decoded = msgpack.unpackb(wire.packb({"a": array}), object_hook=theirs_unpack)
    assert decoded["a"].tobytes() == array.tobytes()
    ours = wire.unpackb(msgpack.packb({"a": array}, default=theirs_pack))
    assert ours["a"].tobytes() == array.tobytes() and ours["a"].dtype == np.float32


def test_an_act_request_round_trips_keys_mode_and_observations() -> None:
    from grpo_probe.serve import RowKey, SamplingMode

    keys = [RowKey(2**63 + 5, 1, 2, 3), RowKey(0, 0, 0, 0)]
    mode = SamplingMode("flow_sde", sde_a=0.5, steps=10)
    obs = {"observation.state": np.ones((2, 17), np.float32), "task": ("push", "push")}
    got_obs, got_keys, got_mode = wire.read_act_request(
        wire.unpackb(wire.packb(wire.act_request(obs, keys, mode)))
    )
    assert got_keys == [
        {"run_key": 2**63 + 5, "seed": 1, "replan": 2, "draw": 3},
        dict.fromkeys(wire.KEY_FIELDS, 0),
    ]
    assert SamplingMode(**got_mode) == mode
    assert (
        got_obs["task"] == ("push", "push")
        and got_obs["observation.state"].tobytes() == obs["observation.state"].tobytes()
    )


@pytest.mark.parametrize(
    ("message", "found"),
    [
        (b"\xc1", "not a msgpack message"),
        (
            msgpack.packb({b"__ndarray__": True, b"data": b"abc", b"dtype": "<f4", b"shape": [1]}),
            "holds 3 bytes, not 4",
        ),
        (msgpack.packb({b"__ndarray__": True, b"data": b"", b"dtype": "|O", b"shape": [0]}), "dtype object"),
    ],
    ids=["not msgpack", "short data", "object dtype"],
)
def test_bytes_that_are_not_a_message_are_named(message: bytes, found: str) -> None:
    with pytest.raises(wire.ProtocolError, match=found):
        wire.unpackb(message)


def test_object_arrays_are_refused_before_sending() -> None:
    with pytest.raises(wire.ProtocolError, match="dtype object"):
        wire.packb(np.array([None, 1], dtype=object))
