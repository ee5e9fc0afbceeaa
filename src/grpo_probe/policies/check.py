"""Check a policy against the ``act()`` contract in seconds, before any rollout: the counterpart of
Gymnasium's ``check_env`` for this package's policy protocol.

Why: the probe's oracles (parallel, draw-0, replay) catch a broken contract only after rollouts have run,
and they name where two runs diverged (seed, tick, column), not why. A policy that draws from a global
RNG, mixes rows of a batch, ignores ``mode.noise`` or returns a chunk of the wrong shape can be told so
from a handful of ``act`` calls on a few observations, with the rule it breaks and how to fix it. The
rules (docs/your-policy.md, "The act() contract, in full"):

- the output is a :class:`~grpo_probe.policies.protocol.PolicyOutput`: actions float32
  ``[B, chunk_length, action_dims]`` from the environment's spec, finite, in [-1, 1], and one
  :class:`~grpo_probe.policies.protocol.RowDiagnostics` per row (codes ``output-type``, ``action-dtype``,
  ``action-shape``, ``action-nonfinite``, ``action-range``, ``diagnostics``);
- the same observations and keys give the same bytes (``not-repeatable``), whatever the state of torch's,
  numpy's and Python's global RNGs (``global-rng``);
- a row's bytes do not depend on the other rows of its batch, their number or its position
  (``batch-dependent``);
- stochastic modes draw from the row's key, so draws of a group differ (``key-ignored``); modes with the
  noise off (``greedy``, ``temperature`` with ``mode.noise`` False) do not depend on the key
  (``noise-off-keyed``) and equal the deterministic sampler: temperature with the noise off picks greedy's
  ids, ``flow_sde`` at ``sde_a = 0`` is the Euler sampler bit for bit (``noise-off-differs``);
- AR rows carry ``token_ids``, ``token_logprobs`` and ``entropy`` (``ar-diagnostics``), which the analysis
  and the oracles read; rows of a mode phase 2 trains under carry their log-probs (``logprob-missing``);
- the policy fits the arm: its head, its observation width and the inputs it declares (``head``,
  ``obs-dim``, ``inputs``); a mode the arm samples does not raise (``act-error``);
- its declared capabilities (:class:`~grpo_probe.policies.protocol.PolicyCapabilities`) are well formed
  (``capabilities``) and hold every sampling kind the design runs the arm under (``capability-missing``:
  such a mode is not sampled); every declared kind samples, and the declared log-probs are recorded
  (``capability-false``), also for kinds the design does not run.

:func:`check_policy` runs the checks on a policy object; :func:`check_arm` derives them from a design and a
run config for one arm (its cells' and oracles' modes, phase 2's, the environment's chunk) and builds the
policy bound to it. The design is read by attribute only: the policies package sits beside the prereg in
the package layers and does not import it.
"""

from __future__ import annotations

import importlib
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from grpo_probe.envs.observation import (
    OBSERVATION_STATE,
    TASK,
    ObservationBatch,
    ObservationConfig,
    camera_of,
    policy_input_keys,
)
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies.protocol import (
    LOGPROBS_OF_HEAD,
    Policy,
    PolicyCapabilities,
    RowKey,
    SamplingMode,
    declared_capabilities,
    policy_capabilities,
    policy_name,
)
from grpo_probe.sampling import HEAD_OF_MODE, mode_text, sampler

