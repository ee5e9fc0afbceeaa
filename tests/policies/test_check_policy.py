"""check_policy names each broken rule of the act() contract with its own code, and passes correct policies.

Each planted violation is a small policy that breaks one rule the oracles would otherwise catch only after a
rollout: rows that read the batch, noise from a global RNG, the noise-off switch ignored, a chunk of the
wrong width, AR rows without their log-probs, SDE rows without the step log-probs phase 2 divides by. The
correct ones are this package's reference heads (tiny, trained by this folder's conftest) and the worked
adapters in examples/. check_arm derives the checks from the smoke design and a run config binding. A
policy's declared capabilities decide what it is asked to sample: a kind the design needs that it does
not declare, and a declaration that is not true, are findings of their own.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies import PolicyCapabilities, PolicyOutput, RowDiagnostics, SamplingMode, load_policy
from grpo_probe.policies.check import FINDING_CODES, check_arm, check_policy, phase2_refusal
from grpo_probe.policies.checkpoint import OWN_FORMAT_CAPABILITIES
from grpo_probe.prereg import load_config, load_prereg

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # the worked adapters are imported as examples.<module>
    sys.path.append(str(REPO))

from examples.my_ar_adapter import load_my_ar  # noqa: E402
from examples.my_flow_adapter import load_my_flow  # noqa: E402

SMOKE = REPO / "prereg" / "smoke.yaml"
CHUNK = (50, 6)
GREEDY = SamplingMode("greedy")
T1 = SamplingMode("temperature", temperature=1.0)
ODE = SamplingMode("flow_ode", steps=10)
SDE = SamplingMode("flow_sde", sde_a=0.5, steps=10)
FLOW_KINDS = ("flow_ode", "flow_sde", "flow_euler")


class KeyedFlow:
    """A correct stand-in flow policy: each row from its observation and keyed noise; SDE step log-probs."""

    head = "flow"
    capabilities = PolicyCapabilities(FLOW_KINDS, logprobs="per_step")

    def __init__(self, obs_dim: int = 17, chunk: tuple[int, int] = CHUNK) -> None:
        self.obs_dim = obs_dim
        self.chunk = chunk
        self.weights = (
            numpy_generator(tag("keyed_flow")).standard_normal((obs_dim, chunk[0] * chunk[1])) * 0.2
        )

    def features(self, obs: np.ndarray) -> np.ndarray:
        return obs

    def initial_noise(self, keys: Any) -> np.ndarray:
        return np.stack(
            [
                numpy_generator(k.run_key, tag("flow_noise"), k.seed, k.replan, k.draw).standard_normal(
                    self.chunk
                )
                for k in keys
            ]
        )

    def act(self, obs: np.ndarray, keys: Any, mode: SamplingMode) -> PolicyOutput:
        if mode.kind not in ("flow_ode", "flow_euler", "flow_sde"):
            raise ValueError(f"KeyedFlow samples the flow kinds, got {mode.kind!r}")
        a = float(mode.sde_a or 0.0)
        features, noise = self.features(np.asarray(obs, dtype=np.float64)), self.initial_noise(keys)
        actions = np.zeros((len(keys), *self.chunk), dtype=np.float32)
        diagnostics = []
        for row, k in enumerate(keys):
            x = np.tanh(features[row] @ self.weights).reshape(self.chunk) + 0.3 * noise[row]
            step_logprobs = None
            if a > 0:
                steps = numpy_generator(k.run_key, tag("flow_sde_noise"), k.seed, k.replan, k.draw)
                eps = steps.standard_normal((mode.steps, *self.chunk))
                x = x + a / np.sqrt(mode.steps) * eps.sum(axis=0)
                step_logprobs = np.sum(-0.5 * eps**2 - 0.5 * np.log(2 * np.pi), axis=(1, 2))
            actions[row] = np.clip(x, -1.0, 1.0)
            logprob = None if step_logprobs is None else float(step_logprobs.sum())
            diagnostics.append(RowDiagnostics(logprob=logprob, step_logprobs=step_logprobs))
        return PolicyOutput(actions=actions, diagnostics=diagnostics)


class BatchStatistics(KeyedFlow):
    """Normalizes each observation by the batch's mean: a row's chunk depends on the other rows."""

    def features(self, obs: np.ndarray) -> np.ndarray:
        return obs - obs.mean(axis=0)


class GlobalNoise(KeyedFlow):
    """Draws its initial noise from torch's global RNG instead of the rows' keys."""

    def initial_noise(self, keys: Any) -> np.ndarray:
        return torch.randn((len(keys), *self.chunk), dtype=torch.float64).numpy()


class SevenDims(KeyedFlow):
    """Returns chunks of 7 action dims to an environment of 6."""

    def __init__(self) -> None:
        super().__init__(chunk=(50, 7))


class NoStepLogprobs(KeyedFlow):
    """Records an SDE chunk's summed log-prob but not the per-step log-probs phase 2 replays (and says so)."""

    capabilities = PolicyCapabilities(FLOW_KINDS)

    def act(self, obs: np.ndarray, keys: Any, mode: SamplingMode) -> PolicyOutput:
        out = super().act(obs, keys, mode)
        return PolicyOutput(
            out.actions, [dataclasses.replace(d, step_logprobs=None) for d in out.diagnostics]
        )


