"""The contract and shape checks on one call's output: its type, the actions' dtype, shape, finiteness and
range, one diagnostics record per row, the AR rows' token diagnostics and the log-probs phase 2 divides by.

Why first: the other checks compare rows, which only an output of the right form allows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from grpo_probe.policies.check.calls import Call
from grpo_probe.policies.check.report import CheckResult, check_result, finding_for
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.sampling import mode_text

__all__ = ["check_ar_diagnostics", "check_output", "check_phase2_logprobs"]


def check_output(
    call: Call, mode: SamplingMode, action_shape: tuple[int, int], reasons: str, declared: bool = False
) -> tuple[CheckResult, bool]:
    """Output type, action dtype/shape/values and one diagnostics record per row; whether rows compare.

    ``declared``: the policy declares the mode's kind, so an ``act`` that raises makes the declaration
    false (``capability-false``) rather than only failing a mode (``act-error``)."""
    n = len(call.rows)
    want = (n, *action_shape)
    name = f"{mode_text(mode)}: output"
    if call.error is not None:
        error = f"act() raised {type(call.error).__name__}: {call.error}"
        if declared:
            message = (
                f"{error}, though the policy declares kind {mode.kind!r} in its capabilities (sampled for "
                f"{reasons})"
            )
            return check_result(name, [finding_for("capability-false", message, mode)]), False
        message = f"{error} (the design samples this mode for {reasons})"
        return check_result(name, [finding_for("act-error", message, mode)]), False
    if call.actions is None or call.diagnostics is None:
        message = (
            f"act() returned {type(call.output).__name__}, not a PolicyOutput with actions and diagnostics"
        )
        return check_result(name, [finding_for("output-type", message, mode)]), False
    findings = []
    actions = call.actions
    if not isinstance(actions, np.ndarray):
        findings.append(
            finding_for("action-dtype", f"actions are a {type(actions).__name__}, not a numpy array", mode)
        )
        return check_result(name, findings), False
    if actions.dtype != np.float32:
        findings.append(finding_for("action-dtype", f"actions are {actions.dtype}, not float32", mode))
    if actions.shape != want:
        parts = []
        if actions.ndim != 3:
            parts.append(f"{actions.ndim} axes instead of 3")
        else:
            if actions.shape[0] != n:
                parts.append(f"{actions.shape[0]} rows for {n} observations")
            if actions.shape[1] != action_shape[0]:
                parts.append(
                    f"chunks of {actions.shape[1]} actions; the environment's chunk_length is {want[1]}"
                )
            if actions.shape[2] != action_shape[1]:
                parts.append(f"{actions.shape[2]} action dims; the environment's action_dims is {want[2]}")
        message = (
            f"actions have shape {list(actions.shape)}, the environment needs {list(want)}: "
            + "; ".join(parts)
        )
        findings.append(finding_for("action-shape", message, mode))
    if actions.dtype.kind == "f":
        finite = np.isfinite(actions)
        if not finite.all():
            at = tuple(int(k) for k in np.argwhere(~finite)[0])
            findings.append(finding_for("action-nonfinite", f"actions{list(at)} is {actions[at]}", mode))
        elif actions.size and (actions.min() < -1.0 or actions.max() > 1.0):
            findings.append(
                finding_for(
                    "action-range",
                    f"actions span [{float(actions.min()):.4g}, {float(actions.max()):.4g}], outside [-1, 1]",
                    mode,
                )
            )
    diagnostics = call.diagnostics
    if not isinstance(diagnostics, Sequence) or len(diagnostics) != n:
        count = len(diagnostics) if isinstance(diagnostics, Sequence) else type(diagnostics).__name__
        findings.append(finding_for("diagnostics", f"{count} diagnostics records for {n} rows", mode))
    elif not all(hasattr(d, "logprob") for d in diagnostics):
        bad = next(i for i, d in enumerate(diagnostics) if not hasattr(d, "logprob"))
        findings.append(
            finding_for("diagnostics", f"diagnostics[{bad}] is a {type(diagnostics[bad]).__name__}", mode)
        )
    comparable = (
        isinstance(diagnostics, Sequence)
        and len(diagnostics) == n
        and all(hasattr(d, "logprob") for d in diagnostics)
        and actions.ndim >= 1
        and actions.shape[0] == n
    )
    detail = f"actions {actions.dtype} {list(actions.shape)}, for {reasons}"
    return check_result(name, findings, detail), comparable


def check_ar_diagnostics(call: Call, mode: SamplingMode) -> CheckResult:
    """AR rows carry token ids, log-probs (each <= 0, summing to ``logprob``) and entropies (>= 0): the
    analysis reads the entropies and token counts, the oracles compare the ids."""
    findings = []
    for i, d in enumerate(call.diagnostics):
        missing = [f for f in ("token_ids", "token_logprobs", "entropy") if getattr(d, f, None) is None]
        if missing:
            findings.append(finding_for("ar-diagnostics", f"row {i} has no {', '.join(missing)}", mode))
            break
        ids, logps, ent = (np.asarray(getattr(d, f)) for f in ("token_ids", "token_logprobs", "entropy"))
        problem = None
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            problem = f"token_ids is {ids.dtype} {list(ids.shape)}, not a 1-D integer array"
        elif logps.shape != ids.shape or ent.shape != ids.shape:
            problem = (
                f"{len(ids)} token_ids, {list(logps.shape)} token_logprobs and {list(ent.shape)} entropy "
                "(one of each per token)"
            )
        elif logps.dtype.kind != "f" or ent.dtype.kind != "f":
            problem = f"token_logprobs is {logps.dtype} and entropy {ent.dtype}; both must be float arrays"
        elif not (np.all(np.isfinite(logps)) and np.all(np.isfinite(ent))):
            problem = "token_logprobs or entropy holds a non-finite value"
        elif logps.size and (logps.max() > 1e-6 or ent.min() < -1e-6):
            problem = (
                f"token_logprobs reach {float(logps.max()):.3g} (must be <= 0) or entropy "
                f"{float(ent.min()):.3g} (must be >= 0)"
            )
        elif d.logprob is not None and not math.isclose(
            float(d.logprob), float(logps.sum()), rel_tol=1e-6, abs_tol=1e-6
        ):
            problem = f"logprob {d.logprob!r} is not the sum of token_logprobs ({float(logps.sum())!r})"
        if problem is not None:
            findings.append(finding_for("ar-diagnostics", f"row {i}: {problem}", mode))
            break
    return check_result(f"{mode_text(mode)}: AR diagnostics", findings, "token_ids, token_logprobs, entropy")


def check_phase2_logprobs(call: Call, mode: SamplingMode) -> CheckResult:
    """Rows of a mode phase 2 trains under carry the log-probs its importance ratio divides by: ``logprob``
    and, for ``flow_sde``, ``step_logprobs`` summing to it; for the AR head ``token_logprobs``."""
    findings = []
    for i, d in enumerate(call.diagnostics):
        problem = None
        if d.logprob is None or not math.isfinite(float(d.logprob)):
            problem = f"logprob is {d.logprob!r}"
        elif mode.kind == "flow_sde":
            steps = getattr(d, "step_logprobs", None)
            if steps is None:
                problem = "step_logprobs is None"
            else:
                steps = np.asarray(steps)
                if steps.shape != (mode.steps,) or steps.dtype.kind != "f":
                    problem = f"step_logprobs is {steps.dtype} {list(steps.shape)}, not float [{mode.steps}]"
                elif not math.isclose(float(d.logprob), float(steps.sum()), rel_tol=1e-6, abs_tol=1e-6):
                    problem = (
                        f"logprob {d.logprob!r} is not the sum of step_logprobs ({float(steps.sum())!r})"
                    )
        elif getattr(d, "token_logprobs", None) is None:
            problem = "token_logprobs is None"
        if problem is not None:
            findings.append(
                finding_for("logprob-missing", f"row {i}: {problem} (phase 2 trains under this mode)", mode)
            )
            break
    detail = "logprob and step_logprobs" if mode.kind == "flow_sde" else "logprob and token_logprobs"
    return check_result(f"{mode_text(mode)}: log-probs for phase 2", findings, detail)
