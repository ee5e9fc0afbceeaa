""":func:`check_policy`: the whole ``act()`` contract on one policy object, each sampling mode in turn.

Why a module of its own: it decides what runs (the fit first, then the modes the policy declares, then
the checks across modes) and leaves each rule to the module of its family.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from grpo_probe.envs.observation import ObservationConfig, StateSplit
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies.check.calls import (
    GLOBAL_SEEDS,
    Call,
    Rows,
    call_act,
    global_rngs_kept,
    observation_rows,
)
from grpo_probe.policies.check.determinism import (
    check_globals_and_batch,
    check_key_dependence,
    check_noise_off_equals_deterministic,
    check_repeatable,
    draw0_twins_of,
)
from grpo_probe.policies.check.fit import (
    check_capabilities,
    check_declared_logprobs,
    check_fit,
    declared_modes,
)
from grpo_probe.policies.check.output import check_ar_diagnostics, check_output, check_phase2_logprobs
from grpo_probe.policies.check.report import CheckResult, PolicyReport, check_result
from grpo_probe.policies.protocol import Policy, SamplingMode
from grpo_probe.sampling import mode_text

__all__ = ["check_policy"]

_STATE_TAG = tag("check_policy_state")


def _check_mode(
    policy: Policy,
    rows: Rows,
    mode: SamplingMode,
    reasons: str,
    action_shape: tuple[int, int],
    needs_token_diagnostics: bool,
    needs_logprobs: bool,
    declared: bool = False,
) -> tuple[list[CheckResult], Call | None]:
    """Every per-mode check; returns the results and the batch's first call when its rows can be compared."""
    label = mode_text(mode)
    n = len(rows.keys)
    first = call_act(policy, rows, range(n), mode, GLOBAL_SEEDS[0])
    output, comparable = check_output(first, mode, action_shape, reasons, declared)
    results = [output]
    if not comparable:
        if first.error is None:
            results.append(CheckResult(f"{label}: bytes", "skip", "the output's rows cannot be compared"))
        return results, None
    repeatable = check_repeatable(policy, rows, mode, first)
    results.append(repeatable)
    if repeatable.findings:
        skipped = "skipped: the output is not a function of the observations and keys"
        for check in ("no global RNG", "rows independent of the batch", "keys"):
            results.append(CheckResult(f"{label}: {check}", "skip", skipped))
    else:
        global_findings, batch_findings = check_globals_and_batch(policy, rows, mode, first)
        results.append(check_result(f"{label}: no global RNG", global_findings, "global RNGs reseeded"))
        batch_name = f"{label}: rows independent of the batch"
        if batch_findings is None:
            skipped = "skipped: undecidable while the rows draw from a global RNG"
            results.append(CheckResult(batch_name, "skip", skipped))
        else:
            detail = f"rows alone and at other positions of a batch of {n}"
            results.append(check_result(batch_name, batch_findings, detail))
        if global_findings or batch_findings:
            skipped = "skipped: a row's bytes depend on more than its observation and key"
            results.append(CheckResult(f"{label}: keys", "skip", skipped))
        else:
            results.append(check_key_dependence(policy, rows, mode, first))
    if needs_token_diagnostics and mode.head == "ar":
        results.append(check_ar_diagnostics(first, mode))
    if needs_logprobs:
        results.append(check_phase2_logprobs(first, mode))
    return results, first