class Wrapped:
    """Another policy's head, obs_dim and act, with the mode or the output changed by a subclass."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.head, self.obs_dim = inner, inner.head, inner.obs_dim


class IgnoresNoiseOff(Wrapped):
    """Samples temperature with Gumbel noise even when mode.noise is off."""

    def act(self, obs: np.ndarray, keys: Any, mode: SamplingMode) -> PolicyOutput:
        return self.inner.act(
            obs, keys, dataclasses.replace(mode, noise=True) if mode.kind == "temperature" else mode
        )


class NoTokenLogprobs(Wrapped):
    """Records the AR rows' token ids but neither their log-probs nor their entropies."""

    def act(self, obs: np.ndarray, keys: Any, mode: SamplingMode) -> PolicyOutput:
        out = self.inner.act(obs, keys, mode)
        rows = [RowDiagnostics(logprob=d.logprob, token_ids=d.token_ids) for d in out.diagnostics]
        return PolicyOutput(out.actions, rows)


@pytest.fixture(scope="module")
def my_ar() -> Any:
    return load_my_ar()


VIOLATIONS = {
    "batch-dependent": (lambda: BatchStatistics(), [ODE], ()),
    "global-rng": (lambda: GlobalNoise(), [ODE], ()),
    "noise-off-differs": (lambda: IgnoresNoiseOff(load_my_ar()), [T1], ()),
    "action-shape": (lambda: SevenDims(), [ODE], ()),
    "ar-diagnostics": (lambda: NoTokenLogprobs(load_my_ar()), [GREEDY, T1], ()),
    "logprob-missing": (lambda: NoStepLogprobs(), [ODE, SDE], (SDE,)),
}


@pytest.mark.parametrize("code", list(VIOLATIONS))
def test_each_planted_violation_is_named_by_its_own_code(code: str) -> None:
    make, modes, trained = VIOLATIONS[code]
    report = check_policy(make(), action_shape=CHUNK, modes=modes, needs_logprobs=trained, run_key=7)
    assert not report.passed
    assert code in report.codes, report.format()
    finding = next(f for f in report.findings if f.code == code)
    assert finding.fix == FINDING_CODES[code]
    assert f"[{code}] {finding.message}" in report.format()
    expected_alongside = {"noise-off-differs": {"noise-off-keyed"}}  # the ignored switch breaks both rules
    assert report.codes <= {code} | expected_alongside.get(code, set()), report.format()


