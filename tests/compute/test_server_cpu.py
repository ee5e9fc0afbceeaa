"""compute.md counts the CPU of the servers a run talks to: a served policy's, a served simulator's.

Why: a served arm's policy computes in the lab's process, which Snakemake's benchmark files never see, so
compute.md counted only the probe's side of each call. Each server now answers a ``stats`` request with
its process's CPU seconds; the binding step records a reading, compute.md reads the server again and
counts the difference on a line of its own, in the total. Tested against the operating system's count
of a real server process whose policy burns a known amount of CPU per call; an older server (no stats
request) and a restarted one are said so, never counted as zero.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from websockets.sync.server import ServerConnection, serve

from compute.cpu_policy import BURN_S
from grpo_probe.compute import compute_report
from grpo_probe.compute.servers import ServerCompute, read_server_bindings, server_compute, server_reading
from grpo_probe.policies.protocol import RowKey
from grpo_probe.policies.served import ServedPolicy
from grpo_probe.prereg import load_prereg
from grpo_probe.sampling import SamplingMode
from grpo_probe.serve import wire
from grpo_probe.serve.env_server import EnvServer
from grpo_probe.serve.stats import ServerStats, fetch_server_stats
from serve_processes import REPO, policy_server

CALLS = 3
HERE = Path(__file__).resolve().parent


def _os_cpu_s(pid: int) -> float:
    """User + system CPU seconds the kernel counts for process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _bench(root: Path) -> Path:
    bench = root / "benchmarks"
    bench.mkdir(parents=True)
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    (bench / "train.tsv").write_text(header + "100.0\t0:01:40\t600\t1\t1\t1\t0\t0\t50\t90.0\n")
    return bench


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the OS's count from /proc")
def test_compute_md_counts_a_served_policys_cpu_on_its_own_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent)])}
    command = [
        sys.executable,
        "-m",
        "grpo_probe.serve",
        "cpu_policy:make_policy",
        "--address",
        "ws://127.0.0.1:0",
    ]
    bench = _bench(tmp_path / "results")
    with policy_server(command, tmp_path / "server.log", env=env) as address:
        bound = server_reading("policy of arm ar", address, 30.0)
        pid = bound["stats"]["pid"]
        assert pid != os.getpid()  # the server's own process, not this one
        before = _os_cpu_s(pid)
        manifest = {"rule": "bind_server", "extra": {"arm": "ar", "server_cpu": bound}}
        (tmp_path / "results/arms/ar").mkdir(parents=True)
        (tmp_path / "results/arms/ar/arm.manifest.json").write_text(json.dumps(manifest))
        served = ServedPolicy(address, timeout_s=30)
        obs = np.zeros((2, 17), dtype=np.float32)
        for call in range(CALLS):
            served.act(obs, [RowKey(1, 0, call, d) for d in range(2)], SamplingMode("flow_ode"))
        served.close()
        after = _os_cpu_s(pid)
        servers = server_compute(read_server_bindings(tmp_path / "results"))
    (line,) = servers
    assert (line.role, line.address, line.note) == ("policy of arm ar", address, "")
    assert line.cpu_s is not None and line.cpu_s >= CALLS * BURN_S
    assert line.cpu_s == pytest.approx(after - before, abs=0.15)  # the kernel's ticks: 10 ms each
    smoke = load_prereg(REPO / "prereg" / "smoke.yaml")
    md, out = tmp_path / "compute.md", tmp_path / "compute.json"
    record = compute_report(smoke, bench, md, out, servers=servers)
    assert f"| server: policy of arm ar ({address}) | - | - | {line.cpu_s:.1f} | - | - |" in md.read_text()
    assert record["total_cpu_hours"] == pytest.approx((90.0 + line.cpu_s) / 3600)
    assert record["servers"] == [
        {"role": "policy of arm ar", "address": address, "cpu_s": line.cpu_s, "note": ""}
    ]


def test_the_environment_server_answers_the_stats_request_too() -> None:
    with EnvServer("grpo_probe.serve.env_server:gymnasium_make", port=0) as server:
        stats = fetch_server_stats(server.address, 10.0)
    assert stats is not None and stats.pid == os.getpid() and stats.cpu_s > 0


def _older_server(connection: ServerConnection) -> None:
    """A policy server from before the stats request: the hello, then an error for anything but act."""
    connection.send(wire.packb({"protocol": wire.PROTOCOL, "policy": {}, "metadata": {}}))
    for _ in connection:
        error = wire.ProtocolError("unknown request type 'stats' (known: 'act')")
        connection.send(wire.packb(wire.error_reply(error, "")))


