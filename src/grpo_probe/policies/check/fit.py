"""Whether a policy fits its arm before anything is sampled: its attributes, head, observation width and
declared inputs (state, cameras, task) against what the arm registers and the design renders, and its
declared capabilities against the sampling kinds the design runs it under.

Why before sampling: a policy of the wrong head or width fails every call for that reason alone, and
the capabilities decide which modes are sampled at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from grpo_probe.envs.observation import TASK, ObservationConfig, camera_of, policy_input_keys
from grpo_probe.policies.check.calls import Call
from grpo_probe.policies.check.output import check_phase2_logprobs
from grpo_probe.policies.check.report import CheckResult, check_result, finding_for
from grpo_probe.policies.protocol import (
    PolicyCapabilities,
    SamplingMode,
    declared_capabilities,
    policy_capabilities,
    policy_name,
)
from grpo_probe.sampling import HEAD_OF_MODE, mode_text

__all__ = ["check_capabilities", "check_declared_logprobs", "check_fit", "declared_modes"]

_DECLARED = "its declared capabilities"
"""Why a mode the design does not run is sampled: the policy declares its kind."""
_DECLARED_MODES: dict[str, SamplingMode] = {
    "greedy": SamplingMode("greedy"),
    "temperature": SamplingMode("temperature", temperature=1.0),
    "flow_ode": SamplingMode("flow_ode", steps=10),
    "flow_sde": SamplingMode("flow_sde", sde_a=0.5, steps=10),
    "flow_euler": SamplingMode("flow_euler", steps=10),
}
"""The mode a declared kind is sampled under when the design runs none of that kind (flow_sde: none with
a > 0, the draws that carry per-step log-probs); another registered kind, under its defaults."""


def check_fit(
    policy: Any,
    head: str | None,
    obs_dim: int | None,
    inputs: Sequence[str] | None,
    observation: ObservationConfig,
) -> tuple[CheckResult, tuple[str, ...] | None]:
    """The policy's head, obs_dim and declared inputs against the arm's; the declared keys when they fit."""
    findings = []
    missing = [a for a in ("head", "obs_dim", "act") if not hasattr(policy, a)]
    if missing:
        findings.append(
            finding_for("attributes", f"the policy ({type(policy).__name__}) has no {', '.join(missing)}")
        )
        return check_result("fits the arm", findings), None
    if head is not None and policy.head != head:
        findings.append(finding_for("head", f"the policy's head is {policy.head!r}, the arm's is {head!r}"))
    elif policy.head not in HEAD_OF_MODE.values():
        heads = " or ".join(repr(h) for h in dict.fromkeys(HEAD_OF_MODE.values()))
        findings.append(finding_for("head", f"the policy's head is {policy.head!r}, not {heads}"))
    if obs_dim is not None and policy.obs_dim != obs_dim:
        findings.append(
            finding_for(
                "obs-dim", f"the policy reads {policy.obs_dim!r} numbers, the environment observes {obs_dim}"
            )
        )
    try:
        declared = policy_input_keys(policy)
    except ValueError as exc:
        findings.append(finding_for("inputs", str(exc)))
        return check_result("fits the arm", findings), None
    allowed = tuple(inputs) if inputs is not None else observation.keys
    unregistered = [k for k in declared if k not in allowed]
    if unregistered:
        findings.append(
            finding_for(
                "inputs",
                f"the policy declares {', '.join(unregistered)}, which the arm does not register "
                f"(its inputs: {', '.join(allowed)})",
            )
        )
    cameras = {c.name for c in observation.cameras}
    unrendered = [k for k in declared if (c := camera_of(k)) is not None and c not in cameras]
    if unrendered or (TASK in declared and not observation.task):
        findings.append(
            finding_for(
                "inputs", f"the design registers no {', '.join(unrendered or [TASK])} for the policy to read"
            )
        )
    detail = f"head {policy.head!r}, obs_dim {policy.obs_dim!r}, reads {', '.join(declared)}"
    if any(camera_of(k) is not None for k in declared):
        detail += " (frames: keyed noise at the registered size)"
    return check_result("fits the arm", findings, detail), (None if findings else declared)


def check_capabilities(
    policy: Any, reasons: Mapping[SamplingMode, str], arm: str | None
) -> tuple[CheckResult, PolicyCapabilities, bool]:
    """The policy's declaration against the kinds of the modes it is asked to sample.

    Returns the check, the capabilities the rest of the checks go by (the declaration, or for a policy
    that declares none or a malformed one, every kind of its head) and whether the policy declared them.
    """
    name = "declared capabilities"
    subject = policy_name(policy)
    try:
        declared = declared_capabilities(policy)
    except ValueError as exc:
        default = PolicyCapabilities.of_head(policy.head)
        return check_result(name, [finding_for("capabilities", str(exc))]), default, False
    capabilities = declared if declared is not None else policy_capabilities(policy)
    needs: dict[str, list[tuple[SamplingMode, str]]] = {}
    for mode, why in reasons.items():
        if mode.kind not in capabilities.kinds:
            needs.setdefault(mode.kind, []).append((mode, why))
    findings = []
    who = f"arm {arm!r}" if arm is not None else "the design"
    for kind, uses in needs.items():
        named = "; ".join(f"{why} samples {mode_text(mode)}" for mode, why in uses)
        message = (
            f"{who} needs sampling kind {kind!r}, which {subject} does not declare (it declares "
            f"{', '.join(capabilities.kinds)}): {named}"
        )
        findings.append(finding_for("capability-missing", message, uses[0][0]))
    if declared is not None:
        detail = f"{subject} {capabilities.describe()}"
    else:
        detail = (
            f"{subject} declares none: taken to sample every kind of the {capabilities.head} head (each one "
            "the design runs is sampled below), with no log-probs for phase 2 and no trainable parameters"
        )
    return check_result(name, findings, detail), capabilities, declared is not None


def declared_modes(
    capabilities: PolicyCapabilities, reasons: Mapping[SamplingMode, str]
) -> dict[SamplingMode, str]:
    """A mode for each declared kind the design samples no mode of (flow_sde: none with a > 0)."""
    covered = {m.kind for m in reasons if m.kind != "flow_sde" or (m.sde_a or 0.0) > 0}
    modes = {}
    for kind in capabilities.kinds:
        if kind in covered:
            continue
        try:
            modes[_DECLARED_MODES.get(kind) or SamplingMode(kind)] = _DECLARED  # type: ignore[arg-type]
        except ValueError:
            continue  # a kind that needs parameters no default gives: sampled only as the design runs it
    return modes


def check_declared_logprobs(
    policy: Any,
    capabilities: PolicyCapabilities,
    calls: Mapping[SamplingMode, Call | None],
    trained: set[SamplingMode],
) -> list[CheckResult]:
    """The declared log-probs on the rows of a stochastic mode of the head (the phase-2 check's rules).

    Skipped where a mode phase 2 trains under was checked for them already (``logprob-missing``).
    """
    if capabilities.logprobs is None:
        return []
    want = "flow_sde" if capabilities.logprobs == "per_step" else "temperature"
    candidates = [
        (m, c)
        for m, c in calls.items()
        if m.kind == want and c is not None and (m.kind != "flow_sde" or (m.sde_a or 0.0) > 0)
    ]
    name = f"declared {capabilities.logprobs} log-probs"
    if not candidates:
        return [CheckResult(name, "skip", f"no {want} mode gave rows to read them from")]
    if any(m in trained for m, _ in candidates):
        return []
    mode, call = candidates[0]
    result = check_phase2_logprobs(call, mode)
    findings = [
        finding_for(
            "capability-false",
            f"{policy_name(policy)} declares {capabilities.logprobs} log-probs, but "
            + f.message.removesuffix(" (phase 2 trains under this mode)"),
            mode,
        )
        for f in result.findings
    ]
    return [check_result(name, findings, f"{result.detail} of {mode_text(mode)} rows")]
