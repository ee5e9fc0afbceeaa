"""A served simulator's first hello is the results folder's reference: a later job refuses another.

Why: the prereg check, the first job of a run, records the environment server's hello in
``prereg/served_env.json``; every later job declares the file and holds its connections to it. Here the
simulator is Pusher-v5 served on a thread of the test (so its hello can be made another version's), the
design the MetaWorld smoke design on it; the demos job is the later job. With the recorded simulator it
gets past the connection (and stops where this scene offers no scripted expert); with a restart that
says another MuJoCo it is refused at connect, its log naming the record, the field and both values.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from grpo_probe.prereg import lock_prereg
from grpo_probe.serve import env_server

pytestmark = [pytest.mark.e2e]

TESTS = Path(__file__).resolve().parents[1]
DESIGN = "pusher_served_record"
PARAMS = {
    "gym_id": "Pusher-v5",
    "replans": 3,
    "chunk_length": 6,
    "executed_actions": 4,
    "success_radius_m": 0.05,
}
FACTORY = "grpo_probe.serve.env_server:gymnasium_make"
SCENE = "envs.served_scenes:PusherScene"


def _server(port: int) -> env_server.EnvServer:
    return env_server.EnvServer(FACTORY, SCENE, "127.0.0.1", port)


def test_a_later_job_refuses_a_simulator_the_prereg_check_did_not_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workflow_tools
) -> None:
    monkeypatch.syspath_prepend(str(TESTS))  # the scene module, on the server's side (this process)
    repo = workflow_tools.copy_repo(tmp_path / "repo")
    results = repo / "results" / DESIGN
    config = ("--cores", "1", "--config", f"prereg=prereg/{DESIGN}.yaml")
    with _server(0) as first:
        address, fingerprint = first.address, first.fingerprint
        raw = yaml.safe_load((repo / "prereg/designs/served/metaworld_reach_smoke.yaml").read_text())
        raw["env"].update(address=address, params=PARAMS)
        design = repo / "prereg" / f"{DESIGN}.yaml"
        design.write_text(yaml.safe_dump({**raw, "name": DESIGN}, sort_keys=False))
        lock_prereg(design)
        check = workflow_tools.snakemake(repo, f"results/{DESIGN}/prereg/check.manifest.json", *config)
        assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
        record = results / "prereg" / "served_env.json"
        assert json.loads(record.read_text())["hello"]["sha256"] == fingerprint["sha256"]
        same = workflow_tools.snakemake(repo, f"results/{DESIGN}/demos/demos.manifest.json", *config)
    log = (results / "logs" / "demos.log").read_text()
    assert same.returncode != 0 and "offers no scripted expert" in log, log[-3000:]
    packages = {**fingerprint["packages"], "mujoco": "3.3.0"}
    other = {
        **fingerprint,
        "packages": packages,
        "sha256": hashlib.sha256(repr(packages).encode()).hexdigest(),
    }
    monkeypatch.setattr(env_server, "simulator_fingerprint", lambda factory, scene: other)
    with _server(int(address.rsplit(":", 1)[1])):
        refused = workflow_tools.snakemake(repo, f"results/{DESIGN}/demos/demos.manifest.json", *config)
    log = (results / "logs" / "demos.log").read_text()
    assert refused.returncode != 0, refused.stdout[-3000:]
    assert f"the server's simulator is not the one {record.resolve()} records" in log, log[-3000:]
    assert f"sha256 {fingerprint['sha256']} -> {other['sha256']}" in log
    assert f"packages.mujoco {fingerprint['packages']['mujoco']} -> 3.3.0" in log
    assert not (results / "demos" / "demos.npz").exists()