def test_an_older_server_is_not_measured_never_zero() -> None:
    with serve(_older_server, "127.0.0.1", 0) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        host, port = server.socket.getsockname()[:2]
        address = f"ws://{host}:{port}"
        assert fetch_server_stats(address, 10.0) is None
        bound = server_reading("environment", address, 10.0)
        (line,) = server_compute([{**bound, "manifest": "m.json"}])
        server.shutdown()
    assert bound["stats"] is None and "answers no stats request" in bound["why"]
    assert line.cpu_s is None and line.note == "not measured: the server answers no stats request"


def test_a_restarted_or_gone_server_is_said_so(tmp_path: Path) -> None:
    then = ServerStats(cpu_s=5.0, pid=100, started=1.0)
    bound = {"role": "environment", "address": "ws://h:1", "timeout_s": 1.0, "stats": then.as_dict()}
    record = {**bound, "manifest": "m.json"}
    same = server_compute([record], lambda a, t: ServerStats(cpu_s=7.5, pid=100, started=1.0))
    assert same == [ServerCompute("environment", "ws://h:1", 2.5, "")]
    (restarted,) = server_compute([record], lambda a, t: ServerStats(cpu_s=1.25, pid=101, started=9.0))
    assert restarted.cpu_s == 1.25 and "since the server restarted (pid 101; it was pid 100" in restarted.note

    def gone(address: str, timeout_s: float) -> ServerStats:
        raise ConnectionError(f"server {address}: no stats (ConnectionRefusedError: refused)")

    (missing,) = server_compute([record], gone)
    assert missing.cpu_s is None and missing.note.startswith("not measured: server ws://h:1: no stats")
    md = tmp_path / "compute.md"
    smoke = load_prereg(REPO / "prereg" / "smoke.yaml")
    compute_report(smoke, _bench(tmp_path), md, tmp_path / "c.json", servers=[restarted, missing])
    text = md.read_text()
    assert "| server: environment (ws://h:1) | - | - | not measured | - | - |" in text
    assert "environment: since the server restarted" in text


def test_a_malformed_binding_record_names_its_manifest(tmp_path: Path) -> None:
    path = tmp_path / "arms/ar/arm.manifest.json"
    path.parent.mkdir(parents=True)
    record = {
        "role": "policy of arm ar",
        "address": "ws://h:1",
        "stats": {"cpu_s": -1, "pid": 3, "started": 0},
    }
    path.write_text(json.dumps({"extra": {"server_cpu": record}}))
    with pytest.raises(ValueError, match=r"arm\.manifest\.json: extra\.server_cpu\.stats\.cpu_s must be"):
        read_server_bindings(tmp_path)


def test_the_workflows_first_rule_records_a_served_simulators_cpu_reading(tmp_path: Path) -> None:
    """The prereg_check rule builds a served design's environment and records the environment server's
    reading (``extra.server_cpu``) that compute.md counts from; the server is a process of its own."""
    import yaml

    from grpo_probe.prereg.design import lock_prereg
    from grpo_probe.probe_jobs.prepare import prereg_check
    from serve_processes import env_server_process

    log = tmp_path / "env_server.log"
    factory, scene = "grpo_probe.serve.env_server:gymnasium_make", "envs.served_scenes:PusherScene"
    with env_server_process(sys.executable, factory, log, scene=scene, extra_path=[HERE.parent]) as (
        address,
        proc,
    ):
        raw = yaml.safe_load((REPO / "prereg/designs/served/metaworld_reach_smoke.yaml").read_text())
        params = {"gym_id": "Pusher-v5", "replans": 3, "chunk_length": 6, "executed_actions": 4}
        raw["env"] = {"source": "server", "address": address, "params": {**params, "success_radius_m": 0.05}}
        raw.pop("observation", None)
        design = tmp_path / "prereg" / "served.yaml"
        design.parent.mkdir()
        design.write_text(yaml.safe_dump(raw, sort_keys=False))
        (tmp_path / "prereg" / "rules").mkdir()
        for rule in (REPO / "prereg" / "rules").glob("*.yaml"):
            (tmp_path / "prereg" / "rules" / rule.name).write_text(rule.read_text())
        lock_prereg(design)
        manifest = tmp_path / "results" / "prereg.manifest.json"
        manifest.parent.mkdir()
        prereg_check(design, manifest)
        (binding,) = read_server_bindings(tmp_path / "results")
        assert (binding["role"], binding["address"], binding["why"]) == ("environment", address, None)
        assert binding["stats"]["pid"] == proc.pid
        (line,) = server_compute([binding])
    assert line.role == "environment" and line.cpu_s is not None and line.cpu_s >= 0 and line.note == ""
