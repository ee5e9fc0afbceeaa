"""The determinism and key checks: a row's bytes depend on its observation and key only (not on torch's,
numpy's or Python's global RNGs, nor on the rest of its batch), stochastic modes draw from the key,
noise-off modes ignore it and equal their deterministic twin, as the draw-0 oracle will compare them.

Why these together: each asks whether a chunk is a function of (observation, key), the property every
oracle of the probe relies on; a failure of one makes the later ones undecidable, so they run in order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from grpo_probe.policies.check.calls import GLOBAL_SEEDS, Call, Rows, call_act
from grpo_probe.policies.check.compare import same_rows, usable
from grpo_probe.policies.check.report import CheckResult, Finding, check_result, finding_for
from grpo_probe.policies.protocol import Policy, SamplingMode
from grpo_probe.sampling import mode_text, sampler

__all__ = [
    "check_globals_and_batch",
    "check_key_dependence",
    "check_noise_off_equals_deterministic",
    "check_repeatable",
    "draw0_twins_of",
]

_EXTRA_DRAWS = 8
"""Draws of one observation sampled when the batch's two draws of it came out equal."""


def draw0_twins_of(mode: SamplingMode) -> tuple[SamplingMode, ...]:
    """The modes a cell's draw-0 oracle runs beside it, as its kind declares them
    (:class:`grpo_probe.sampling.Draw0`): T without noise and greedy; SDE at a = 0 and Euler."""
    draw0 = sampler(mode.kind).draw0
    if draw0.probe is None or draw0.twin_of is None or draw0.probe(mode) == mode:
        return ()
    return (draw0.probe(mode), draw0.twin_of(mode))


def _noise_off(mode: SamplingMode) -> bool:
    """Modes whose chunk must not depend on the key: greedy, and temperature with the noise off."""
    return mode.kind == "greedy" or (mode.kind == "temperature" and not mode.noise)


def _draw_pair(first: Call) -> tuple[Call, Call]:
    """Rows 0 and 1 of the batch's first call (one observation, draws 0 and 1) as two one-row calls."""
    return (
        Call((0,), first.actions[:1], first.diagnostics[:1]),
        Call((0,), first.actions[1:2], first.diagnostics[1:2]),
    )


def check_repeatable(policy: Policy, rows: Rows, mode: SamplingMode, first: Call) -> CheckResult:
    """The batch called again with the same observations, keys and global seeds gives the same bytes: the
    premise of every comparison after it."""
    n = len(rows.keys)
    repeat = call_act(policy, rows, range(n), mode, GLOBAL_SEEDS[0])
    diff = same_rows(first, repeat, ("the first call", "the repeat"))
    findings = []
    if diff is not None:
        message = f"two calls with the same observations and keys differ: {diff}"
        findings.append(finding_for("not-repeatable", message, mode))
    return check_result(f"{mode_text(mode)}: same keys, same bytes", findings, f"{n} rows, called twice")


def check_key_dependence(policy: Policy, rows: Rows, mode: SamplingMode, first: Call) -> CheckResult:
    """Stochastic modes: draws of one observation differ; noise-off modes: they are the same bytes."""
    label = mode_text(mode)
    if _noise_off(mode):
        diff = same_rows(*_draw_pair(first), ("draw 0", "draw 1"))
        findings = []
        if diff is not None:
            message = (
                f"two draws of one observation differ with the noise off: {diff.removeprefix('row 0: ')}"
            )
            findings.append(finding_for("noise-off-keyed", message, mode))
        return check_result(f"{label}: independent of the key", findings, "draws 0 and 1 of one observation")
    name = f"{label}: draws differ by key"
    if same_rows(*_draw_pair(first), ("draw 0", "draw 1"), ("actions", "token_ids")) is not None:
        return check_result(name, [], "draws 0 and 1 of one observation differ")
    more = call_act(policy, rows, [0] * _EXTRA_DRAWS, mode, GLOBAL_SEEDS[0], draws=range(_EXTRA_DRAWS))
    if not usable(more):
        return CheckResult(name, "skip", f"draws 0..{_EXTRA_DRAWS - 1} of one observation gave no rows")
    chunks = {np.asarray(more.actions)[i].tobytes() for i in range(_EXTRA_DRAWS)}
    if len(chunks) > 1:
        return check_result(
            name, [], f"{len(chunks)} distinct chunks in {_EXTRA_DRAWS} draws of one observation"
        )
    logprob = more.diagnostics[0].logprob
    if logprob is not None and math.isfinite(float(logprob)) and float(logprob) > math.log(0.5):
        reason = (
            f"{_EXTRA_DRAWS} draws gave one chunk, whose recorded probability is "
            f"{math.exp(float(logprob)):.2f}: too peaked to tell a keyed sampler from one that ignores "
            "the key"
        )
        return CheckResult(name, "skip", reason)
    message = f"{_EXTRA_DRAWS} draws of one observation (keys differing in draw only) gave the same chunk"
    return check_result(name, [finding_for("key-ignored", message, mode)])