def test_the_planted_violations_have_distinct_messages() -> None:
    messages = {}
    for code, (make, modes, trained) in VIOLATIONS.items():
        report = check_policy(make(), action_shape=CHUNK, modes=modes, needs_logprobs=trained, run_key=7)
        messages[code] = next(f.message for f in report.findings if f.code == code)
    assert len(set(messages.values())) == len(messages)
    assert "6" in messages["action-shape"] and "7 action dims" in messages["action-shape"]
    assert "row" in messages["batch-dependent"]
    assert "no token_logprobs, entropy" in messages["ar-diagnostics"]
    assert "step_logprobs is None" in messages["logprob-missing"]


def test_a_wrongly_shaped_chunk_is_named_against_the_environment_it_runs_in() -> None:
    """Chunks follow the environment's spec: the pusher's 7 dims are right where the boat's 6 are wrong."""
    assert check_policy(SevenDims(), action_shape=(50, 7), modes=[ODE]).passed
    report = check_policy(KeyedFlow(), action_shape=(50, 7), modes=[ODE])
    assert report.codes == {"action-shape"}


def test_the_stand_in_flow_policy_passes_with_phase_two_log_probs() -> None:
    report = check_policy(KeyedFlow(), action_shape=CHUNK, modes=[ODE, SDE], needs_logprobs=[SDE], run_key=7)
    assert report.passed, report.format()
    names = [c.name for c in report.checks]
    assert "flow_sde(a=0.0, steps=10) equals flow_euler(steps=10)" in names
    assert "flow_sde(a=0.5, steps=10): log-probs for phase 2" in names


def test_the_worked_ar_adapter_passes(my_ar: Any) -> None:
    report = check_policy(my_ar, action_shape=CHUNK, modes=[GREEDY, T1], obs_dim=17, head="ar", run_key=7)
    assert report.passed, report.format()
    assert not [c for c in report.checks if c.status == "skip"], report.format()
    assert "temperature(T=1.0, noise off) equals greedy" in [c.name for c in report.checks]


def test_the_reference_heads_and_the_worked_flow_adapter_pass(
    ar_checkpoint: Path, flow_checkpoint: Path
) -> None:
    ar = check_policy(
        load_policy(ar_checkpoint), action_shape=CHUNK, modes=[GREEDY, T1], needs_logprobs=[T1], run_key=7
    )
    assert ar.passed, ar.format()
    flow = check_policy(
        load_policy(flow_checkpoint), action_shape=CHUNK, modes=[ODE, SDE], needs_logprobs=[SDE], run_key=7
    )
    assert flow.passed, flow.format()
    adapter = check_policy(load_my_flow(flow_checkpoint), action_shape=CHUNK, modes=[ODE], run_key=7)
    assert adapter.passed, adapter.format()
    refused = check_policy(load_my_flow(flow_checkpoint), action_shape=CHUNK, modes=[SDE], run_key=7)
    assert refused.codes == {"capability-missing"}, refused.format()
    message = refused.findings[0].message
    assert "kind 'flow_sde', which examples.my_flow_adapter:MyFlowAdapter does not declare" in message
    assert "(it declares flow_ode)" in message
    sampled = [c.name for c in refused.checks]
    assert not any(name.startswith("flow_sde") for name in sampled), refused.format()  # never asked


def test_the_package_heads_declare_every_kind_of_their_head_and_pass_on_each(
    ar_checkpoint: Path, flow_checkpoint: Path
) -> None:
    """A checkpoint's heads declare all their kinds: the check samples those the caller does not ask for."""
    ar, flow = load_policy(ar_checkpoint), load_policy(flow_checkpoint)
    assert (
        ar.capabilities
        == OWN_FORMAT_CAPABILITIES["ar"]
        == PolicyCapabilities(("greedy", "temperature"), "per_token", trainable=True)
    )
    assert flow.capabilities == PolicyCapabilities(FLOW_KINDS, "per_step", trainable=True)
    report = check_policy(flow, action_shape=CHUNK, modes=[ODE], run_key=7)
    assert report.passed, report.format()
    names = [c.name for c in report.checks]
    for extra in ("flow_sde(a=0.5, steps=10): output", "flow_euler(steps=10): output"):
        assert extra in names, report.format()
    assert next(c for c in report.checks if c.name == "declared per_step log-probs").status == "ok"
    capabilities = next(c for c in report.checks if c.name == "declared capabilities")
    assert capabilities.detail.endswith(
        "FlowPolicy samples flow_ode, flow_sde, flow_euler; per-step log-probs of the SDE sampler; "
        "trainable parameters"
    )
    ar_report = check_policy(ar, action_shape=CHUNK, modes=[GREEDY], run_key=7)
    assert ar_report.passed, ar_report.format()
    assert "temperature(T=1.0): output" in [c.name for c in ar_report.checks]


