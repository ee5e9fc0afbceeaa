"""GPU seconds: measured between CUDA barriers on a GPU, "not measured" on the CPU, and a gate that says
when its GPU part is unverified. The CUDA path runs here with the barrier and the clock faked."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from grpo_probe.compute import compute_report
from grpo_probe.compute.accounting import POLICY_STAGES, read_gpu_seconds
from grpo_probe.envs.boat.environment import BoatPush
from grpo_probe.envs.boat.params import SimParams
from grpo_probe.policies.protocol import PolicyOutput, RowDiagnostics, RowKey, SamplingMode
from grpo_probe.prereg import load_prereg
from grpo_probe.rollout import lockstep
from grpo_probe.rollout.engine import mean_timing, total_gpu_seconds
from grpo_probe.rollout.lockstep import run_lockstep
from grpo_probe.rollout.results import EpisodeSpec

REPO = Path(__file__).resolve().parents[2]
SIM = SimParams(replans=2, executed_actions=10)
HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
MODE = SamplingMode("flow_ode", steps=10)


class StillPolicy:
    """Holds the pusher where it is: zero actions, no randomness (timing is all these tests read)."""

    head = "flow"

    def act(self, obs: np.ndarray, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        actions = np.zeros((len(keys), SIM.chunk_length, SIM.action_dims), dtype=np.float32)
        return PolicyOutput(actions=actions, diagnostics=[RowDiagnostics(logprob=None) for _ in keys])


def _episodes(device: str, n: int = 2):
    envs = [BoatPush(SIM) for _ in range(n)]
    specs = [EpisodeSpec(7, d) for d in range(n)]
    return run_lockstep(StillPolicy(), envs, specs, run_key=1, mode=MODE, device=device)


def test_on_the_cpu_gpu_seconds_are_not_measured() -> None:
    results = _episodes("cpu")
    assert all(r.timing.gpu_s is None for r in results)
    assert total_gpu_seconds(results) is None
    assert mean_timing(results).gpu_s is None


def test_on_cuda_each_policy_call_is_timed_between_two_barriers(monkeypatch) -> None:
    barriers: list[str] = []
    clock = iter(float(t) for t in range(1000))
    monkeypatch.setattr(lockstep, "_synchronize", barriers.append)
    monkeypatch.setattr(lockstep.time, "perf_counter", lambda: next(clock))
    results = _episodes("cuda:0", n=2)
    calls = SIM.replans  # both episodes run every replan, batched into one call each
    assert barriers == ["cuda:0"] * (2 * calls)
    for r in results:
        # the fake clock advances 1 s per reading, so each call measures 1 s, split over its 2 rows
        assert r.timing.gpu_s == pytest.approx(calls * 0.5)
        assert r.timing.gpu_s == r.timing.policy_s
    assert total_gpu_seconds(results) == pytest.approx(calls * 1.0)
    assert mean_timing(results).gpu_s == pytest.approx(calls * 0.5)


def _bench(root: Path, stage: str, cpu_s: float) -> None:
    path = root / "benchmarks" / f"{stage}.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{cpu_s}\t0:00:01\t100\t1\t1\t1\t0\t0\t50\t{cpu_s}\n")


def _manifest(root: Path, stage: str, gpu_s: float | None, device: str) -> None:
    path = root / stage / f"{stage}.manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = {"device": device, "gpu_s": gpu_s}
    path.write_text(json.dumps({"format": "grpo-probe-manifest/1", "rule": stage, "extra": extra}))


@pytest.fixture
def smoke():
    return load_prereg(REPO / "prereg" / "smoke.yaml")


def _run(root: Path, smoke, gpu_s: dict[str, float | None], device: str = "cuda") -> tuple[dict, str]:
    for stage in POLICY_STAGES:
        _bench(root, stage, 1.0)
        _manifest(root, stage, gpu_s.get(stage), device)
    record = compute_report(smoke, root / "benchmarks", root / "compute.md", root / "compute.json")
    return record, (root / "compute.md").read_text()


def test_a_cpu_run_reports_gpu_as_not_measured_and_the_gate_as_unverified(tmp_path: Path, smoke) -> None:
    record, md = _run(tmp_path, smoke, {}, device="cpu")
    assert all(s["gpu_s"] is None for s in record["stages"])
    assert record["total_gpu_hours"] is None and record["gpu_within_gate"] is None
    assert record["cpu_within_gate"] is True and record["within_gate"] is None
    assert "| probe | 1 | 1.0 | 1.0 | not measured | 100 |" in md
    assert "GPU-hours not measured (no synchronized GPU timing for parallel_oracle, anchors, probe" in md
    assert "the GPU part of the gate (0 GPU-hours) is unverified: **GPU part unverified**" in md


def test_measured_gpu_seconds_are_held_against_the_gpu_gate(tmp_path: Path, smoke) -> None:
    """The smoke gate registers 0 GPU-hours: any measured GPU second is over it."""
    record, md = _run(tmp_path / "over", smoke, dict.fromkeys(POLICY_STAGES, 36.0))
    assert record["total_gpu_hours"] == pytest.approx(len(POLICY_STAGES) * 36.0 / 3600)
    assert record["gpu_within_gate"] is False and record["within_gate"] is False
    over = f"{len(POLICY_STAGES) * 0.01:.3f} GPU-hours against the registered 0: OVER: **OVER the gate**"
    assert over in md
    assert "| probe | 1 | 1.0 | 1.0 | 36.0 | 100 |" in md
    record, _ = _run(tmp_path / "zero", smoke, dict.fromkeys(POLICY_STAGES, 0.0))
    assert record["within_gate"] is True


def test_one_unmeasured_policy_stage_leaves_the_gpu_part_unverified(tmp_path: Path, smoke) -> None:
    measured = dict.fromkeys(POLICY_STAGES, 0.0) | {"replay": None}
    record, md = _run(tmp_path, smoke, measured)
    assert record["gpu_unmeasured_stages"] == ["replay"]
    assert record["within_gate"] is None
    assert "no synchronized GPU timing for replay" in md


def test_a_stage_is_measured_only_when_every_job_measured_it(tmp_path: Path) -> None:
    for i, gpu_s in enumerate((2.0, None)):
        path = tmp_path / f"probe/c{i}.manifest.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"rule": "probe", "extra": {"gpu_s": gpu_s}}))
    (tmp_path / "anchors.manifest.json").write_text(json.dumps({"rule": "anchors", "extra": {"gpu_s": 1.5}}))
    assert read_gpu_seconds(tmp_path) == {"anchors": 1.5, "probe": None}


def test_a_manifest_with_a_bad_gpu_value_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "probe.manifest.json"
    path.write_text(json.dumps({"rule": "probe", "extra": {"gpu_s": -1}}))
    with pytest.raises(ValueError, match=rf"{path}: extra.gpu_s must be a number >= 0 or null, got -1"):
        read_gpu_seconds(tmp_path)
