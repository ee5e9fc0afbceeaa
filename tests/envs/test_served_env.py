"""A served environment gives the rows the same environment gives in process, and names a dead server.

Pusher-v5 is bound twice by the same adapter params: in the probe's process with the scene function of
:mod:`envs.served_scenes`, and served by ``python -m grpo_probe.serve env`` from a second process (the
project's own interpreter) whose server runs that scene. Every record's canonical bytes must match, the
state shift of a replay included; a killed server is named in the error, and a restarted one serves the
same rows again; a server of another simulator is refused at connect.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from envs.scene_envs import callable_name
from envs.served_scenes import PusherScene
from grpo_probe.envs import served_record
from grpo_probe.envs.gym_adapter import GymnasiumAdapter, GymnasiumParams
from grpo_probe.envs.served import SERVED_FACTORY, ServedEnvError, served_env, served_env_config
from grpo_probe.prereg.design import load_prereg
from grpo_probe.provenance.inputs import refuse_changed_inputs
from serve_processes import env_server_process
from shipped_files import shipped_designs

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
SCENE = "envs.served_scenes:PusherScene"
FACTORY = "grpo_probe.serve.env_server:gymnasium_make"
PARAMS = {
    "gym_id": "Pusher-v5",
    "replans": 3,
    "chunk_length": 6,
    "executed_actions": 4,
    "success_radius_m": 0.05,
}


def _episodes(env, seeds, perturb: float | None = None) -> list[bytes]:
    out = []
    for seed in seeds:
        env.reset(seed)
        if perturb is not None:
            env.perturb_state(np.random.default_rng([7, seed]), perturb)
        rng = np.random.default_rng(seed)
        while not env.done:
            env.execute(rng.uniform(-1.2, 1.2, (6, env.spec.action_dims)).astype(np.float32), 4)
        out.append(env.record().canonical_bytes())
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("served") / "server.log"
    with env_server_process(sys.executable, FACTORY, log, scene=SCENE, extra_path=[TESTS]) as (address, proc):
        yield address, proc


def _served(address: str, **server):
    config = served_env_config(
        {"source": "server", "address": address, "params": PARAMS, **server}, "design.yaml: env"
    )
    return served_env(**config)


def test_served_rows_are_the_in_process_bytes(server):
    address, _ = server
    local = GymnasiumAdapter(GymnasiumParams.from_dict({**PARAMS, "scene": callable_name(PusherScene)}))
    served = _served(address)
    assert served.spec.obs_dim == local.spec.obs_dim and served.spec.tick_s == local.spec.tick_s
    assert served.spec.episode_schema.equals(local.spec.episode_schema)
    assert served.spec.engagement == local.spec.engagement == PusherScene.engagement
    assert _episodes(served, [3, 4]) == _episodes(local, [3, 4])
    assert _episodes(served, [5], perturb=0.02) == _episodes(local, [5], perturb=0.02)
    assert _episodes(served, [5], perturb=0.0) == _episodes(local, [5])
    assert "sha256 " in served.spec.version and "mujoco " in served.spec.version


def test_the_hello_pins_the_simulator(server):
    address, _ = server
    digest = _served(address).spec.version.rsplit("sha256 ", 1)[1].rstrip(")")
    assert len(digest) == 64
    _served(address, sha256=digest)
    with pytest.raises(ServedEnvError, match=r"design pins 0{64} \(env.sha256\); refused"):
        _served(address, sha256="0" * 64)


def test_a_dead_server_is_named_and_a_restarted_one_gives_the_rows_again(tmp_path):
    log = tmp_path / "server.log"
    with env_server_process(sys.executable, FACTORY, log, scene=SCENE, extra_path=[TESTS]) as (address, proc):
        env = _served(address)
        before = _episodes(env, [8])
        env.reset(9)
        proc.kill()
        proc.wait()
        with pytest.raises(ServedEnvError, match=f"environment server {address}"):
            env.execute(np.zeros((6, 7), np.float32), 4)
    port = int(address.rsplit(":", 1)[1])
    with pytest.raises(ServedEnvError, match=f"environment server {address}: connection refused"):
        env.reset(8)
    # the same simulator behind the same port: the rerun's rows are the first run's
    from grpo_probe.serve.env_server import EnvServer

    with EnvServer(FACTORY, SCENE, "127.0.0.1", port):
        assert _episodes(env, [8]) == before


def test_another_simulator_behind_the_address_is_refused(tmp_path):
    from grpo_probe.serve.env_server import EnvServer

    with EnvServer(FACTORY, SCENE, "127.0.0.1", 0) as first:
        address = first.address
        env = _served(address)
        env.reset(1)
        port = int(address.rsplit(":", 1)[1])
    env.wrapped.close()
    other = EnvServer(FACTORY, None, "127.0.0.1", port)  # no scene: another fingerprint
    with other, pytest.raises(ServedEnvError, match=r"now serves another simulator .*refused"):
        env.reset(1)


def test_design_fields_are_checked_with_their_names():
    where = "prereg/x.yaml: env"
    with pytest.raises(ValueError, match=r"prereg/x.yaml: env.address: 'http://h:1' is not ws://HOST:PORT"):
        served_env_config({"source": "server", "address": "http://h:1", "params": PARAMS}, where)
    with pytest.raises(ValueError, match=r"env.timeout_s must be a number of seconds > 0"):
        served_env_config(
            {"source": "server", "address": "ws://h:1", "timeout_s": 0, "params": PARAMS}, where
        )
    with pytest.raises(ValueError, match=r"env.params.scene: a served environment's scene run on the server"):
        served_env_config(
            {"source": "server", "address": "ws://h:1", "params": {**PARAMS, "scene": "a:b"}}, where
        )
    with pytest.raises(ValueError, match=r"env.params: unknown field\(s\) colour"):
        served_env_config(
            {"source": "server", "address": "ws://h:1", "params": {**PARAMS, "colour": 1}}, where
        )
    with pytest.raises(ValueError, match=r"env: unknown field\(s\) port"):
        served_env_config({"source": "server", "address": "ws://h:1", "port": 1, "params": PARAMS}, where)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"adress": "ws://127.0.0.1:18766"},
            r"x\.yaml: env: 'adress' was unexpected; did you mean 'address'\?",
        ),
        ({"address": "http://127.0.0.1:1"}, r"x\.yaml: env\.address: 'http://127\.0\.0\.1:1' does not match"),
        ({"timeout_s": -1}, r"x\.yaml: env\.timeout_s: -1 is less than or equal to the minimum of 0"),
        ({"sha256": "abc"}, r"x\.yaml: env\.sha256: 'abc' does not match"),
    ],
)
def test_a_served_design_is_refused_naming_its_file_and_field(tmp_path: Path, change, message):
    raw = yaml.safe_load((REPO / "prereg/designs/served/metaworld_reach_smoke.yaml").read_text())
    if "adress" in change:
        del raw["env"]["address"]
    raw["env"].update(change)
    design = tmp_path / "x.yaml"
    design.write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(ValueError, match=message):
        load_prereg(design, require_lock=False)


def test_the_shipped_metaworld_designs_read_as_the_served_factory():
    """Every shipped design whose simulator is served lies in prereg/designs/served/ (prereg/README.md),
    and that folder holds only such designs, each at the address its server is started on."""
    designs = {path: load_prereg(path) for path in shipped_designs()}
    served = [path for path, prereg in designs.items() if prereg.env.id == SERVED_FACTORY]
    folder = REPO / "prereg/designs/served"
    assert served == [path for path in designs if path.parent == folder] != []
    for path in served:
        prereg = designs[path]
        assert prereg.env.params["server"] == {
            "address": "ws://127.0.0.1:18766",
            "timeout_s": 60.0,
            "sha256": None,
        }


def _another_version(fingerprint: dict, mujoco: str = "3.3.0") -> dict:
    """The hello of the same simulator after a restart with another MuJoCo in its environment."""
    packages = {**fingerprint["packages"], "mujoco": mujoco}
    return {
        **fingerprint,
        "packages": packages,
        "sha256": hashlib.sha256(repr(packages).encode()).hexdigest(),
    }


@pytest.fixture
def fresh_process(monkeypatch):
    """This process as a new job sees it: no hello read yet, no record to hold to."""
    monkeypatch.setattr(served_record, "_FIRST", {})
    monkeypatch.delenv(served_record.RECORD_VARIABLE, raising=False)


def test_a_restart_with_another_simulator_version_is_refused_naming_both(fresh_process, monkeypatch):
    from grpo_probe.serve import env_server

    with env_server.EnvServer(FACTORY, SCENE, "127.0.0.1", 0) as first:
        address, fingerprint = first.address, first.fingerprint
        env = _served(address)
        env.reset(1)
    env.wrapped.close()
    other = _another_version(fingerprint)
    monkeypatch.setattr(env_server, "simulator_fingerprint", lambda factory, scene: other)
    port = int(address.rsplit(":", 1)[1])
    was, now = fingerprint["packages"]["mujoco"], "3.3.0"
    with env_server.EnvServer(FACTORY, SCENE, "127.0.0.1", port):
        with pytest.raises(
            ServedEnvError,
            match=rf"now serves another simulator \(sha256 {other['sha256']}, was {fingerprint['sha256']}; "
            rf"packages.mujoco {was} -> {now}\); refused",
        ):
            env.reset(1)
        with pytest.raises(ServedEnvError, match="now serves another simulator"):  # a new env, same process
            _served(address)


def test_a_later_job_is_held_to_the_simulator_its_results_folder_recorded(
    fresh_process, tmp_path, monkeypatch
):
    from grpo_probe.serve import env_server

    record = tmp_path / "results" / "prereg" / served_record.RECORD_NAME
    with env_server.EnvServer(FACTORY, SCENE, "127.0.0.1", 0) as first:
        address, fingerprint = first.address, first.fingerprint
        _served(address)  # the prereg check's connection, then its record
        served_record.write_record(record, address, served_record.first_hello(address))
    recorded = json.loads(record.read_text())
    assert recorded == {"address": address, "hello": {k: fingerprint[k] for k in served_record.COMPARED}}
    # a later job: its declared inputs hold it (and its workers, through the environment) to the record
    monkeypatch.setattr(served_record, "_FIRST", {})
    monkeypatch.setenv(served_record.RECORD_VARIABLE, "")
    refuse_changed_inputs([str(record)])
    assert os.environ[served_record.RECORD_VARIABLE] == str(record.resolve())
    port = int(address.rsplit(":", 1)[1])
    with env_server.EnvServer(FACTORY, SCENE, "127.0.0.1", port):
        assert "sha256 " + fingerprint["sha256"] in _served(address).spec.version  # the same simulator
    monkeypatch.setattr(served_record, "_FIRST", {})
    other = _another_version(fingerprint, mujoco="3.2.7")
    monkeypatch.setattr(env_server, "simulator_fingerprint", lambda factory, scene: other)
    with env_server.EnvServer(FACTORY, SCENE, "127.0.0.1", port), pytest.raises(ServedEnvError) as refused:
        _served(address)
    message = str(refused.value)
    assert message.startswith(
        f"environment server {address}: the server's simulator is not the one {record.resolve()}"
    )
    assert f"sha256 {fingerprint['sha256']} -> {other['sha256']}" in message
    assert f"packages.mujoco {fingerprint['packages']['mujoco']} -> 3.2.7" in message


def test_a_damaged_record_is_named_with_its_field(fresh_process, tmp_path, monkeypatch, server):
    address, _ = server
    record = tmp_path / served_record.RECORD_NAME
    record.write_text(json.dumps({"address": address, "hello": {"sha256": "0" * 64}}))
    monkeypatch.setenv(served_record.RECORD_VARIABLE, str(record))
    with pytest.raises(ServedEnvError, match=rf"{record}: field hello.protocol is missing"):
        _served(address)


def test_the_prereg_check_records_the_served_simulator(fresh_process, tmp_path):
    from grpo_probe.prereg import lock_prereg
    from grpo_probe.probe_jobs.prepare import prereg_check
    from grpo_probe.serve.env_server import EnvServer

    with EnvServer(FACTORY, SCENE, "127.0.0.1", 0) as running:
        raw = yaml.safe_load((REPO / "prereg/designs/served/metaworld_reach_smoke.yaml").read_text())
        raw["env"].update(address=running.address, params=PARAMS)
        design = tmp_path / "pusher_served.yaml"
        design.write_text(yaml.safe_dump({**raw, "name": "pusher_served"}, sort_keys=False))
        lock_prereg(design)
        record, manifest = (
            tmp_path / "prereg" / "served_env.json",
            tmp_path / "prereg" / "check.manifest.json",
        )
        prereg_check(design, manifest, served_env=record)
    assert json.loads(record.read_text())["hello"]["sha256"] == running.fingerprint["sha256"]
    outputs = {Path(o["path"]).name for o in json.loads(manifest.read_text())["outputs"]}
    assert served_record.RECORD_NAME in outputs