class SdeOnPaper(KeyedFlow):
    """Declares flow_sde, but its act raises for it: the declaration is false."""

    def act(self, obs: np.ndarray, keys: Any, mode: SamplingMode) -> PolicyOutput:
        if mode.kind == "flow_sde":
            raise ValueError("the SDE sampler is not implemented yet")
        return super().act(obs, keys, mode)


class ClaimsStepLogprobs(NoStepLogprobs):
    """Declares per-step log-probs but records none."""

    capabilities = PolicyCapabilities(FLOW_KINDS, logprobs="per_step")


class Undeclared(KeyedFlow):
    capabilities = None


def test_a_declared_kind_that_fails_to_sample_is_a_false_capability() -> None:
    """Also when the design does not run that kind: the declaration is what a binding is judged by."""
    unused = check_policy(SdeOnPaper(), action_shape=CHUNK, modes=[ODE], run_key=7)
    assert unused.codes == {"capability-false"}, unused.format()
    finding = unused.findings[0]
    assert finding.mode == "flow_sde(a=0.5, steps=10)" and finding.fix == FINDING_CODES["capability-false"]
    assert "the SDE sampler is not implemented yet, though the policy declares kind 'flow_sde'" in (
        finding.message
    )
    used = check_policy(SdeOnPaper(), action_shape=CHUNK, modes=[SDE], run_key=7)
    assert "capability-false" in used.codes and "act-error" not in used.codes, used.format()
    undeclared = check_policy(Undeclared(), action_shape=CHUNK, modes=[ODE], run_key=7)
    assert undeclared.passed, undeclared.format()  # nothing declared: only the modes asked for are sampled
    assert not any(c.name.startswith("flow_sde") for c in undeclared.checks)
    detail = next(c for c in undeclared.checks if c.name == "declared capabilities").detail
    assert "declares none: taken to sample every kind of the flow head" in detail


def test_declared_log_probs_that_are_not_recorded_are_a_false_capability() -> None:
    report = check_policy(ClaimsStepLogprobs(), action_shape=CHUNK, modes=[ODE, SDE], run_key=7)
    assert report.codes == {"capability-false"}, report.format()
    assert "declares per_step log-probs, but row 0: step_logprobs is None" in report.findings[0].message
    honest = check_policy(NoStepLogprobs(), action_shape=CHUNK, modes=[ODE, SDE], run_key=7)
    assert honest.passed, honest.format()


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ("flow_ode", "capabilities is a str, not a grpo_probe.policies.PolicyCapabilities"),
        (PolicyCapabilities(("greedy",)), "declares kinds of the ar head (greedy), but the policy's head is"),
    ],
)
def test_a_malformed_declaration_is_named(declared: Any, message: str) -> None:
    policy = Undeclared()
    policy.capabilities = declared  # type: ignore[assignment]
    report = check_policy(policy, action_shape=CHUNK, modes=[ODE], run_key=7)
    assert report.codes == {"capabilities"}, report.format()
    assert message in report.findings[0].message


