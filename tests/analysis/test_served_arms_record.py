"""The decision step finds the arms bound to a policy server, and what each declares, up its manifest chain.

Why: decision.md's recommendation for a served arm says what the server declares and that phase 2 does
not train it (tests/analysis/test_first_screen.py); the decision step reads that from the ``bind_server``
manifests the chain already records, so it needs no input of its own, and keeps nothing that changes
from run to run (the address, the server's CPU reading), so a rerun's bytes stay the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.probe_jobs.decision import served_arms
from grpo_probe.provenance.manifest import write_manifest

SHA = "0" * 64
DECLARED = {"kinds": ["flow_ode"], "logprobs": None, "trainable": False}
DDPM = {"name": "DDPM", "text": "LeRobot's DDPM sampler"}


def _step(name: str, rule: str, inputs: list[str], extra: dict | None = None) -> str:
    output = Path(f"results/{name}.out")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(name)
    manifest = f"results/{name}.manifest.json"
    write_manifest(manifest, [output], inputs, SHA, rule, extra)
    return manifest


def test_the_served_arms_and_their_declarations_come_from_the_bind_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # manifests name their inputs relative to the workflow's directory
    root = _step("prereg", "prereg_check", [])
    served = _step(
        "arms/flow/arm",
        "bind_server",
        [root],
        {
            "arm": "flow",
            "address": "ws://127.0.0.1:4711",
            "capabilities": DECLARED,
            "server_cpu": {},
            "policy": "grpo_probe.serve.lerobot.adapter:LeRobotAdapter",
            "checkpoint_sha256": "ab" * 32,
            "server": {
                "lerobot_type": "diffusion",
                "sampler": DDPM,
                "checkpoint": "/labs/ckpt",
                "threads": 1,
            },
        },
    )
    silent = _step("arms/quiet/arm", "bind_server", [root], {"arm": "quiet", "capabilities": None})
    trained = _step("arms/ar/arm", "train", [root], {"arm": "ar"})
    anchors = _step("anchors/flow", "anchors", [served, trained, silent])
    join = _step("join/c3", "join", [anchors])
    found = served_arms([join])
    nothing = {"policy": None, "type": None, "checkpoint_sha256": None, "sampler": None}
    assert found == {
        "flow": {
            "capabilities": DECLARED,
            "policy": "grpo_probe.serve.lerobot.adapter:LeRobotAdapter",
            "type": "diffusion",
            "checkpoint_sha256": "ab" * 32,
            "sampler": DDPM,
        },
        "quiet": {"capabilities": None, **nothing},
    }
    assert list(found) == ["flow", "quiet"]  # sorted: the record's bytes do not follow the walk's order
    assert served_arms([_step("join/c1", "join", [trained])]) == {}
