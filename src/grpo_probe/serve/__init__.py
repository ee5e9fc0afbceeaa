"""Serve a policy to the probe from its own environment: ``grpo_probe.serve`` (numpy, websockets, msgpack).

Why: a lab's policy may need a Python, torch or CUDA the probe's environment cannot hold. The lab runs
this small server beside its model, in its own environment; the probe binds an arm to it
(``arms.<id>: {source: server, address: ws://HOST:PORT}``) and every rollout process calls the policy over
a WebSocket, with the same ``act(obs, keys, mode)`` contract and the same bytes as in process::

    from grpo_probe.serve import PolicyOutput, RowDiagnostics, serve_policy

    class MyPolicy:
        head = "flow"
        obs_dim = 17

        def act(self, obs, keys, mode):
            ...  # obs float32 [B, 17]; keys[i].run_key/seed/replan/draw; mode.kind, mode.steps, ...
            return PolicyOutput(actions=chunks, diagnostics=[RowDiagnostics(logprob=None) for _ in keys])

    serve_policy(MyPolicy(), "ws://0.0.0.0:8765")

or, for a factory called as an adapter is (``factory(checkpoint=..., device=...)``)::

    python -m grpo_probe.serve my_lab.policies:load --checkpoint /data/ckpt.pt --address ws://0.0.0.0:8765

This package imports nothing of grpo-probe but itself, and nothing but numpy, websockets and msgpack, on
Python 3.10 to 3.13. It ships inside grpo-probe and, for an environment without the probe, as its own
distribution ``grpo-probe-serve`` built from the same files (``pip install ./serve`` in the repository).
docs/serving.md describes the protocol.

A simulator is served the same way, from its own environment (``python -m grpo_probe.serve env FACTORY
--scene SCENE --port N``: :mod:`grpo_probe.serve.env_server`, protocol ``grpo-probe-env/1``,
docs/your-simulator-served.md); MetaWorld's tasks are :mod:`grpo_probe.serve.metaworld_env`.
"""

from __future__ import annotations

from grpo_probe.serve.contract import PolicyCapabilities, PolicyOutput, RowDiagnostics, RowKey, SamplingMode
from grpo_probe.serve.server import PolicyServer, parse_address, serve_policy
from grpo_probe.serve.wire import PROTOCOL, ProtocolError, packb, unpackb

__all__ = [
    "PROTOCOL",
    "PolicyCapabilities",
    "PolicyOutput",
    "PolicyServer",
    "ProtocolError",
    "RowDiagnostics",
    "RowKey",
    "SamplingMode",
    "packb",
    "parse_address",
    "serve_policy",
    "unpackb",
]
