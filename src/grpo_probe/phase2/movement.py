"""How far the pilot moved the policy: KL to the initial policy, and the change of the anchor's actions.

Why: a held-out comparison is evidence about the prediction only if training changed the policy it
runs, the arm's anchor sampler. A pilot whose learning rate, clip range or kept groups left the anchor's
actions where they were tested nothing, and phase2.md must say "not tested", not "not shown" (nor
"held": on a chaotic scene a tiny action change still reshuffles the held-out outcomes). Two reads, both
comparing the final checkpoint theta_N with the initial one theta_0:

- **KL to the initial policy**, on iteration 0's rollouts (theta_0's own samples, recorded with their
  log-probs): per token (AR) or per SDE step of a chunk (flow), Schulman's k3 estimator
  (http://joschu.net/blog/kl-approx.html; DeepSeekMath arXiv:2402.03300v3, Eq. 4) with samples from
  pi_0 and r = pi_N(a) / pi_0(a):

      KL(pi_0 || pi_N) = E_{a ~ pi_0}[ r - 1 - log r ],   log pi_0(a) as recorded, log pi_N(a) recomputed

  by the trainer's own recompute functions (teacher forcing under the sampling temperature; the flow chain
  regenerated from the row's keys under theta_0 and scored under theta_N). It is what GRPO's KL term
  (``kl_beta``) would penalise, measured whether or not the design turns that term on.
- **Anchor movement**: the arm's deterministic anchor sampler (the deployed policy, the one the held-out
  evaluation runs) under theta_0 and theta_N on the same observations, with the same keys: every replan's
  observation of theta_0's held-out episodes. mean |a_N - a_0| over every action entry of every chunk, in
  the normalized action units of the environment protocol ([-1, 1], a range of 2).

"Did not move" (:attr:`Movement.moved` False) is the anchor movement below its floor, whatever the KL:
the held-out evaluation runs the anchor sampler, so a pilot whose anchor did not move compares the
deployed policy with itself, however far its sampling distribution moved. The KL is reported beside it,
against its own floor, to say whether the sampling distribution moved (phase2.md says so when it did and
the anchor did not). Each floor with its reason:

- action floor = :data:`ACTION_MOVEMENT_TOL` of the action range: it alone decides "moved".
- KL floor = 1/2 x ``replay_atol``^2 per entry, ``replay_atol`` the head's registered replay tolerance:
  for small log-ratios k3 = (log r)^2 / 2 + O((log r)^3), so a KL at or below the floor is a root-mean-
  square log-ratio within the tolerance the design registers as float rounding between the sampler and the
  trainer. The same checkpoint lands there (its recorded and recomputed log-probs differ by rounding only).

Both are computed on the CPU, single-threaded, whatever the configured device: the same inputs give the
same bytes.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from grpo_probe.phase2.evaluate import HeldOutObservations
from grpo_probe.phase2.losses import ar_kl_k3
from grpo_probe.phase2.recompute import HeadModel, load_head_model, recompute_logprobs, unit_chains
from grpo_probe.phase2.rollouts import RolloutBatch
from grpo_probe.policies.checkpoint import load_policy
from grpo_probe.policies.protocol import Policy, SamplingMode
from grpo_probe.policies.train import deterministic_torch

__all__ = [
    "ACTION_MOVEMENT_TOL",
    "ACTION_RANGE",
    "Movement",
    "anchor_action_change",
    "kl_floor",
    "kl_to_initial",
    "policy_movement",
]

ACTION_RANGE = 2.0
"""Width of the normalized action interval [-1, 1] every environment maps onto its own bounds."""

ACTION_MOVEMENT_TOL = 1e-3
"""Anchor movement below this fraction of the action range (0.1 %, 2e-3 normalized units; 0.1 % of each
actuator's span in the environment's own units) counts as none. Why this size: it is below any change a
policy update means to make, yet far above float rounding (identical weights move the anchor by exactly
0); and a held-out difference behind a smaller change comes from the scene's sensitivity to tiny action
changes (the chaos the probe's replay section measures with keyed action noise of std 1e-3), not from
learning. A documented constant: it alone decides "not tested" (:attr:`Movement.moved`)."""


def kl_floor(replay_atol: float) -> float:
    """1/2 x atol^2: the KL per entry of log-ratios within the registered replay tolerance."""
    return 0.5 * replay_atol**2


@dataclass(frozen=True)
class Movement:
    """How far theta_N is from theta_0 (the module docstring defines each number)."""

    head: str
    kl_to_initial: float
    """Mean k3 estimate of KL(pi_0 || pi_N) per token (AR) or per SDE step (flow), nats."""
    kl_unit: str
    kl_entries: int
    """Tokens or SDE steps the KL averages over (every recorded entry of iteration 0)."""
    kl_floor: float
    action_change: float
    """mean |a_N - a_0| of the anchor sampler, normalized action units."""
    action_observations: int
    action_floor: float
    """:data:`ACTION_MOVEMENT_TOL` x :data:`ACTION_RANGE`."""

    @property
    def moved(self) -> bool:
        """Whether the anchor's actions moved by at least their floor. False: the pilot did not move the
        policy the held-out evaluation runs, so its stage is "not tested", whatever the KL says."""
        return self.action_change >= self.action_floor

    @property
    def sampling_moved(self) -> bool:
        """Whether the KL to the initial policy is above its floor: the sampling distribution moved."""
        return self.kl_to_initial > self.kl_floor

    def to_dict(self) -> dict[str, Any]:
        """The numbers as movement.json holds them, with ``moved`` and the floors' definitions."""
        return {
            **asdict(self),
            "moved": self.moved,
            "moved_rule": "anchor mean |delta a| >= action_floor; the KL is reported, not counted",
            "sampling_moved": self.sampling_moved,
            "action_range": ACTION_RANGE,
            "action_movement_tol": ACTION_MOVEMENT_TOL,
            "kl_floor_rule": "1/2 x replay_atol^2 per entry",
            "kl_estimator": "k3 = r - 1 - log r, r = pi_N / pi_0, on pi_0's iteration-0 samples",
        }


def kl_to_initial(initial: HeadModel, final: HeadModel, batch: RolloutBatch) -> tuple[float, int]:
    """Mean k3 KL(pi_0 || pi_N) over every recorded entry of ``batch`` (theta_0's rollouts); (KL, entries).

    ``initial`` regenerates the flow chains (theta_0 drew them); ``final`` rescores them.
    """
    if not initial.head == final.head == batch.head:
        raise ValueError(f"{batch.path}: heads differ ({initial.head}, {final.head}, rollouts {batch.head})")
    units = [(e, r) for e in batch.episodes for r in e.replans]
    if not units:
        raise ValueError(f"{batch.path}: no recorded replan to measure the KL on")
    chains = unit_chains(initial, batch, units) if batch.head == "flow" else None
    recomputed = recompute_logprobs(final, batch, units, chains)
    recorded = [r.token_logprobs if batch.head == "ar" else r.step_logprobs for _, r in units]
    log_p0 = torch.from_numpy(np.concatenate([np.asarray(v, dtype=np.float64) for v in recorded]))  # type: ignore[arg-type]
    log_pn = torch.from_numpy(np.concatenate(recomputed))
    k3 = ar_kl_k3(log_p0, log_pn)  # samples from pi_0: r = pi_N / pi_0, k3 = r - 1 - log r
    return float(k3.mean()), int(k3.numel())


def anchor_action_change(
    initial: Policy, final: Policy, held_out: HeldOutObservations, mode: SamplingMode
) -> float:
    """mean |a_N - a_0| of the anchor sampler on the held-out observations, keys as the episodes drew."""
    a0 = initial.act(held_out.policy_input(), list(held_out.keys), mode).actions.astype(np.float64)
    an = final.act(held_out.policy_input(), list(held_out.keys), mode).actions.astype(np.float64)
    return float(np.mean(np.abs(an - a0)))


def policy_movement(
    initial_checkpoint: str | os.PathLike[str],
    final_checkpoint: str | os.PathLike[str],
    first_batch: RolloutBatch,
    held_out: HeldOutObservations,
    anchor: SamplingMode,
    replay_atol: float,
) -> Movement:
    """Both reads for one stage, on the CPU with deterministic single-threaded torch."""
    with deterministic_torch():
        initial, final = (
            load_head_model(str(initial_checkpoint), trainable=False),
            load_head_model(str(final_checkpoint), trainable=False),
        )
        kl, entries = kl_to_initial(initial, final, first_batch)
        change = anchor_action_change(
            load_policy(str(initial_checkpoint), device="cpu"),
            load_policy(str(final_checkpoint), device="cpu"),
            held_out,
            anchor,
        )
    return Movement(
        head=first_batch.head,
        kl_to_initial=kl,
        kl_unit="nats per token" if first_batch.head == "ar" else "nats per SDE step",
        kl_entries=entries,
        kl_floor=kl_floor(replay_atol),
        action_change=change,
        action_observations=len(held_out.keys),
        action_floor=ACTION_MOVEMENT_TOL * ACTION_RANGE,
    )
