"""The work behind the rules, called directly: what a rule refuses before it writes anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe import probe_jobs as steps
from grpo_probe.prereg import load_prereg, lock_prereg

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def pinned_smoke(tmp_path: Path) -> Path:
    """The smoke design with arm ar pinned to a checkpoint hash that no file has."""
    path = tmp_path / "smoke.yaml"
    text = (REPO / "prereg" / "smoke.yaml").read_text()
    head, sep, tail = text.partition("  ar:\n")
    assert sep, "smoke.yaml registers arm ar"
    pinned = tail.replace("checkpoint_sha256: null", "checkpoint_sha256: " + "ab" * 32, 1)
    path.write_text(head + sep + pinned)
    lock_prereg(path)
    return path


def test_a_bound_checkpoint_must_match_the_pinned_sha256(pinned_smoke: Path, tmp_path: Path) -> None:
    checkpoint = tmp_path / "er60k.pt"
    checkpoint.write_bytes(b"not the pinned bytes")
    source, manifest = tmp_path / "out" / "source.json", tmp_path / "out" / "arm.manifest.json"
    with pytest.raises(
        ValueError, match=r"er60k\.pt: sha256 [0-9a-f]{64} differs from arms\.ar\.checkpoint_sha256"
    ):
        steps.bind_checkpoint(pinned_smoke, "ar", checkpoint, None, [], source, manifest)
    assert not source.exists() and not manifest.exists()


def test_a_shard_of_unregistered_seeds_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "shard.parquet"
    with pytest.raises(ValueError, match=r"shard seeds \[5\] are not registered seeds"):
        steps.probe_shard(
            REPO / "prereg" / "smoke.yaml",
            "c1_ar_t1_0",
            [5],
            tmp_path / "source.json",
            [],
            table,
            tmp_path / "shard.manifest.json",
            workers=0,
        )
    assert not table.exists()


def test_rollout_jobs_carry_the_arms_registered_row_block_inputs_and_observation() -> None:
    from grpo_probe.probe_jobs import _group_job
    from grpo_probe.rollout import PolicySource
    from grpo_probe.sampling import SamplingMode

    probe = load_prereg(REPO / "prereg/grpo_signal_probe.yaml")
    own = PolicySource(checkpoint="policy.pt")
    ar = _group_job(probe, "ar", "c1", own, SamplingMode("greedy"), (1000,), 8)
    assert (ar.source.row_block, ar.envs_per_worker) == (20, 20)
    flow = _group_job(probe, "flow_teacher", "c3", own, SamplingMode("flow_ode", steps=10), (1000,), 8)
    assert (flow.source.row_block, flow.envs_per_worker) == (None, None)
    adapter = PolicySource(checkpoint="mine.pt", factory="my_lab.adapters:load")
    assert _group_job(probe, "ar", "c1", adapter, SamplingMode("greedy"), (1000,), 8).source.row_block is None

    vision = load_prereg(REPO / "prereg/vision_smoke.yaml")
    job = _group_job(vision, "flow_vision", "c1", own, SamplingMode("flow_ode", steps=10), (1000,), 2)
    assert job.observation == vision.observation and job.inputs == vision.arms["flow_vision"].inputs


def test_a_bound_policy_that_breaks_the_act_contract_is_refused_before_any_episode(tmp_path: Path) -> None:
    from grpo_probe.policies.check import PolicyContractError

    from .envs.user_envs import factory_name, load_global_rng_policy

    checkpoint = tmp_path / "lab.pt"
    checkpoint.write_bytes(b"the adapter reads nothing")
    source, manifest = tmp_path / "out" / "source.json", tmp_path / "out" / "arm.manifest.json"
    adapter = factory_name(load_global_rng_policy)
    with pytest.raises(PolicyContractError, match=r"global-rng") as refused:
        steps.bind_checkpoint(
            REPO / "prereg/smoke.yaml", "flow_teacher", checkpoint, adapter, [], source, manifest
        )
    assert "FAIL" in str(refused.value)
    assert not source.exists() and not manifest.exists()