def check_globals_and_batch(
    policy: Policy, rows: Rows, mode: SamplingMode, first: Call
) -> tuple[list[Finding], list[Finding] | None]:
    """Findings of the global-RNG and batch-invariance checks (None for the latter when undecidable).

    One call covers both when the policy keeps the contract: the batch in reverse order with the global
    RNGs reseeded. When its rows differ, the same order with the globals reseeded tells whether the
    global RNGs matter; if they do, a row's bytes depend on how many draws the rows before it took, so
    batch invariance cannot be told apart and is left for after the fix. Else the reverse order with the
    globals as in the first call, then the first and the last row alone.
    """
    n = len(first.rows)
    everything, backwards = list(range(n)), list(range(n))[::-1]
    global_findings: list[Finding] = []
    batch_findings: list[Finding] = []
    varied = call_act(policy, rows, backwards, mode, GLOBAL_SEEDS[1])
    if same_rows(first, varied, ("the batch", "the reversed batch")) is not None:
        reseeded = call_act(policy, rows, everything, mode, GLOBAL_SEEDS[1])
        diff = same_rows(first, reseeded, ("the first call", "a call with the global RNGs reseeded"))
        if diff is not None:
            message = f"the same call with torch's, numpy's and Python's global RNGs reseeded differs: {diff}"
            global_findings.append(finding_for("global-rng", message, mode))
        if global_findings:  # rows drawn in turn from a global RNG depend on their position too
            return global_findings, None
        reordered = call_act(policy, rows, backwards, mode, GLOBAL_SEEDS[0])
        diff = same_rows(first, reordered, ("the batch", "the reversed batch"))
        if diff is not None:
            message = f"the batch in reverse order gives its rows other bytes: {diff}"
            batch_findings.append(finding_for("batch-dependent", message, mode))
    for r in (0, n - 1):
        if batch_findings:
            break
        alone = call_act(policy, rows, [r], mode, GLOBAL_SEEDS[0])
        diff = same_rows(first, alone, (f"the batch of {n}", "alone"))
        if diff is not None:
            message = f"a row alone differs from the same row in a batch: {diff}"
            batch_findings.append(finding_for("batch-dependent", message, mode))
    return global_findings, batch_findings


def check_noise_off_equals_deterministic(firsts: Mapping[SamplingMode, Call | None]) -> list[CheckResult]:
    """Temperature with the noise off picks greedy's ids (and actions); SDE at a = 0 is Euler, bit for bit."""
    results = []
    for mode, call in firsts.items():
        draw0 = sampler(mode.kind).draw0
        if draw0.probe is None or draw0.twin_of is None or draw0.probe(mode) != mode:
            continue  # not a noise-off twin
        reference = draw0.twin_of(mode)
        fields: tuple[str, ...] = draw0.check_fields
        name = f"{mode_text(mode)} equals {mode_text(reference)}"
        other = firsts.get(reference)
        if call is None or other is None:
            results.append(CheckResult(name, "skip", "one of the two modes gave no comparable output"))
            continue
        diff = same_rows(call, other, (mode_text(mode), mode_text(reference)), fields)
        findings = []
        if diff is not None:
            message = f"the draw-0 oracle's two sides differ on the same keys: {diff}"
            findings.append(finding_for("noise-off-differs", message, mode))
        results.append(
            check_result(name, findings, f"{', '.join(fields)} on the same keys (the draw-0 oracle)")
        )
    return results
