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
policy bound to it. The checks live by family, each in its own module:

- :mod:`.report`: the finding codes and fixes, a check's outcome and the report the command prints;
- :mod:`.calls` and :mod:`.compare`: the keyed observation rows, the ``act`` calls with the global RNGs
  seeded, and the byte comparison of two calls' rows;
- :mod:`.output`: the contract and shape checks on one call's output (``output-type`` to
  ``diagnostics``, ``ar-diagnostics``, ``logprob-missing``);
- :mod:`.determinism`: the repeat, global-RNG, batch, key and noise-off checks;
- :mod:`.fit`: the fit to the arm (``attributes``, ``head``, ``obs-dim``, ``inputs``) and the declared
  capabilities;
- :mod:`.policy`: :func:`check_policy`, which runs them; :mod:`.arm`: :func:`check_arm` and what it reads
  from a design.
"""

from __future__ import annotations

from grpo_probe.policies.check.arm import arm_modes, check_arm, phase2_refusal, served_refusal
from grpo_probe.policies.check.policy import check_policy
from grpo_probe.policies.check.report import (
    FINDING_CODES,
    CheckResult,
    Finding,
    PolicyContractError,
    PolicyReport,
)

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
