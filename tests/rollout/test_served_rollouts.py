"""A served checkpoint gives the rollout rows of the same checkpoint in process, byte for byte.

The server is ``grpo-probe serve`` in a process of its own (the project's interpreter, this package's
checkpoint loaded there); the rows are compared on the sequential path and on two rollout workers, each
of which opens its own connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grpo_probe.cli import main
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.rollout import PolicySource, RolloutPool, group_table, run_sequential
from grpo_probe.rollout.table import table_bytes
from serve_processes import serve_checkpoint

from .rollout_cases import make_job

STOCHASTIC = {"ar": SamplingMode("temperature", temperature=1.6), "flow": SamplingMode("flow_sde", sde_a=0.5)}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def served(real_checkpoints: dict, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Both tiny checkpoints served by ``grpo-probe serve``: head -> address."""
    logs = tmp_path_factory.mktemp("servers")
    with (
        serve_checkpoint(real_checkpoints["ar"], logs / "ar.log") as ar,
        serve_checkpoint(real_checkpoints["flow"], logs / "flow.log") as flow,
    ):
        yield {"ar": ar, "flow": flow}


@pytest.mark.parametrize("head", ["ar", "flow"])
def test_served_rows_are_the_in_process_rows_sequential_and_on_two_workers(
    served: dict[str, str], real_checkpoints: dict, pool: RolloutPool, head: str
) -> None:
    mode = STOCHASTIC[head]
    local = make_job(PolicySource(checkpoint=str(real_checkpoints[head])), mode, seeds=(3, 4), group_size=2)
    remote = local.replace(source=PolicySource(address=served[head], timeout_s=60))
    expected = table_bytes(group_table(local, run_sequential(local)))
    assert table_bytes(group_table(remote, run_sequential(remote))) == expected
    assert table_bytes(group_table(remote, pool.run(remote, envs_per_worker=2))) == expected  # 2 workers


def test_check_policy_checks_an_arm_bound_to_a_server(
    served: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``grpo-probe check-policy`` builds the served arm from a run config and checks it over the wire."""
    config = tmp_path / "served.yaml"
    config.write_text(f"arms:\n  ar: {{source: server, address: '{served['ar']}', timeout_s: 60}}\n")
    monkeypatch.chdir(REPO)
    code = main(["check-policy", "--prereg", "prereg/smoke.yaml", "--arm", "ar", "--configfile", str(config)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"the policy served at {served['ar']}" in out
    assert "FAIL" not in out


def test_check_policy_names_an_arm_whose_server_is_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "down.yaml"
    config.write_text("arms:\n  ar: {source: server, address: 'ws://127.0.0.1:9'}\n")
    monkeypatch.chdir(REPO)
    code = main(["check-policy", "--prereg", "prereg/smoke.yaml", "--arm", "ar", "--configfile", str(config)])
    assert code == 2
    assert "policy server ws://127.0.0.1:9: connection refused" in capsys.readouterr().err