__all__ = [
    "FINDING_CODES",
    "CheckResult",
    "Finding",
    "PolicyContractError",
    "PolicyReport",
    "arm_modes",
    "check_arm",
    "check_policy",
    "phase2_refusal",
    "served_refusal",
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
    "not-repeatable": "draw every random number from a generator keyed by the row's RowKey "
    "(grpo_probe.keyed_rng.numpy_generator, grpo_probe.policies.keyed_torch.torch_generator); no unseeded "
    "generators, clocks or os.urandom, and deterministic kernels on a GPU",
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

_STATE_TAG = tag("check_policy_state")
_FRAME_TAG = tag("check_policy_frame")
_GLOBAL_SEEDS = (20240611, 11060242)
"""Seeds the global RNGs are set to around ``act`` calls: the same for a repeat, the other to vary them."""
_EXTRA_DRAWS = 8
"""Draws of one observation sampled when the batch's two draws of it came out equal."""
_OWN_FORMAT_ADAPTERS = (None, "grpo_probe.policies.checkpoint:load_policy")
"""Bindings whose checkpoint is in this package's format, which phase 2 can train."""
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


def _draw0_twins(mode: SamplingMode) -> tuple[SamplingMode, ...]:
    """The modes a cell's draw-0 oracle runs beside it, as its kind declares them
    (:class:`grpo_probe.sampling.Draw0`): T without noise and greedy; SDE at a = 0 and Euler."""
    draw0 = sampler(mode.kind).draw0
    if draw0.probe is None or draw0.twin_of is None or draw0.probe(mode) == mode:
        return ()
    return (draw0.probe(mode), draw0.twin_of(mode))


def _noise_off(mode: SamplingMode) -> bool:
    """Modes whose chunk must not depend on the key: greedy, and temperature with the noise off."""
    return mode.kind == "greedy" or (mode.kind == "temperature" and not mode.noise)


# -- observations and calls -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Rows:
    """The check's batch: per row an observation (state, frames, task) and a key.

    Row 1 repeats row 0's observation under another draw (the key test); the others are distinct.
    """

    declared: tuple[str, ...]
    head: str
    values: tuple[dict[str, Any], ...]
    keys: tuple[RowKey, ...]

    def batch(self, rows: Sequence[int]) -> np.ndarray | ObservationBatch:
        """The observation batch of ``rows``, in that order, in the form the engine hands the policy."""
        if self.declared == (OBSERVATION_STATE,):
            return np.stack([self.values[r][OBSERVATION_STATE] for r in rows]).astype(np.float32)
        out: dict[str, Any] = {}
        for key in self.declared:
            if key == TASK:
                out[key] = tuple(self.values[r][TASK] for r in rows)
            else:
                out[key] = np.stack([self.values[r][key] for r in rows])
        return ObservationBatch(out, self.head)


def _observation_rows(
    declared: tuple[str, ...],
    head: str,
    states: np.ndarray,
    seeds: Sequence[int],
    observation: ObservationConfig,
    run_key: int,
    batch: int,
) -> _Rows:
    """``batch`` rows over ``states``: row 0 and row 1 share observation 0 (draws 0 and 1), row r >= 2 reads
    observation r - 1 (draw r). Frames are keyed uint8 noise at the registered camera size."""
    values = []
    keys = []
    for r in range(batch):
        i = 0 if r < 2 else r - 1
        row: dict[str, Any] = {OBSERVATION_STATE: np.asarray(states[i], dtype=np.float32)}
        for key in declared:
            camera = camera_of(key)
            if camera is not None:
                size = observation.camera(camera)
                rng = numpy_generator(run_key, _FRAME_TAG, int(seeds[i]), sorted(declared).index(key))
                row[key] = rng.integers(0, 256, size=(size.height, size.width, 3), dtype=np.uint8)
            elif key == TASK:
                row[key] = observation.task
        values.append(row)
        keys.append(RowKey(run_key, int(seeds[i]), 0, r))
    return _Rows(declared, head, tuple(values), tuple(keys))


@dataclass
class _Call:
    """One ``act`` call: its rows, and either the output's parts or the exception it raised."""

    rows: tuple[int, ...]
    actions: Any = None
    diagnostics: Any = None
    error: BaseException | None = None
    output: Any = None


@contextmanager
def _global_rngs_kept() -> Iterator[None]:
    """Restore torch's, numpy's and Python's global RNG states on exit (the check seeds them)."""
    import torch

    py_state = random.getstate()
    np_state = np.random.get_state()  # noqa: NPY002 - the global state the check reseeds
    torch_state = torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)  # noqa: NPY002
        torch.set_rng_state(torch_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)


def _seed_globals(seed: int) -> None:
    """Seed the global RNGs a policy might draw from: Python's, numpy's, torch's CPU one, and CUDA's when a
    policy already initialized CUDA (seeding it otherwise would queue a seed for whoever initializes it)."""
    import torch

    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - the check sets the legacy global state on purpose
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def _act(
    policy: Policy,
    rows: _Rows,
    which: Sequence[int],
    mode: SamplingMode,
    global_seed: int,
    draws: Sequence[int] | None = None,
) -> _Call:
    """Call ``act`` on rows ``which`` (optionally with other draws) with the global RNGs set to a seed."""
    keys = [rows.keys[r] for r in which]
    if draws is not None:
        keys = [replace(k, draw=d) for k, d in zip(keys, draws, strict=True)]
    _seed_globals(global_seed)
    call = _Call(tuple(which))
    try:
        out = policy.act(rows.batch(which), keys, mode)  # type: ignore[arg-type]
    except Exception as exc:  # the checker reports whatever a user's act raises
        call.error = exc
        return call
    call.output = out
    call.actions = getattr(out, "actions", None)
    call.diagnostics = getattr(out, "diagnostics", None)
    return call


# -- comparing rows ---------------------------------------------------------------------------------------
_DIAGNOSTIC_FIELDS = ("logprob", "token_ids", "token_logprobs", "entropy", "step_logprobs")


def _row_fields(call: _Call, i: int, fields: Sequence[str]) -> dict[str, Any]:
    """Row ``i`` of a call: its actions and diagnostics fields, as values to compare bytewise."""
    out: dict[str, Any] = {}
    for name in fields:
        if name == "actions":
            out[name] = np.asarray(call.actions)[i]
        else:
            out[name] = getattr(call.diagnostics[i], name, None)
    return out


