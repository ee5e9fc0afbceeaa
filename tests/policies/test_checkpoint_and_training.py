"""Checkpoints: reproducible training bytes, and errors that name the file and the problem."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

from grpo_probe.policies import Policy, load_policy
from grpo_probe.policies.checkpoint import file_sha256, read_checkpoint
from grpo_probe.policies.models import ARTrainConfig, FlowTrainConfig
from grpo_probe.policies.synthetic_demos import SyntheticDemos, synthetic_demos
from grpo_probe.policies.train import head_config, train_ar, train_arm, train_flow
from grpo_probe.prereg import load_prereg

from .conftest import TINY_AR, TINY_FLOW


def test_training_twice_gives_the_same_checkpoint_sha256(
    tmp_path: Path, demos: SyntheticDemos, ar_checkpoint: Path, flow_checkpoint: Path
) -> None:
    assert train_ar(demos, TINY_AR, tmp_path / "ar.pt") == file_sha256(ar_checkpoint)
    assert train_flow(demos, TINY_FLOW, tmp_path / "flow.pt") == file_sha256(flow_checkpoint)


def test_a_different_seed_gives_a_different_checkpoint(
    tmp_path: Path, demos: SyntheticDemos, flow_checkpoint: Path
) -> None:
    other = FlowTrainConfig.from_dict({**TINY_FLOW.to_dict(), "seed": 1})
    assert train_flow(demos, other, tmp_path / "flow.pt") != file_sha256(flow_checkpoint)


def test_loaded_heads_implement_the_policy_protocol(ar_checkpoint: Path, flow_checkpoint: Path) -> None:
    for path, head in ((ar_checkpoint, "ar"), (flow_checkpoint, "flow")):
        policy = load_policy(path)
        assert isinstance(policy, Policy)
        assert policy.head == head
        assert policy.obs_dim == 17


def test_missing_checkpoint_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"nope\.pt: checkpoint file does not exist"):
        load_policy(tmp_path / "nope.pt")


def test_truncated_checkpoint_names_the_file(tmp_path: Path, ar_checkpoint: Path) -> None:
    bad = tmp_path / "truncated.pt"
    bad.write_bytes(ar_checkpoint.read_bytes()[:5000])
    with pytest.raises(ValueError, match=r"truncated\.pt: not a readable checkpoint"):
        load_policy(bad)


def test_corrupted_weights_are_detected_by_the_content_hash(tmp_path: Path, flow_checkpoint: Path) -> None:
    payload = torch.load(flow_checkpoint, weights_only=True)
    name = next(iter(payload["state_dict"]))
    payload["state_dict"][name] = payload["state_dict"][name] + 1e-3
    bad = tmp_path / "edited.pt"
    torch.save(payload, bad)
    with pytest.raises(ValueError, match=r"edited\.pt: checkpoint is corrupted"):
        load_policy(bad)


def test_incomplete_checkpoint_names_the_missing_field(tmp_path: Path, ar_checkpoint: Path) -> None:
    payload = torch.load(ar_checkpoint, weights_only=True)
    del payload["tokenizer_json"]
    bad = tmp_path / "incomplete.pt"
    torch.save(payload, bad)
    with pytest.raises(ValueError, match=r"incomplete\.pt: checkpoint is incomplete, missing tokenizer_json"):
        load_policy(bad)


def test_wrong_kind_names_both_kinds(flow_checkpoint: Path) -> None:
    with pytest.raises(ValueError, match=r"flow\.pt: checkpoint kind is 'flow', expected 'ar'"):
        read_checkpoint(flow_checkpoint, expected_kind="ar")


def test_a_foreign_torch_file_is_not_a_checkpoint(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    torch.save({"weights": torch.zeros(3)}, buffer)
    bad = tmp_path / "foreign.pt"
    bad.write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match=r"foreign\.pt: not a grpo-probe policy checkpoint"):
        load_policy(bad)


def test_config_from_dict_rejects_unknown_and_mistyped_fields() -> None:
    with pytest.raises(ValueError, match=r"arms\.ar\.train: unknown field 'stpes'"):
        ARTrainConfig.from_dict({"stpes": 10}, where="arms.ar.train")
    with pytest.raises(ValueError, match=r"cfg\.steps must be an integer"):
        FlowTrainConfig.from_dict({"steps": 1.5}, where="cfg")
    with pytest.raises(ValueError, match=r"cfg\.lr must be > 0"):
        FlowTrainConfig.from_dict({"lr": 0}, where="cfg")
    assert ARTrainConfig.from_dict({"lr": 1}).lr == 1.0


def test_registered_short_flow_arm_is_a_twentieth_of_the_teacher_budget() -> None:
    design = load_prereg(Path(__file__).resolve().parents[2] / "prereg/grpo_signal_probe.yaml")
    teacher = head_config("flow", design.training.arms["flow_teacher"])
    short = head_config("flow", design.training.arms["flow_short"])
    assert short.steps * 20 == teacher.steps
    with pytest.raises(ValueError, match=r"p\.yaml: training\.arms\.x: unknown head 'diffusion'"):
        head_config("diffusion", where="p.yaml: training.arms.x")


def test_demos_of_another_chunk_shape_than_the_registered_one_are_refused(tmp_path: Path) -> None:
    demos = synthetic_demos(8)
    with pytest.raises(ValueError, match=r"demo chunks have shape \(50, 6\), but the environment's"):
        train_arm("flow", demos, tmp_path / "f.ckpt", {"steps": 1}, chunk_shape=(40, 6))