def test_the_check_leaves_the_global_rngs_as_it_found_them() -> None:
    random.seed(3)
    np.random.seed(3)  # noqa: NPY002 - the global state under test
    torch.manual_seed(3)
    before = (random.random(), np.random.random(), torch.rand(1).item())  # noqa: NPY002
    random.seed(3)
    np.random.seed(3)  # noqa: NPY002
    torch.manual_seed(3)
    check_policy(GlobalNoise(), action_shape=CHUNK, modes=[ODE])
    assert (random.random(), np.random.random(), torch.rand(1).item()) == before  # noqa: NPY002


def _smoke_binding(tmp_path: Path, arms: dict[str, Any]) -> Any:
    return load_config({"prereg": str(SMOKE), "results": str(tmp_path / "results"), "arms": arms})


def test_check_arm_reads_the_modes_the_design_runs(
    tmp_path: Path, ar_checkpoint: Path, flow_checkpoint: Path
) -> None:
    prereg = load_prereg(SMOKE)
    config = _smoke_binding(
        tmp_path,
        {
            "ar": {
                "source": "checkpoint",
                "path": str(ar_checkpoint),
                "adapter": "grpo_probe.policies.checkpoint:load_policy",
            },
            "flow_teacher": {
                "source": "checkpoint",
                "path": str(flow_checkpoint),
                "adapter": "examples.my_flow_adapter:load_my_flow",
            },
        },
    )
    ar = check_arm(prereg, config, "ar")
    assert ar.passed, ar.format()
    names = [c.name for c in ar.checks]
    for expected in (
        "greedy: output",  # the anchor
        "temperature(T=1.0): output",  # cell c1 and the parallel oracle
        "temperature(T=1.0, noise off) equals greedy",  # c1's draw-0 oracle
        "temperature(T=1.6): log-probs for phase 2",  # the smoke design's phase-2 AR mode
    ):
        assert expected in names, ar.format()
    output = next(c for c in ar.checks if c.name == "temperature(T=1.0): output")
    assert output.detail.endswith("for cell c1_ar_t1_0, the parallel oracle")
    phase2 = next(c for c in ar.checks if c.name == "phase 2")
    assert phase2.status == "ok"
    assert phase2.detail == "phase 2 can train this checkpoint under temperature(T=1.6)"
    flow = check_arm(prereg, config, "flow_teacher")
    assert flow.passed, flow.format()
    assert not any("log-probs for phase 2" in c.name for c in flow.checks)  # phase 2 trains no adapter's
    assert "environment 'boat_push': actions [B, 50, 6]" in flow.subject
    note = flow.checks[-1]  # phase 2 refuses the arm when it starts; binding it for the probe is fine
    assert (note.name, note.status) == ("phase 2", "skip")
    assert note.detail == (
        "phase 2 will refuse to train it: arm 'flow_teacher' is bound through adapter "
        "examples.my_flow_adapter:load_my_flow to examples.my_flow_adapter:MyFlowAdapter, which lacks what "
        "phase 2 needs to train a flow arm: per-step log-probs of the SDE sampler (capabilities.logprobs "
        "'per_step'), trainable parameters (capabilities.trainable)"
    )


def test_phase_two_refuses_by_capability_and_then_by_format() -> None:
    full = PolicyCapabilities(FLOW_KINDS, "per_step", trainable=True)
    own = "grpo_probe.policies.checkpoint:load_policy"
    assert phase2_refusal("f", "flow", own, "grpo_probe.policies.flow_head:FlowPolicy", full) is None
    assert phase2_refusal("f", "flow", None, "grpo_probe.policies.flow_head:FlowPolicy", full) is None
    undeclared = phase2_refusal("f", "flow", "lab.io:load", "lab.io:Mine", None)
    assert undeclared is not None and "which declares no capabilities and so lacks" in undeclared
    assert "trainable parameters (capabilities.trainable)" in undeclared
    untrainable = PolicyCapabilities(FLOW_KINDS, "per_step")
    lacking = phase2_refusal("f", "flow", "lab.io:load", "lab.io:Mine", untrainable)
    assert lacking is not None and lacking.endswith("flow arm: trainable parameters (capabilities.trainable)")
    ar = phase2_refusal("a", "ar", "lab.io:load", "lab.io:Tokens", PolicyCapabilities(("greedy",)))
    assert ar is not None and "per-token log-probs (capabilities.logprobs 'per_token')" in ar
    capable = phase2_refusal("f", "flow", "lab.io:load", "lab.io:Mine", full)
    assert capable is not None and "only checkpoints in grpo-probe's own format" in capable