def _as_array(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    if isinstance(value, (float, int, np.floating, np.integer)):
        return np.asarray([value], dtype=np.float64)
    return np.ascontiguousarray(np.asarray(value))


def _difference(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str]) -> str | None:
    """The first field in which two rows differ, with where and both values; None when equal bytewise."""
    for field_name in a:
        x, y = _as_array(a[field_name]), _as_array(b[field_name])
        if x is None and y is None:
            continue
        if x is None or y is None:
            return f"{field_name} is {'None' if x is None else 'set'} in {names[0]}, not in {names[1]}"
        if x.dtype != y.dtype or x.shape != y.shape:
            return (
                f"{field_name} is {x.dtype} {list(x.shape)} in {names[0]}, {y.dtype} {list(y.shape)} in "
                f"{names[1]}"
            )
        if x.tobytes() != y.tobytes():
            flat = np.flatnonzero(x.ravel() != y.ravel())
            at = int(flat[0]) if flat.size else 0
            index = [int(k) for k in np.unravel_index(at, x.shape)] if x.shape and x.size > 1 else []
            where = f"{index}" if index else ""
            return (
                f"{field_name}{where} is {x.ravel()[at].item()!r} in {names[0]}, {y.ravel()[at].item()!r} "
                f"in {names[1]}"
            )
    return None


def _usable(call: _Call) -> bool:
    """Whether a call returned one action row and one diagnostics record per row it was given."""
    n = len(call.rows)
    actions, diagnostics = call.actions, call.diagnostics
    return (
        call.error is None
        and isinstance(actions, np.ndarray)
        and actions.ndim >= 1
        and actions.shape[0] == n
        and isinstance(diagnostics, Sequence)
        and len(diagnostics) == n
    )


_ALL_FIELDS = ("actions", *_DIAGNOSTIC_FIELDS)


def _same_rows(
    first: _Call, second: _Call, names: tuple[str, str], fields: Sequence[str] = _ALL_FIELDS
) -> str | None:
    """The first difference between the rows two calls share (by row index), naming the row."""
    if not _usable(second):
        what = f"raised {second.error!r}" if second.error is not None else "returned rows of another count"
        return f"{names[1]} {what}"
    where = {r: i for i, r in enumerate(second.rows)}
    for i, r in enumerate(first.rows):
        if r in where:
            diff = _difference(_row_fields(first, i, fields), _row_fields(second, where[r], fields), names)
            if diff is not None:
                return f"row {r}: {diff}"
    return None


# -- the checks -------------------------------------------------------------------------------------------
def _finding(code: str, message: str, mode: SamplingMode | None = None, fix: str | None = None) -> Finding:
    return Finding(code, message, fix or FINDING_CODES[code], None if mode is None else mode_text(mode))


def _result(name: str, findings: list[Finding], detail: str = "") -> CheckResult:
    return CheckResult(name, "FAIL" if findings else "ok", detail, tuple(findings))


def _structure(
    call: _Call, mode: SamplingMode, action_shape: tuple[int, int], reasons: str, declared: bool = False
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
            return _result(name, [_finding("capability-false", message, mode)]), False
        message = f"{error} (the design samples this mode for {reasons})"
        return _result(name, [_finding("act-error", message, mode)]), False
    if call.actions is None or call.diagnostics is None:
        message = (
            f"act() returned {type(call.output).__name__}, not a PolicyOutput with actions and diagnostics"
        )
        return _result(name, [_finding("output-type", message, mode)]), False
    findings = []
    actions = call.actions
    if not isinstance(actions, np.ndarray):
        findings.append(
            _finding("action-dtype", f"actions are a {type(actions).__name__}, not a numpy array", mode)
        )
        return _result(name, findings), False
    if actions.dtype != np.float32:
        findings.append(_finding("action-dtype", f"actions are {actions.dtype}, not float32", mode))
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
        findings.append(_finding("action-shape", message, mode))
    if actions.dtype.kind == "f":
        finite = np.isfinite(actions)
        if not finite.all():
            at = tuple(int(k) for k in np.argwhere(~finite)[0])
            findings.append(_finding("action-nonfinite", f"actions{list(at)} is {actions[at]}", mode))
        elif actions.size and (actions.min() < -1.0 or actions.max() > 1.0):
            findings.append(
                _finding(
                    "action-range",
                    f"actions span [{float(actions.min()):.4g}, {float(actions.max()):.4g}], outside [-1, 1]",
                    mode,
                )
            )
    diagnostics = call.diagnostics
    if not isinstance(diagnostics, Sequence) or len(diagnostics) != n:
        count = len(diagnostics) if isinstance(diagnostics, Sequence) else type(diagnostics).__name__
        findings.append(_finding("diagnostics", f"{count} diagnostics records for {n} rows", mode))
    elif not all(hasattr(d, "logprob") for d in diagnostics):
        bad = next(i for i, d in enumerate(diagnostics) if not hasattr(d, "logprob"))
        findings.append(
            _finding("diagnostics", f"diagnostics[{bad}] is a {type(diagnostics[bad]).__name__}", mode)
        )
    comparable = (
        isinstance(diagnostics, Sequence)
        and len(diagnostics) == n
        and all(hasattr(d, "logprob") for d in diagnostics)
        and actions.ndim >= 1
        and actions.shape[0] == n
    )
    detail = f"actions {actions.dtype} {list(actions.shape)}, for {reasons}"
    return _result(name, findings, detail), comparable


def _ar_diagnostics(call: _Call, mode: SamplingMode) -> CheckResult:
    findings = []
    for i, d in enumerate(call.diagnostics):
        missing = [f for f in ("token_ids", "token_logprobs", "entropy") if getattr(d, f, None) is None]
        if missing:
            findings.append(_finding("ar-diagnostics", f"row {i} has no {', '.join(missing)}", mode))
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
            findings.append(_finding("ar-diagnostics", f"row {i}: {problem}", mode))
            break
    return _result(f"{mode_text(mode)}: AR diagnostics", findings, "token_ids, token_logprobs, entropy")


def _phase2_logprobs(call: _Call, mode: SamplingMode) -> CheckResult:
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
                _finding("logprob-missing", f"row {i}: {problem} (phase 2 trains under this mode)", mode)
            )
            break
    detail = "logprob and step_logprobs" if mode.kind == "flow_sde" else "logprob and token_logprobs"
    return _result(f"{mode_text(mode)}: log-probs for phase 2", findings, detail)


