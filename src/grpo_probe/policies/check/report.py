"""What the policy check reports: each finding's code and fix, a check's outcome, and the report the
``check-policy`` command prints.

Why a module of its own: every check family builds its findings here, and the callers that only read a
verdict (the rollout jobs' :class:`PolicyContractError`, phase 2's binding step) need none of the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.sampling import mode_text

__all__ = [
    "FINDING_CODES",
    "CheckResult",
    "Finding",
    "PolicyContractError",
    "PolicyReport",
    "check_result",
    "finding_for",
]

FINDING_CODES: dict[str, str] = {
    "attributes": "give the policy a 'head' ('ar' or 'flow'), an integer 'obs_dim' and an "
    "act(obs, keys, mode) method (grpo_probe.policies.protocol.Policy)",
    "head": "bind the arm to a policy of its registered head (arms.<id>.head in the prereg)",
    "obs-dim": "set obs_dim to the environment's observation width (its spec.obs_dim) and bind a checkpoint "
    "trained on this environment",
    "inputs": "declare in input_keys only keys the arm registers (arms.<id>.inputs) and the design can "
    "render (observation.cameras, observation.task)",
    "capabilities": "declare capabilities as a grpo_probe.policies.PolicyCapabilities(kinds=..., "
    "logprobs=..., trainable=...) whose kinds belong to the policy's head",
    "capability-missing": "bind the arm to a policy that samples this kind and declares it in its "
    "capabilities (declare it if act() samples it), or register the cell, anchor or oracle with a kind "
    "the policy declares",
    "act-error": "sample this mode in act(): the design runs the arm under it (see the reasons listed)",
    "output-type": "return grpo_probe.policies.PolicyOutput(actions=..., diagnostics=[...]) from act()",
    "action-dtype": "return actions as a numpy float32 array (np.asarray(chunks, dtype=np.float32))",
    "action-shape": "return actions of shape [B, chunk_length, action_dims], read from the environment's "
    "spec (env_spec(prereg.env)), not a fixed [B, 50, 6]",
    "action-nonfinite": "return finite actions: a NaN or infinity would be executed by the environment",
    "action-range": "return normalized actions in [-1, 1] (clip them); the environment maps [-1, 1] onto its "
    "own action bounds",
    "diagnostics": "return a list of exactly one RowDiagnostics per row, in row order",
    "not-repeatable": "draw every random number from a generator keyed by the row's RowKey: "
    "grpo_probe.keyed_rng.numpy_generator(tag('my-noise'), run_key, seed, replan, draw), or for torch "
    "torch.Generator().manual_seed(grpo_probe.keyed_rng.key_seed(...)) (grpo_probe.keyed_rng ships in "
    "grpo-probe-serve too, so a served policy imports it the same way); no unseeded generators, clocks or "
    "os.urandom, and deterministic kernels on a GPU",
    "global-rng": "never draw from torch's, numpy's or Python's global RNG (torch.randn without generator=, "
    "np.random.*, random.*, dropout left on); draw from a generator keyed by the row's "
    "(run_key, seed, replan, draw)",
    "batch-dependent": "compute each row from its own observation and key only: no statistics over the "
    "batch, no noise drawn for the batch as a whole, and fixed-shape (padded) blocks where a kernel's result "
    "depends on the batch size",
    "key-ignored": "draw this mode's noise from the row's key (run_key, seed, replan, draw), so each draw "
    "of a group is a fresh sample; a probe cell measures the spread between them",
    "noise-off-keyed": "with the noise off (kind 'greedy', or 'temperature' with mode.noise False) draw "
    "nothing: the chunk must depend on the observation only",
    "noise-off-differs": "with mode.noise False, kind 'temperature' takes argmax(logits / T) (greedy's ids; "
    "the log-probs stay those at T); flow_sde at sde_a = 0 runs the Euler sampler (flow_euler) on the same "
    "grid and keyed initial noise, bit for bit: the draw-0 oracle compares them",
    "ar-diagnostics": "fill RowDiagnostics.token_ids (int [n]), token_logprobs (float64 [n], each <= 0) and "
    "entropy (float64 [n] >= 0, nats) for every AR row, with logprob their sum: the analysis reads the "
    "entropies and token counts, the oracles compare token ids",
    "logprob-missing": "GRPO's importance ratio divides by the sampler's log-probs: fill "
    "RowDiagnostics.logprob and, for flow_sde, step_logprobs (float64 [steps], summing to logprob); for "
    "the AR head token_logprobs",
    "capability-false": "make act() sample every kind its capabilities declare, recording the log-probs "
    "they declare, or declare less: an arm is bound, and refused, by what its policy declares",
}
"""Every finding's code and the fix it asks for, in the order the checks run."""


class PolicyContractError(ValueError):
    """A policy breaks the ``act()`` contract; the message lists each finding with its fix."""


@dataclass(frozen=True)
class Finding:
    """One broken rule: a short ``code`` (a key of :data:`FINDING_CODES`), what was seen, and the fix."""

    code: str
    message: str
    fix: str
    mode: str | None = None
    """The sampling mode the finding was seen under (as :func:`mode_text` writes it); None for the fit."""

    def format(self) -> str:
        """``[code] message`` and ``fix: ...`` on two lines."""
        return f"[{self.code}] {self.message}\nfix: {self.fix}"


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome: ``ok``, ``FAIL`` (with findings) or ``skip`` (with the reason in ``detail``)."""

    name: str
    status: Literal["ok", "FAIL", "skip"]
    detail: str = ""
    findings: tuple[Finding, ...] = ()


@dataclass
class PolicyReport:
    """What :func:`check_policy` found: every check in the order it ran."""

    subject: str
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no check failed (skipped checks do not fail a report)."""
        return all(c.status != "FAIL" for c in self.checks)

    @property
    def findings(self) -> list[Finding]:
        """Every finding of every failed check, in order."""
        return [f for c in self.checks for f in c.findings]

    @property
    def codes(self) -> set[str]:
        """The codes of all findings."""
        return {f.code for f in self.findings}

    def format(self) -> str:
        """The report as the ``check-policy`` command prints it: one line per check, findings indented."""
        lines = [self.subject]
        for check in self.checks:
            detail = f": {check.detail}" if check.detail else ""
            lines.append(f"  {check.status:<4}  {check.name}{detail}")
            for finding in check.findings:
                lines += [f"          {line}" for line in finding.format().splitlines()]
        failed = sum(c.status == "FAIL" for c in self.checks)
        skipped = sum(c.status == "skip" for c in self.checks)
        ran = len(self.checks) - skipped
        verdict = "passed" if failed == 0 else f"FAILED {failed} of {ran}"
        lines.append(f"{verdict} ({ran} checks run, {skipped} skipped)")
        return "\n".join(lines)

    def raise_if_failed(self) -> None:
        """Raise :class:`PolicyContractError` with the formatted report when a check failed."""
        if not self.passed:
            raise PolicyContractError(self.format())


def finding_for(code: str, message: str, mode: SamplingMode | None = None, fix: str | None = None) -> Finding:
    """A finding of ``code`` with the fix :data:`FINDING_CODES` asks for, so every check words it alike."""
    return Finding(code, message, fix or FINDING_CODES[code], None if mode is None else mode_text(mode))


def check_result(name: str, findings: list[Finding], detail: str = "") -> CheckResult:
    """A check that ran: ``FAIL`` when it found something, else ``ok``."""
    return CheckResult(name, "FAIL" if findings else "ok", detail, tuple(findings))
