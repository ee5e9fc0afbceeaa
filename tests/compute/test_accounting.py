"""Compute accounting: Snakemake benchmark files summed per stage, the gate, and the estimate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_probe.compute import compute_report, estimate_run, read_benchmarks
from grpo_probe.compute.accounting import format_estimate, oracle_episodes, run_episodes
from grpo_probe.prereg import load_prereg

REPO = Path(__file__).resolve().parents[2]
HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _bench(root: Path, rel: str, wall: float, rss: float, cpu: float) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{wall}\t0:00:01\t{rss}\t1\t1\t1\t0\t0\t50\t{cpu}\n")


@pytest.fixture
def smoke():
    return load_prereg(REPO / "prereg" / "smoke.yaml")


def test_stages_sum_their_jobs_and_keep_the_largest_memory(tmp_path: Path) -> None:
    _bench(tmp_path, "probe/c1/s1-2.tsv", 10.0, 300.0, 8.0)
    _bench(tmp_path, "probe/c1/s3-4.tsv", 12.0, 500.0, 9.5)
    _bench(tmp_path, "demos.tsv", 2.0, 100.0, 1.5)
    stages = {s.stage: s for s in read_benchmarks(tmp_path)}
    assert [s for s in stages] == ["demos", "probe"]  # registered stage order, not file order
    assert stages["probe"].jobs == 2
    assert stages["probe"].wall_s == pytest.approx(22.0)
    assert stages["probe"].cpu_s == pytest.approx(17.5)
    assert stages["probe"].max_rss_mb == 500.0


def test_a_benchmark_with_a_non_number_names_file_and_column(tmp_path: Path) -> None:
    (tmp_path / "demos.tsv").write_text(HEADER + "x\t0\t1\t1\t1\t1\t0\t0\t50\t1\n")
    with pytest.raises(ValueError, match=r"demos\.tsv: column 's' is 'x'"):
        read_benchmarks(tmp_path)


def test_report_compares_the_total_with_the_registered_gate(tmp_path: Path, smoke) -> None:
    bench = tmp_path / "benchmarks"
    _bench(bench, "train/ar.tsv", 100.0, 600.0, 90.0)
    record = compute_report(smoke, bench, tmp_path / "compute.md", tmp_path / "compute.json")
    assert record["total_cpu_hours"] == pytest.approx(90.0 / 3600)
    assert record["cpu_within_gate"] is (smoke.compute_gate.cpu_hours >= 90.0 / 3600)
    assert record["within_gate"] is None  # no GPU seconds were measured: the GPU part is unverified
    assert json.loads((tmp_path / "compute.json").read_text()) == record
    assert "| train | 1 | 100.0 | 90.0 |" in (tmp_path / "compute.md").read_text()
    _bench(bench, "probe/c1/s1.tsv", 1.0, 1.0, 3600.0 * smoke.compute_gate.cpu_hours)
    over = compute_report(smoke, bench, tmp_path / "compute.md", tmp_path / "compute.json")
    assert over["within_gate"] is False
    assert "OVER the gate" in (tmp_path / "compute.md").read_text()


def test_estimate_scales_the_oracle_cost_per_episode_to_every_rollout_stage(tmp_path: Path, smoke) -> None:
    per_episode = 0.5
    _bench(tmp_path, "parallel_oracle.tsv", 9.0, 1.0, 2 * oracle_episodes(smoke) * per_episode)
    estimate = estimate_run(smoke, tmp_path)
    assert estimate["cpu_s_per_episode"] == pytest.approx(per_episode)
    episodes = run_episodes(smoke)
    assert episodes["probe"] == len(smoke.enabled_cells) * len(smoke.seeds) * smoke.group_size
    assert estimate["estimated_cpu_s"]["probe"] == pytest.approx(episodes["probe"] * per_episode)


def test_estimate_before_the_oracle_ran_says_what_to_run(tmp_path: Path, smoke) -> None:
    _bench(tmp_path, "demos.tsv", 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="--until parallel_oracle"):
        estimate_run(smoke, tmp_path)


def test_estimate_prices_the_registered_phase2_pilot_per_head(tmp_path: Path, smoke) -> None:
    per_episode = 0.5
    _bench(tmp_path, "parallel_oracle.tsv", 9.0, 1.0, 2 * oracle_episodes(smoke) * per_episode)
    phase2 = smoke.phase2
    episodes = phase2.iterations * phase2.seeds_per_iteration * phase2.rollouts_per_seed
    held_out = 2 * len(phase2.eval_seeds)
    before = estimate_run(smoke, tmp_path)["phase2"]
    assert before["gate_cpu_hours"] == phase2.cpu_hours
    for head in ("ar", "flow"):
        priced = before["heads"][head]
        assert (priced["train_episodes"], priced["eval_episodes"]) == (episodes, held_out)
        assert priced["rollout_cpu_s"] == pytest.approx((episodes + held_out) * per_episode)
        assert priced["update_cpu_s"] is None  # no phase-2 run yet: a lower bound, and it says so
    _bench(tmp_path, "phase2_train/flow_teacher.tsv", 5.0, 1.0, 42.0)
    after = estimate_run(smoke, tmp_path)
    assert after["phase2"]["heads"]["flow"]["update_cpu_s"] == pytest.approx(42.0)
    assert after["phase2"]["heads"]["ar"]["update_cpu_s"] is None
    text = format_estimate(after)
    assert "GRPO updates 42.0 CPU-s (measured)" in text and "a lower bound" in text