def _draw_pair(first: _Call) -> tuple[_Call, _Call]:
    """Rows 0 and 1 of the batch's first call (one observation, draws 0 and 1) as two one-row calls."""
    return (
        _Call((0,), first.actions[:1], first.diagnostics[:1]),
        _Call((0,), first.actions[1:2], first.diagnostics[1:2]),
    )


def _key_dependence(policy: Policy, rows: _Rows, mode: SamplingMode, first: _Call) -> CheckResult:
    """Stochastic modes: draws of one observation differ; noise-off modes: they are the same bytes."""
    label = mode_text(mode)
    if _noise_off(mode):
        diff = _same_rows(*_draw_pair(first), ("draw 0", "draw 1"))
        findings = []
        if diff is not None:
            message = (
                f"two draws of one observation differ with the noise off: {diff.removeprefix('row 0: ')}"
            )
            findings.append(_finding("noise-off-keyed", message, mode))
        return _result(f"{label}: independent of the key", findings, "draws 0 and 1 of one observation")
    name = f"{label}: draws differ by key"
    if _same_rows(*_draw_pair(first), ("draw 0", "draw 1"), ("actions", "token_ids")) is not None:
        return _result(name, [], "draws 0 and 1 of one observation differ")
    more = _act(policy, rows, [0] * _EXTRA_DRAWS, mode, _GLOBAL_SEEDS[0], draws=range(_EXTRA_DRAWS))
    if not _usable(more):
        return CheckResult(name, "skip", f"draws 0..{_EXTRA_DRAWS - 1} of one observation gave no rows")
    chunks = {np.asarray(more.actions)[i].tobytes() for i in range(_EXTRA_DRAWS)}
    if len(chunks) > 1:
        return _result(name, [], f"{len(chunks)} distinct chunks in {_EXTRA_DRAWS} draws of one observation")
    logprob = more.diagnostics[0].logprob
    if logprob is not None and math.isfinite(float(logprob)) and float(logprob) > math.log(0.5):
        reason = (
            f"{_EXTRA_DRAWS} draws gave one chunk, whose recorded probability is "
            f"{math.exp(float(logprob)):.2f}: too peaked to tell a keyed sampler from one that ignores "
            "the key"
        )
        return CheckResult(name, "skip", reason)
    message = f"{_EXTRA_DRAWS} draws of one observation (keys differing in draw only) gave the same chunk"
    return _result(name, [_finding("key-ignored", message, mode)])