def check_policy(
    policy: Policy,
    *,
    action_shape: tuple[int, int],
    modes: Sequence[SamplingMode] | Mapping[SamplingMode, str],
    states: np.ndarray | None = None,
    seeds: Sequence[int] | None = None,
    obs_dim: int | None = None,
    head: str | None = None,
    inputs: Sequence[str] | None = None,
    observation: ObservationConfig | None = None,
    needs_token_diagnostics: bool | None = None,
    needs_logprobs: Sequence[SamplingMode] = (),
    draw0_twins: bool = True,
    batch: int = 4,
    run_key: int = 0,
    subject: str | None = None,
    arm: str | None = None,
    split: StateSplit | None = None,
) -> PolicyReport:
    """Check ``policy`` against the ``act()`` contract with a handful of ``act`` calls; never raises for a
    broken rule (see :meth:`PolicyReport.raise_if_failed`).

    ``action_shape``: (chunk_length, action_dims) from the environment's spec. ``modes``: the sampling
    modes the arm runs under, optionally mapped to why (``"cell c1, parallel oracle"``); with
    ``draw0_twins`` each temperature and SDE mode brings the modes its draw-0 oracle runs beside it
    (temperature with the noise off and greedy; SDE at a = 0 and Euler). ``states``: at least
    ``batch - 1`` observations float32 [n, obs_dim] (real ones from the environment's resets are best),
    keyed by ``seeds``; without them, keyed standard-normal states of width ``obs_dim`` (or the policy's).
    ``head``, ``obs_dim`` and ``inputs``: what the arm registers, checked against the policy.
    ``observation``: the design's task and cameras, for a policy that reads frames (keyed uint8 noise at the
    registered size stands in for them). ``needs_token_diagnostics`` (default: the policy's head is
    'ar'): AR rows must carry token ids, log-probs and entropies. ``needs_logprobs``: modes whose rows must
    carry log-probs (those phase 2 trains under). The global RNG states are restored afterwards.
    ``split``: the design's LeRobot keys (:meth:`ObservationConfig.split`); a policy whose ``obs_dim`` is
    the agent's part reads ``observation.state`` and ``observation.environment_state`` cut from the
    states, one whose ``obs_dim`` is ``obs_dim`` reads them packed, as the rollout engine hands them.

    The policy's capabilities (:func:`~grpo_probe.policies.protocol.policy_capabilities`) decide what is
    sampled: a mode whose kind it does not declare is a ``capability-missing`` finding (naming ``arm``
    when given) and is not sampled; a declared kind that no mode covers is sampled once under a mode of
    its own, and a declared kind that raises, or declared log-probs that are not recorded, are
    ``capability-false`` findings.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 3:
        raise ValueError(f"check_policy: batch must be an integer >= 3, got {batch!r}")
    observation = observation or ObservationConfig()
    reasons: dict[SamplingMode, list[str]] = {}
    items = modes.items() if isinstance(modes, Mapping) else ((m, "the caller") for m in modes)
    for mode, why in items:
        reasons.setdefault(mode, []).append(why)
        for twin in draw0_twins_of(mode) if draw0_twins else ():
            reasons.setdefault(twin, []).append(f"the draw-0 oracle of {mode_text(mode)}")
    reads_split = split if split is not None and getattr(policy, "obs_dim", None) == split.state_dim else None
    fit_dim = reads_split.state_dim if reads_split is not None else obs_dim
    fit, declared = check_fit(policy, head, fit_dim, inputs, observation)
    report = PolicyReport(
        subject or f"check-policy: {type(policy).__name__} (head {getattr(policy, 'head', '?')!r})"
    )
    report.checks.append(fit)
    if declared is None:
        report.checks.append(CheckResult("sampling modes", "skip", "skipped until the policy fits the arm"))
        return report
    trained = set(needs_logprobs)
    why = {mode: ", ".join(dict.fromkeys(texts)) for mode, texts in reasons.items()}
    capable, capabilities, explicit = check_capabilities(policy, why, arm)
    report.checks.append(capable)
    sampled = {mode: text for mode, text in why.items() if mode.kind in capabilities.kinds}
    extra = declared_modes(capabilities, sampled) if explicit else {}
    width = int(obs_dim if obs_dim is not None else policy.obs_dim)
    n_obs = batch - 1
    if states is None:
        seeds = list(range(n_obs))
        states = np.stack(
            [numpy_generator(run_key, _STATE_TAG, s).standard_normal(width) for s in seeds]
        ).astype(np.float32)
    states = np.asarray(states, dtype=np.float32)
    seeds = list(seeds) if seeds is not None else list(range(len(states)))
    if len(states) < n_obs or len(seeds) != len(states):
        raise ValueError(
            f"check_policy: needs {n_obs} states with one seed each, got {len(states)} and {len(seeds)}"
        )
    rows = observation_rows(
        declared, str(policy.head), states, seeds, observation, run_key, batch, reads_split
    )
    ar_rows = (policy.head == "ar") if needs_token_diagnostics is None else needs_token_diagnostics
    firsts: dict[SamplingMode, Call | None] = {}
    extras: dict[SamplingMode, Call | None] = {}
    with global_rngs_kept():
        for mode, text in sampled.items():
            results, first = _check_mode(
                policy, rows, mode, text, action_shape, ar_rows, mode in trained, explicit
            )
            report.checks += results
            firsts[mode] = first
        for mode, text in extra.items():  # declared, not run by the design: it must sample all the same
            call = call_act(policy, rows, range(len(rows.keys)), mode, GLOBAL_SEEDS[0])
            output, comparable = check_output(call, mode, action_shape, text, declared=True)
            report.checks.append(output)
            extras[mode] = call if comparable else None
    report.checks += check_noise_off_equals_deterministic(firsts)
    if explicit:
        report.checks += check_declared_logprobs(policy, capabilities, {**firsts, **extras}, trained)
    return report
