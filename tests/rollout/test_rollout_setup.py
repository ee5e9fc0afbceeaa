"""Policy sources and devices, the progress report, and the ``grpo-probe rollout`` command."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

from grpo_probe import cli
from grpo_probe.rollout import PolicySource, read_rollout_table, resolve_device
from grpo_probe.rollout.progress import RolloutProgress
from grpo_probe.rollout.rollout_command import parse_seeds

from .keyed_test_policies import factory_name, make_ar_policy, make_flow_policy


def test_cpu_is_the_default_device_and_needs_nothing() -> None:
    assert PolicySource(factory="m:f").device == "cpu"
    assert resolve_device("cpu") == "cpu"


def test_cuda_request_on_a_machine_without_cuda_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="'cuda' was requested but CUDA is not available"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="'cuda:1' was requested but CUDA is not available"):
        PolicySource(factory=factory_name(make_ar_policy), device="cuda:1").build()


def test_cuda_index_beyond_the_devices_present_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("cuda:0") == "cuda:0"
    with pytest.raises(ValueError, match="has 1 CUDA device"):
        resolve_device("cuda:3")


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "CPU"])
def test_unknown_device_names_are_rejected(device: str) -> None:
    with pytest.raises(ValueError, match="expected 'cpu', 'cuda'"):
        resolve_device(device)


def test_factory_receives_the_device_and_options() -> None:
    policy = PolicySource(factory=factory_name(make_flow_policy), options={"kill_at": (9, 9)}).build()
    assert policy.head == "flow" and policy.kill_at == (9, 9)


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("no_colon_here", "must look like 'package.module:function'"),
        ("grpo_probe.no_such_module:f", "cannot import module 'grpo_probe.no_such_module'"),
        ("grpo_probe.keyed_rng:no_such_function", "has no callable 'no_such_function'"),
    ],
)
def test_bad_factories_are_errors_naming_the_factory(factory: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PolicySource(factory=factory).build()


def test_missing_checkpoint_is_an_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.ckpt: policy checkpoint not found"):
        PolicySource(checkpoint=str(tmp_path / "nope.ckpt")).build()


def test_progress_writes_plain_lines_when_the_stream_is_not_a_terminal() -> None:
    stream = io.StringIO()
    progress = RolloutProgress(4, "cell_1/ar seeds 0-1", stream=stream, min_interval_s=3600)
    progress.update(2)
    progress.update(2)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2  # the first chunk, then the always-written final line
    assert lines[-1].startswith("cell_1/ar seeds 0-1: 4/4 episodes,") and "episodes/s" in lines[-1]
    assert "\r" not in stream.getvalue()


@pytest.mark.parametrize(
    ("text", "seeds"), [("0-3", (0, 1, 2, 3)), ("7", (7,)), ("0-1,5,9-10", (0, 1, 5, 9, 10))]
)
def test_seed_lists_parse_with_inclusive_ranges(text: str, seeds: tuple[int, ...]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a-3", "3-1", "0-2,2", "-4"])
def test_malformed_seed_lists_are_errors_naming_the_flag(text: str) -> None:
    with pytest.raises(ValueError, match="--seeds"):
        parse_seeds(text)


def _sim_file(tmp_path: Path) -> Path:
    path = tmp_path / "sim.yaml"
    path.write_text("sim:\n  replans: 2\n  executed_actions: 10\n")
    return path


def test_rollout_command_writes_k_draws_per_seed_at_the_requested_temperature(tmp_path: Path) -> None:
    out = tmp_path / "group.parquet"
    argv = ["rollout", "--arm", "er", "--factory", factory_name(make_ar_policy), "--seeds", "3-4"]
    argv += ["--ar-temperature", "1.6", "--draws", "3", "--sim", str(_sim_file(tmp_path)), "--out", str(out)]
    assert cli.main(argv) == 0
    table = read_rollout_table(out)
    assert table["seed"].to_pylist() == [3, 3, 3, 4, 4, 4] and table["draw"].to_pylist() == [0, 1, 2] * 2
    assert set(table["mode"].to_pylist()) == {"temperature"} and set(table["temperature"].to_pylist()) == {
        1.6
    }
    assert set(table["cell"].to_pylist()) == {"adhoc"}


def test_rollout_command_without_a_sampling_flag_writes_anchor_rows(tmp_path: Path) -> None:
    out = tmp_path / "anchor.parquet"
    argv = ["rollout", "--arm", "teacher", "--factory", factory_name(make_flow_policy), "--seeds", "0"]
    assert cli.main([*argv, "--sim", str(_sim_file(tmp_path)), "--out", str(out)]) == 0
    row = read_rollout_table(out).to_pylist()[0]
    assert (row["cell"], row["mode"], row["draw"], row["sampler_steps"]) == ("anchor", "flow_ode", 0, 10)


def test_rollout_command_refuses_a_flow_flag_for_an_ar_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["rollout", "--arm", "er", "--factory", factory_name(make_ar_policy), "--seeds", "0"]
    out = tmp_path / "x.parquet"
    assert cli.main([*argv, "--flow-draws", "8", "--out", str(out)]) == 2
    assert "--flow-draws needs a flow policy" in capsys.readouterr().err
    assert not out.exists()
