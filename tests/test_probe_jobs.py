"""The work behind the rules, called directly: what a rule refuses before it writes anything."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies import PolicyCapabilities, PolicyOutput, RowDiagnostics, RowKey, SamplingMode
from grpo_probe.prereg import load_prereg, lock_prereg
from grpo_probe.probe_jobs.binding import bind_checkpoint, bind_server
from grpo_probe.probe_jobs.rollouts import probe_shard

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
        bind_checkpoint(pinned_smoke, "ar", checkpoint, None, [], source, manifest)
    assert not source.exists() and not manifest.exists()


def test_a_shard_of_unregistered_seeds_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "shard.parquet"
    with pytest.raises(ValueError, match=r"shard seeds \[5\] are not registered seeds"):
        probe_shard(
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
    from grpo_probe.probe_jobs.sources import group_job
    from grpo_probe.rollout import PolicySource
    from grpo_probe.sampling import SamplingMode

    probe = load_prereg(REPO / "prereg/grpo_signal_probe.yaml")
    own = PolicySource(checkpoint="policy.pt")
    ar = group_job(probe, "ar", "c1", own, SamplingMode("greedy"), (1000,), 8)
    assert (ar.source.row_block, ar.envs_per_worker) == (20, 20)
    flow = group_job(probe, "flow_teacher", "c3", own, SamplingMode("flow_ode", steps=10), (1000,), 8)
    assert (flow.source.row_block, flow.envs_per_worker) == (None, None)
    adapter = PolicySource(checkpoint="mine.pt", factory="my_lab.adapters:load")
    assert group_job(probe, "ar", "c1", adapter, SamplingMode("greedy"), (1000,), 8).source.row_block is None

    vision = load_prereg(REPO / "prereg/designs/smoke/vision_smoke.yaml")
    job = group_job(vision, "flow_vision", "c1", own, SamplingMode("flow_ode", steps=10), (1000,), 2)
    assert job.observation == vision.observation and job.inputs == vision.arms["flow_vision"].inputs


def test_a_bound_policy_that_breaks_the_act_contract_is_refused_before_any_episode(tmp_path: Path) -> None:
    from grpo_probe.policies.check import PolicyContractError

    from .envs.user_envs import factory_name, load_global_rng_policy

    checkpoint = tmp_path / "lab.pt"
    checkpoint.write_bytes(b"the adapter reads nothing")
    source, manifest = tmp_path / "out" / "source.json", tmp_path / "out" / "arm.manifest.json"
    adapter = factory_name(load_global_rng_policy)
    with pytest.raises(PolicyContractError, match=r"global-rng") as refused:
        bind_checkpoint(REPO / "prereg/smoke.yaml", "flow_teacher", checkpoint, adapter, [], source, manifest)
    assert "FAIL" in str(refused.value)
    assert not source.exists() and not manifest.exists()


class OdeOnlyFlow:
    """A lab's flow adapter that samples the ODE only, and declares just that: keyed noise, row by row."""

    head = "flow"
    obs_dim = 17
    capabilities = PolicyCapabilities(("flow_ode",))

    def act(self, obs: np.ndarray, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        if mode.kind not in self.capabilities.kinds:
            raise ValueError(f"{type(self).__name__} does not sample {mode.kind!r}")
        actions, diagnostics = [], []
        for row, k in enumerate(keys):
            noise = numpy_generator(k.run_key, tag("lab_flow"), k.seed, k.replan, k.draw)
            chunk = np.tanh(0.05 * float(obs[row].sum()) + 0.5 * noise.standard_normal((50, 6)))
            if mode.kind == "flow_sde" and mode.sde_a:
                eps = numpy_generator(k.run_key, tag("lab_sde"), k.seed, k.replan, k.draw)
                steps = eps.standard_normal((mode.steps, 50, 6))
                chunk = np.tanh(np.arctanh(chunk) + mode.sde_a / np.sqrt(mode.steps) * steps.sum(axis=0))
                step_logprobs = np.sum(-0.5 * steps**2 - 0.5 * np.log(2 * np.pi), axis=(1, 2))
                diagnostics.append(RowDiagnostics(float(step_logprobs.sum()), step_logprobs=step_logprobs))
            else:
                diagnostics.append(RowDiagnostics(logprob=None))
            actions.append(chunk)
        return PolicyOutput(np.asarray(actions, dtype=np.float32), diagnostics)


class TrainableOnPaper(OdeOnlyFlow):
    """Every flow kind, per-step log-probs and trainable parameters: all phase 2 asks, in another format."""

    capabilities = PolicyCapabilities(("flow_ode", "flow_sde", "flow_euler"), "per_step", trainable=True)


def load_ode_only(checkpoint: str, device: str = "cpu") -> OdeOnlyFlow:
    """An adapter factory (``checkpoint`` is ignored)."""
    del checkpoint, device
    return OdeOnlyFlow()


def load_trainable_on_paper(checkpoint: str, device: str = "cpu") -> TrainableOnPaper:
    del checkpoint, device
    return TrainableOnPaper()


def test_an_adapter_that_cannot_sample_what_a_cell_needs_is_refused_before_any_episode(
    tmp_path: Path,
) -> None:
    """The registered design runs its flow teacher in an SDE cell (c5); an ODE-only adapter is refused
    when it is bound, naming the arm, the adapter's class, the kind and every cell and oracle needing it."""
    from grpo_probe.policies.check import PolicyContractError

    from .envs.user_envs import factory_name

    checkpoint = tmp_path / "lab.pt"
    checkpoint.write_bytes(b"the adapter reads nothing")
    out = tmp_path / "out"
    source, manifest = out / "source.json", out / "arm.manifest.json"
    with pytest.raises(PolicyContractError) as refused:
        bind_checkpoint(
            REPO / "prereg/grpo_signal_probe.yaml",
            "flow_teacher",
            checkpoint,
            factory_name(load_ode_only),
            [],
            source,
            manifest,
        )
    message = str(refused.value)
    assert "check-policy: arm 'flow_teacher' of" in message
    expected = (
        f"[capability-missing] arm 'flow_teacher' needs sampling kind 'flow_sde', which "
        f"{OdeOnlyFlow.__module__}:OdeOnlyFlow does not declare (it declares flow_ode): cell "
        "c5_teacher_sde_a0_5, the parallel oracle samples flow_sde(a=0.5, steps=10); the draw-0 oracle of "
        "c5_teacher_sde_a0_5 samples flow_sde(a=0.0, steps=10)"
    )
    assert expected in message, message
    assert "[capability-missing] arm 'flow_teacher' needs sampling kind 'flow_euler'" in message
    assert "[act-error]" not in message  # an undeclared kind is never sampled
    assert not source.exists() and not manifest.exists()  # the probe's rollouts read source.json
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["lab.pt"]  # no episode table


def test_a_bound_adapter_records_its_declaration_and_phase_two_refuses_what_it_cannot_train(
    tmp_path: Path,
) -> None:
    """The smoke design asks only flow_ode of its flow teacher, so the ODE-only adapter binds; phase 2,
    which needs trainable parameters and per-step log-probs, refuses it before its first rollout."""
    from grpo_probe.phase2 import pilot_jobs

    from .envs.user_envs import factory_name

    smoke = REPO / "prereg/smoke.yaml"
    checkpoint = tmp_path / "lab.pt"
    checkpoint.write_bytes(b"the adapter reads nothing")
    decision = tmp_path / "decision.json"
    outcome = {"kind": "phase2_flow", "ar_arm": None, "flow_arm": "flow_teacher", "headline": "flow"}
    decision.write_text(json.dumps({"outcome": outcome}))
    plan, plan_manifest = tmp_path / "phase2" / "plan.json", tmp_path / "phase2" / "plan.manifest.json"
    pilot_jobs.phase2_plan(smoke, decision, [], plan, plan_manifest)

    for factory, lacking in [
        (
            load_ode_only,
            "which lacks what phase 2 needs to train a flow arm: per-step log-probs of the SDE sampler "
            "(capabilities.logprobs 'per_step'), trainable parameters (capabilities.trainable); phase 2 "
            "does not start",
        ),
        (
            load_trainable_on_paper,
            "which declares trainable parameters and per_step log-probs, but phase 2's trainer reads and "
            "writes only checkpoints in grpo-probe's own format",
        ),
    ]:
        adapter = factory_name(factory)
        bound = tmp_path / factory.__name__
        source, manifest = bound / "source.json", bound / "arm.manifest.json"
        bind_checkpoint(smoke, "flow_teacher", checkpoint, adapter, [], source, manifest)
        policy = factory(str(checkpoint))
        recorded = json.loads(source.read_text())
        assert recorded["policy"] == f"{type(policy).__module__}:{type(policy).__qualname__}"
        assert recorded["capabilities"] == policy.capabilities.to_dict()
        assert json.loads(manifest.read_text())["extra"]["capabilities"] == recorded["capabilities"]

        table = bound / "iteration_000.parquet"
        with pytest.raises(ValueError) as refused:
            pilot_jobs.phase2_rollouts(
                smoke,
                plan,
                "flow_teacher",
                source,
                checkpoint,
                [plan_manifest],
                table,
                bound / "replay_oracle.json",
                bound / "m.json",
                0,
            )
        message = str(refused.value)
        assert message.startswith(f"{source}: arm 'flow_teacher' is bound through adapter {adapter} to ")
        assert f"{recorded['policy']}, {lacking}" in message, message
        assert not table.exists()


@pytest.mark.parametrize(
    ("metadata", "found"),
    [
        ({}, r"arms\.ar\.checkpoint_sha256 is pinned in .*, but the server declares no checkpoint_sha256"),
        ({"checkpoint_sha256": "cd" * 32}, r"policy server ws://\S+: sha256 (cd)+ differs from arms\.ar"),
    ],
    ids=["declares none", "declares another"],
)
def test_a_served_arm_must_declare_the_pinned_sha256(
    pinned_smoke: Path, tmp_path: Path, metadata: dict, found: str
) -> None:
    """The probe cannot read a served checkpoint: a pinned design needs the server's word for its hash."""
    from grpo_probe.serve import PolicyServer
    from serve.numpy_policy import NumpyFlowPolicy

    source, manifest = tmp_path / "out" / "source.json", tmp_path / "out" / "arm.manifest.json"
    with (
        PolicyServer(NumpyFlowPolicy(), "127.0.0.1", 0, metadata=metadata) as server,
        pytest.raises(ValueError, match=found),
    ):
        bind_server(pinned_smoke, "ar", server.address, [], source, manifest, timeout_s=10)
    assert not source.exists() and not manifest.exists()