def _globals_and_batch(
    policy: Policy, rows: _Rows, mode: SamplingMode, first: _Call
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
    varied = _act(policy, rows, backwards, mode, _GLOBAL_SEEDS[1])
    if _same_rows(first, varied, ("the batch", "the reversed batch")) is not None:
        reseeded = _act(policy, rows, everything, mode, _GLOBAL_SEEDS[1])
        diff = _same_rows(first, reseeded, ("the first call", "a call with the global RNGs reseeded"))
        if diff is not None:
            message = f"the same call with torch's, numpy's and Python's global RNGs reseeded differs: {diff}"
            global_findings.append(_finding("global-rng", message, mode))
        if global_findings:  # rows drawn in turn from a global RNG depend on their position too
            return global_findings, None
        reordered = _act(policy, rows, backwards, mode, _GLOBAL_SEEDS[0])
        diff = _same_rows(first, reordered, ("the batch", "the reversed batch"))
        if diff is not None:
            message = f"the batch in reverse order gives its rows other bytes: {diff}"
            batch_findings.append(_finding("batch-dependent", message, mode))
    for r in (0, n - 1):
        if batch_findings:
            break
        alone = _act(policy, rows, [r], mode, _GLOBAL_SEEDS[0])
        diff = _same_rows(first, alone, (f"the batch of {n}", "alone"))
        if diff is not None:
            message = f"a row alone differs from the same row in a batch: {diff}"
            batch_findings.append(_finding("batch-dependent", message, mode))
    return global_findings, batch_findings


def _check_mode(
    policy: Policy,
    rows: _Rows,
    mode: SamplingMode,
    reasons: str,
    action_shape: tuple[int, int],
    needs_token_diagnostics: bool,
    needs_logprobs: bool,
    declared: bool = False,
) -> tuple[list[CheckResult], _Call | None]:
    """Every per-mode check; returns the results and the batch's first call when its rows can be compared."""
    label = mode_text(mode)
    n = len(rows.keys)
    first = _act(policy, rows, range(n), mode, _GLOBAL_SEEDS[0])
    output, comparable = _structure(first, mode, action_shape, reasons, declared)
    results = [output]
    if not comparable:
        if first.error is None:
            results.append(CheckResult(f"{label}: bytes", "skip", "the output's rows cannot be compared"))
        return results, None
    repeat = _act(policy, rows, range(n), mode, _GLOBAL_SEEDS[0])
    diff = _same_rows(first, repeat, ("the first call", "the repeat"))
    findings = []
    if diff is not None:
        message = f"two calls with the same observations and keys differ: {diff}"
        findings.append(_finding("not-repeatable", message, mode))
    results.append(_result(f"{label}: same keys, same bytes", findings, f"{n} rows, called twice"))
    if findings:
        skipped = "skipped: the output is not a function of the observations and keys"
        for check in ("no global RNG", "rows independent of the batch", "keys"):
            results.append(CheckResult(f"{label}: {check}", "skip", skipped))
    else:
        global_findings, batch_findings = _globals_and_batch(policy, rows, mode, first)
        results.append(_result(f"{label}: no global RNG", global_findings, "global RNGs reseeded"))
        batch_name = f"{label}: rows independent of the batch"
        if batch_findings is None:
            skipped = "skipped: undecidable while the rows draw from a global RNG"
            results.append(CheckResult(batch_name, "skip", skipped))
        else:
            detail = f"rows alone and at other positions of a batch of {n}"
            results.append(_result(batch_name, batch_findings, detail))
        if global_findings or batch_findings:
            skipped = "skipped: a row's bytes depend on more than its observation and key"
            results.append(CheckResult(f"{label}: keys", "skip", skipped))
        else:
            results.append(_key_dependence(policy, rows, mode, first))
    if needs_token_diagnostics and mode.head == "ar":
        results.append(_ar_diagnostics(first, mode))
    if needs_logprobs:
        results.append(_phase2_logprobs(first, mode))
    return results, first


def _noise_off_equals_deterministic(firsts: Mapping[SamplingMode, _Call | None]) -> list[CheckResult]:
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
        diff = _same_rows(call, other, (mode_text(mode), mode_text(reference)), fields)
        findings = []
        if diff is not None:
            message = f"the draw-0 oracle's two sides differ on the same keys: {diff}"
            findings.append(_finding("noise-off-differs", message, mode))
        results.append(_result(name, findings, f"{', '.join(fields)} on the same keys (the draw-0 oracle)"))
    return results


def _fit(
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
            _finding("attributes", f"the policy ({type(policy).__name__}) has no {', '.join(missing)}")
        )
        return _result("fits the arm", findings), None
    if head is not None and policy.head != head:
        findings.append(_finding("head", f"the policy's head is {policy.head!r}, the arm's is {head!r}"))
    elif policy.head not in HEAD_OF_MODE.values():
        heads = " or ".join(repr(h) for h in dict.fromkeys(HEAD_OF_MODE.values()))
        findings.append(_finding("head", f"the policy's head is {policy.head!r}, not {heads}"))
    if obs_dim is not None and policy.obs_dim != obs_dim:
        findings.append(
            _finding(
                "obs-dim", f"the policy reads {policy.obs_dim!r} numbers, the environment observes {obs_dim}"
            )
        )
    try:
        declared = policy_input_keys(policy)
    except ValueError as exc:
        findings.append(_finding("inputs", str(exc)))
        return _result("fits the arm", findings), None
    allowed = tuple(inputs) if inputs is not None else observation.keys
    unregistered = [k for k in declared if k not in allowed]
    if unregistered:
        findings.append(
            _finding(
                "inputs",
                f"the policy declares {', '.join(unregistered)}, which the arm does not register "
                f"(its inputs: {', '.join(allowed)})",
            )
        )
    cameras = {c.name for c in observation.cameras}
    unrendered = [k for k in declared if (c := camera_of(k)) is not None and c not in cameras]
    if unrendered or (TASK in declared and not observation.task):
        findings.append(
            _finding(
                "inputs", f"the design registers no {', '.join(unrendered or [TASK])} for the policy to read"
            )
        )
    detail = f"head {policy.head!r}, obs_dim {policy.obs_dim!r}, reads {', '.join(declared)}"
    if any(camera_of(k) is not None for k in declared):
        detail += " (frames: keyed noise at the registered size)"
    return _result("fits the arm", findings, detail), (None if findings else declared)


def _capabilities(
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
        return _result(name, [_finding("capabilities", str(exc))]), default, False
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
        findings.append(_finding("capability-missing", message, uses[0][0]))
    if declared is not None:
        detail = f"{subject} {capabilities.describe()}"
    else:
        detail = (
            f"{subject} declares none: taken to sample every kind of the {capabilities.head} head (each one "
            "the design runs is sampled below), with no log-probs for phase 2 and no trainable parameters"
        )
    return _result(name, findings, detail), capabilities, declared is not None


def _declared_modes(
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


def _declared_logprobs(
    policy: Any,
    capabilities: PolicyCapabilities,
    calls: Mapping[SamplingMode, _Call | None],
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
    result = _phase2_logprobs(call, mode)
    findings = [
        _finding(
            "capability-false",
            f"{policy_name(policy)} declares {capabilities.logprobs} log-probs, but "
            + f.message.removesuffix(" (phase 2 trains under this mode)"),
            mode,
        )
        for f in result.findings
    ]
    return [_result(name, findings, f"{result.detail} of {mode_text(mode)} rows")]


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
        for twin in _draw0_twins(mode) if draw0_twins else ():
            reasons.setdefault(twin, []).append(f"the draw-0 oracle of {mode_text(mode)}")
    fit, declared = _fit(policy, head, obs_dim, inputs, observation)
    report = PolicyReport(
        subject or f"check-policy: {type(policy).__name__} (head {getattr(policy, 'head', '?')!r})"
    )
    report.checks.append(fit)
    if declared is None:
        report.checks.append(CheckResult("sampling modes", "skip", "skipped until the policy fits the arm"))
        return report
    trained = set(needs_logprobs)
    why = {mode: ", ".join(dict.fromkeys(texts)) for mode, texts in reasons.items()}
    capable, capabilities, explicit = _capabilities(policy, why, arm)
    report.checks.append(capable)
    sampled = {mode: text for mode, text in why.items() if mode.kind in capabilities.kinds}
    extra = _declared_modes(capabilities, sampled) if explicit else {}
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
    rows = _observation_rows(declared, str(policy.head), states, seeds, observation, run_key, batch)
    ar_rows = (policy.head == "ar") if needs_token_diagnostics is None else needs_token_diagnostics
    firsts: dict[SamplingMode, _Call | None] = {}
    extras: dict[SamplingMode, _Call | None] = {}
    with _global_rngs_kept():
        for mode, text in sampled.items():
            results, first = _check_mode(
                policy, rows, mode, text, action_shape, ar_rows, mode in trained, explicit
            )
            report.checks += results
            firsts[mode] = first
        for mode, text in extra.items():  # declared, not run by the design: it must sample all the same
            call = _act(policy, rows, range(len(rows.keys)), mode, _GLOBAL_SEEDS[0])
            output, comparable = _structure(call, mode, action_shape, text, declared=True)
            report.checks.append(output)
            extras[mode] = call if comparable else None
    report.checks += _noise_off_equals_deterministic(firsts)
    if explicit:
        report.checks += _declared_logprobs(policy, capabilities, {**firsts, **extras}, trained)
    return report


# -- one arm of a design ----------------------------------------------------------------------------------
def arm_modes(
    prereg: Any, arm_id: str, *, phase2: bool = True
) -> tuple[dict[SamplingMode, str], tuple[SamplingMode, ...]]:
    """The modes the design runs arm ``arm_id`` under, each with why, and those phase 2 trains under.

    ``prereg`` is a :class:`grpo_probe.prereg.Prereg`: the anchor, the enabled cells of the arm, the
    parallel oracle's modes of its head (when the oracle runs the arm), each cell's draw-0 twins, and with
    ``phase2`` (the arm's binding is a checkpoint phase 2 can train) the phase-2 mode of its head.
    """
    arm = prereg.arms[arm_id]
    why: dict[SamplingMode, list[str]] = {}

    def add(mode: SamplingMode, reason: str) -> None:
        why.setdefault(mode, []).append(reason)

    add(arm.anchor, "the anchor")
    cells = [c for c in prereg.enabled_cells if c.arm == arm_id]
    for cell in cells:
        add(cell.mode, f"cell {cell.id}")
    if arm_id in prereg.oracles.parallel.arms:
        for mode in prereg.oracles.parallel.modes:
            if mode.head == arm.head:
                add(mode, "the parallel oracle")
    for cell in cells:
        for twin in _draw0_twins(cell.mode):
            add(twin, f"the draw-0 oracle of {cell.id}")
    trained: tuple[SamplingMode, ...] = ()
    section = getattr(prereg, "phase2", None)
    if phase2 and section is not None and arm.head in section.heads:
        mode = section.heads[arm.head].mode
        add(mode, "phase 2")
        trained = (mode,)
    return {mode: ", ".join(dict.fromkeys(reasons)) for mode, reasons in why.items()}, trained


def phase2_refusal(
    arm: str, head: str, adapter: str | None, policy: str, capabilities: PolicyCapabilities | None
) -> str | None:
    """Why phase 2 cannot train arm ``arm`` (of ``head``) bound through ``adapter`` to a policy of class
    ``policy`` (``module:Class``) that declares ``capabilities`` (None: declares none); None when it can.

    Phase 2 needs trainable parameters and the log-probs its head's loss divides by
    (:data:`~grpo_probe.policies.protocol.LOGPROBS_OF_HEAD`); its trainer reads and writes this package's
    checkpoint format, so an adapter that declares both is refused too, for that reason. The binding
    step reports it and phase 2 raises it, in the same words.
    """
    if adapter in _OWN_FORMAT_ADAPTERS:
        return None
    bound = f"arm {arm!r} is bound through adapter {adapter} to {policy}"
    effective = capabilities if capabilities is not None else PolicyCapabilities.of_head(head)
    lacking = effective.lacks(logprobs=LOGPROBS_OF_HEAD[head], trainable=True)
    if lacking:
        declares = "which declares no capabilities and so lacks" if capabilities is None else "which lacks"
        return f"{bound}, {declares} what phase 2 needs to train a {head} arm: {', '.join(lacking)}"
    return (
        f"{bound}, which declares trainable parameters and {effective.logprobs} log-probs, but phase 2's "
        "trainer reads and writes only checkpoints in grpo-probe's own format (bind the arm with source: "
        "reference or adapter grpo_probe.policies.checkpoint:load_policy)"
    )


def _phase2_readiness(prereg: Any, arm_id: str, adapter: str | None, policy: Any) -> CheckResult | None:
    """Whether phase 2 could train the arm as bound, for a design whose phase 2 trains its head (a note:
    phase 2 refuses it when it starts, not the binding)."""
    head = prereg.arms[arm_id].head
    section = getattr(prereg, "phase2", None)
    if section is None or head not in section.heads:
        return None
    try:
        declared = declared_capabilities(policy)
    except ValueError:
        return None  # the capabilities check reports it
    refusal = phase2_refusal(arm_id, head, adapter, policy_name(policy), declared)
    mode = mode_text(section.heads[head].mode)
    if refusal is None:
        return CheckResult("phase 2", "ok", f"phase 2 can train this checkpoint under {mode}")
    return CheckResult("phase 2", "skip", f"phase 2 will refuse to train it: {refusal}")


def _served_phase2(prereg: Any, arm_id: str, address: str) -> CheckResult | None:
    """The phase-2 note of a served arm, for a design whose phase 2 trains its head: it will refuse."""
    section = getattr(prereg, "phase2", None)
    if section is None or prereg.arms[arm_id].head not in section.heads:
        return None
    refusal = served_refusal(arm_id, address)
    return CheckResult("phase 2", "skip", f"phase 2 will refuse to train it: {refusal}")


def served_refusal(arm: str, address: str) -> str:
    """Why phase 2 cannot train an arm bound to a policy server (the binding step and phase 2 say it)."""
    return (
        f"arm {arm!r} is bound to the policy served at {address}; phase 2's trainer updates the weights "
        "of a checkpoint in grpo-probe's own format that it holds (bind the arm with source: reference or "
        "a checkpoint to train it)"
    )


def _build(adapter: str | None, checkpoint: str, device: str, row_block: int | None) -> Policy:
    """The bound policy, built the way the workflow's ``PolicySource`` builds it."""
    if adapter is None:
        from grpo_probe.policies.checkpoint import load_policy

        return load_policy(checkpoint, device=device, row_block=row_block)
    module_name, _, attr = adapter.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"adapter {adapter!r}: cannot import module {module_name!r} ({exc}); install it or put it on "
            "PYTHONPATH"
        ) from exc
    function = getattr(module, attr, None)
    if not callable(function):
        raise ValueError(f"adapter {adapter!r}: module {module_name!r} has no callable {attr!r}")
    return function(checkpoint=checkpoint, device=device)


def _design_states(prereg: Any, n: int) -> tuple[np.ndarray, list[int]]:
    """First observations of ``n`` spawns of the design's environment: its seeds, then the ones after."""
    from grpo_probe.envs.registry import make_env

    seeds = list(prereg.seeds[:n])
    while len(seeds) < n:
        seeds.append(max(seeds, default=-1) + 1)
    env = make_env(prereg.env)
    return np.stack([np.asarray(env.reset(s), dtype=np.float32) for s in seeds]), seeds


def check_arm(
    prereg: Any,
    run_config: Any,
    arm_id: str,
    *,
    policy: Policy | None = None,
    device: str | None = None,
    batch: int = 4,
) -> PolicyReport:
    """Check the policy bound to ``arm_id`` against everything the design asks of it.

    ``prereg`` is a :class:`grpo_probe.prereg.Prereg`, ``run_config`` a
    :class:`grpo_probe.prereg.RunConfig` (its binding of the arm and its device; None: the arm's reference
    checkpoint on the CPU). The modes come from :func:`arm_modes` (phase 2's only for a checkpoint in this
    package's format, the only kind phase 2 trains), the chunk shape and observation width from the
    environment's spec, the observations from resets of the design's environment on its seeds. ``policy``
    replaces building the bound one (a caller holding a ``PolicySource`` passes ``source.build()``).
    A mode whose kind the policy's capabilities lack is a ``capability-missing`` finding naming the arm,
    the policy's class and the cells, anchor or oracles that need it; for a design with a phase 2 a last
    check says whether phase 2 could train the arm as bound (:func:`phase2_refusal`).

    A reference arm (trained by the workflow) is checked once its checkpoint exists under the run's
    results folder; before that the report says it skipped. Raises ``ValueError`` for an arm the design
    does not register and ``FileNotFoundError`` for a bound checkpoint that is missing.
    """
    from grpo_probe.envs.registry import env_spec

    if arm_id not in prereg.arms:
        raise ValueError(f"{prereg.path}: no arm {arm_id!r} is registered (arms: {', '.join(prereg.arms)})")
    arm = prereg.arms[arm_id]
    binding = None if run_config is None else run_config.arms.get(arm_id)
    device = device or (run_config.device if run_config is not None else "cpu")
    spec = env_spec(prereg.env)
    served = binding is not None and binding.source == "server"
    if served:
        checkpoint, adapter = "", None
        bound = f"the policy served at {binding.address}"
        device = "cpu"  # the server places its own model
    elif binding is None or binding.source == "reference":
        results = Path(run_config.results if run_config is not None else "results")
        checkpoint, adapter = str(results / prereg.name / "arms" / arm_id / "policy.pt"), None
        bound = f"reference checkpoint {checkpoint}"
    else:
        checkpoint, adapter = str(binding.path), binding.adapter
        bound = f"{checkpoint} through {adapter}" if adapter else checkpoint
    subject = (
        f"check-policy: arm {arm_id!r} of {prereg.path} (head {arm.head!r}), {bound} on {device}; "
        f"environment {spec.id!r}: actions [B, {spec.chunk_length}, {spec.action_dims}], "
        f"observations of {spec.obs_dim}"
    )
    if policy is None and served:
        from grpo_probe.policies.served import DEFAULT_TIMEOUT_S, ServedPolicy, ServedPolicyError

        try:
            policy = ServedPolicy(binding.address, binding.timeout_s or DEFAULT_TIMEOUT_S)
        except ServedPolicyError as exc:
            raise ValueError(str(exc)) from None
    if policy is None:
        if not Path(checkpoint).exists():
            if binding is None or binding.source == "reference":
                report = PolicyReport(subject)
                reason = "the workflow trains it; check it after training, or bind a checkpoint of your own"
                report.checks.append(
                    CheckResult("reference checkpoint", "skip", f"{checkpoint} does not exist: {reason}")
                )
                return report
            raise FileNotFoundError(f"{checkpoint}: checkpoint bound to arm {arm_id!r} not found")
        policy = _build(adapter, checkpoint, device, arm.row_block if adapter is None else None)
    modes, trained = arm_modes(prereg, arm_id, phase2=not served and adapter in _OWN_FORMAT_ADAPTERS)
    states, seeds = _design_states(prereg, batch - 1)
    report = check_policy(
        policy,
        action_shape=(spec.chunk_length, spec.action_dims),
        modes=modes,
        states=states,
        seeds=seeds,
        obs_dim=spec.obs_dim,
        head=arm.head,
        inputs=arm.inputs,
        observation=prereg.observation,
        needs_token_diagnostics=arm.head == "ar",
        needs_logprobs=trained,
        draw0_twins=False,  # arm_modes lists them, with the cells they belong to
        batch=batch,
        run_key=prereg.run_key,
        subject=subject,
        arm=arm_id,
    )
    if served:
        readiness = _served_phase2(prereg, arm_id, str(binding.address))
    else:
        readiness = _phase2_readiness(prereg, arm_id, adapter, policy)
    if readiness is not None and report.checks[-1].name != "sampling modes":
        report.checks.append(readiness)
    return report