def test_check_arm_passes_the_worked_ar_adapter_and_refuses_it_on_a_flow_arm(tmp_path: Path) -> None:
    checkpoint = tmp_path / "my_tokens.pt"
    checkpoint.write_bytes(b"weights")
    binding = {
        "source": "checkpoint",
        "path": str(checkpoint),
        "adapter": "examples.my_ar_adapter:load_my_ar",
    }
    config = _smoke_binding(tmp_path, {"ar": binding, "flow_teacher": binding})
    prereg = load_prereg(SMOKE)
    report = check_arm(prereg, config, "ar")
    assert report.passed, report.format()
    wrong = check_arm(prereg, config, "flow_teacher")
    assert wrong.codes == {"head"}


def test_check_arm_explains_an_unknown_arm_and_an_untrained_reference_arm(tmp_path: Path) -> None:
    prereg = load_prereg(SMOKE)
    config = _smoke_binding(tmp_path, {})
    with pytest.raises(
        ValueError, match=r"no arm 'nope' is registered \(arms: ar, flow_teacher, flow_short\)"
    ):
        check_arm(prereg, config, "nope")
    report = check_arm(prereg, config, "ar")
    assert report.passed and [c.status for c in report.checks] == ["skip"]
    assert "the workflow trains it" in report.checks[0].detail


def _run_cli(*args: str) -> int:
    from grpo_probe.cli import main

    return main(["check-policy", "--prereg", "prereg/smoke.yaml", *args])


def test_the_command_prints_each_check_and_exits_by_the_verdict(
    tmp_path: Path, flow_checkpoint: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    binding = {"source": "checkpoint", "path": str(flow_checkpoint)}
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(
        yaml.safe_dump(
            {"arms": {"flow_teacher": {**binding, "adapter": "examples.my_flow_adapter:load_my_flow"}}}
        )
    )
    bad.write_text(
        yaml.safe_dump(
            {"arms": {"flow_teacher": {**binding, "adapter": "examples.my_ar_adapter:load_my_ar"}}}
        )
    )

    assert _run_cli("--arm", "flow_teacher", "--configfile", str(good)) == 0
    out = capsys.readouterr().out
    assert "  ok    flow_ode(steps=10): rows independent of the batch" in out
    assert out.rstrip().endswith("skipped)") and "\npassed (" in out

    assert _run_cli("--arm", "flow_teacher", "--configfile", str(bad)) == 1
    out = capsys.readouterr().out
    assert "  FAIL  fits the arm" in out
    assert "[head] the policy's head is 'ar', the arm's is 'flow'" in out

    assert _run_cli("--arm", "nope", "--configfile", str(good)) == 2
    err = capsys.readouterr().err
    assert "no arm 'nope' is registered (arms: ar, flow_teacher, flow_short)" in err
    assert "Traceback" not in err

    from grpo_probe.cli import main

    assert main(["check-policy", "--prereg", "prereg/missing.yaml", "--arm", "ar"]) == 2
    err = capsys.readouterr().err
    assert "prereg/missing.yaml" in err and "Traceback" not in err


def test_the_docs_list_every_rule_the_checker_reports() -> None:
    """Text no test reads drifts: docs/your-policy.md's contract section names every finding code."""
    guide = (REPO / "docs/your-policy.md").read_text()
    section = guide.split("### The act() contract, in full", 1)[1].split("\n### ", 1)[0]
    assert [code for code in FINDING_CODES if f"`{code}`" not in section] == []
    assert "grpo-probe check-policy --prereg" in section and "examples/my_ar_adapter.py" in section
