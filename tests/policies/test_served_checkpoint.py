"""A served policy's checkpoint: declared in the generic server's hello, recorded, and held at connect.

Why: a lab restarting its policy server with another checkpoint behind the same address would otherwise
be caught only by the replay oracle at tick 1. The generic server (``python -m grpo_probe.serve FACTORY
--checkpoint PATH``) declares the checkpoint's sha256 as the probe hashes it; the arm's binding records
it in source.json; a client built from that record, or one that connected before, refuses a server
declaring another checkpoint when it connects.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from grpo_probe.policies.protocol import RowKey, SamplingMode
from grpo_probe.policies.served import RecordedCheckpoint, ServedPolicy, ServedPolicyError
from grpo_probe.probe_jobs.sources import arm_policy_source
from grpo_probe.serve import PolicyServer
from grpo_probe.serve.checkpoint import checkpoint_sha256
from grpo_probe.user_code import tree_sha256
from serve.numpy_policy import NumpyFlowPolicy
from serve_processes import policy_server

TESTS = Path(__file__).resolve().parents[1]
OBS = np.linspace(-1, 1, 2 * 17, dtype=np.float32).reshape(2, 17)
KEYS = [RowKey(5, 1, 0, 0), RowKey(5, 1, 0, 1)]
ODE = SamplingMode("flow_ode")


def _checkpoints(root: Path) -> tuple[Path, Path]:
    """Two checkpoint folders that differ in one byte of their weights."""
    first, second = root / "ckpt-a", root / "ckpt-b"
    for folder, weight in ((first, b"\x00"), (second, b"\x01")):
        (folder / "sub").mkdir(parents=True)
        (folder / "config.json").write_text('{"type": "numpy"}')
        (folder / "sub" / "weights.bin").write_bytes(weight * 64)
        (folder / ".hidden").write_text("left out")
    return first, second


def _serve(checkpoint: Path, log: Path, address: str = "ws://127.0.0.1:0"):
    command = [sys.executable, "-m", "grpo_probe.serve", "serve.numpy_policy:make_policy"]
    return policy_server([*command, "--checkpoint", str(checkpoint), "--address", address], log, cwd=TESTS)


def test_the_server_hashes_a_checkpoint_as_the_probe_does(tmp_path: Path) -> None:
    folder, _ = _checkpoints(tmp_path)
    assert checkpoint_sha256(folder) == tree_sha256(folder)
    weights = folder / "sub" / "weights.bin"
    assert checkpoint_sha256(weights) == tree_sha256(weights)
    with pytest.raises(FileNotFoundError, match="ckpt-c: checkpoint not found"):
        checkpoint_sha256(tmp_path / "ckpt-c")
    with PolicyServer(NumpyFlowPolicy(), "127.0.0.1", 0, checkpoint=weights) as server:
        metadata = ServedPolicy(server.address, timeout_s=10).metadata
    assert metadata == {"checkpoint": str(weights), "checkpoint_sha256": tree_sha256(weights)}


def test_another_checkpoint_restarted_behind_the_address_is_refused_at_connect(tmp_path: Path) -> None:
    first, second = _checkpoints(tmp_path)
    sha_a, sha_b = tree_sha256(first), tree_sha256(second)
    with _serve(first, tmp_path / "a.log") as address:
        served = ServedPolicy(address, timeout_s=10)
        assert served.metadata["checkpoint_sha256"] == sha_a
        before = served.act(OBS, KEYS, ODE).actions.tobytes()
    with _serve(second, tmp_path / "b.log", address):
        # the client that connected before reconnects and is refused, naming both hashes
        with pytest.raises(ServedPolicyError):  # the old connection died with the first server
            served.act(OBS, KEYS, ODE)
        with pytest.raises(
            ServedPolicyError,
            match=rf"policy server {address}: the server now declares checkpoint_sha256 {sha_b}, was {sha_a}",
        ):
            served.act(OBS, KEYS, ODE)
        # a later job's client, built from what the arm's binding recorded, is refused at connect
        recorded = RecordedCheckpoint(sha_a, "results/x/arms/ar/source.json (field server.checkpoint_sha256)")
        with pytest.raises(
            ServedPolicyError,
            match=rf"declares checkpoint_sha256 {sha_b}, but results/x/arms/ar/source.json \(field "
            rf"server.checkpoint_sha256\) records {sha_a} for this arm; refused",
        ):
            ServedPolicy(address, timeout_s=10, recorded=recorded)
    with _serve(first, tmp_path / "a2.log", address):  # the recorded checkpoint again: the same bytes
        assert served.act(OBS, KEYS, ODE).actions.tobytes() == before
        ServedPolicy(address, timeout_s=10, recorded=recorded).close()


def test_a_served_arm_s_source_holds_it_to_the_recorded_checkpoint(tmp_path: Path) -> None:
    source = tmp_path / "source.json"
    recipe = {"arm": "ar", "address": "ws://127.0.0.1:9", "timeout_s": 5, "checkpoint": None, "factory": None}
    source.write_text(json.dumps({**recipe, "server": {"checkpoint_sha256": "a" * 64}}))
    built = arm_policy_source(source, None, "cpu")
    assert built.recorded == RecordedCheckpoint("a" * 64, f"{source} (field server.checkpoint_sha256)")
    source.write_text(json.dumps({**recipe, "server": {}}))  # a server that declared no checkpoint
    assert arm_policy_source(source, None, "cpu").recorded is None
    source.write_text(json.dumps({**recipe, "server": {"checkpoint_sha256": "abc"}}))
    with pytest.raises(ValueError, match=rf"{source}: field server.checkpoint_sha256 must be 64 hex digits"):
        arm_policy_source(source, None, "cpu")
