"""The GRPO pilot's training loop: token-GRPO on the AR head, Flow-GRPO (SDE) on the flow head.

One iteration, top to bottom (CleanRL's shape, with the group advantage in place of GAE):

1. rollouts: K keyed rollouts per training seed with the current policy theta_i, each replan recorded
   (:mod:`grpo_probe.phase2.rollouts`); iteration 0's come from the ``phase2_rollouts`` rule, which the
   replay oracle checked before this loop starts;
2. rewards and advantages by the estimator the design names (``phase2.advantage``; by default GRPO's
   group advantage), dynamic sampling (:mod:`grpo_probe.phase2.reward`);
3. recompute: every recorded log-prob recomputed under theta_i, which must equal the record within the
   registered tolerance (ratio 1 before the update) or training stops (:mod:`grpo_probe.phase2.recompute`);
4. update: ``epochs`` passes, each split by a keyed shuffle into ``minibatches`` optimizer steps over the
   kept replans: new log-probs, the registered policy loss the design names (``phase2.policy_loss``; by
   default the clipped surrogate with clip-higher and token-mean aggregation), plus beta x KL to the
   frozen initial policy, Adam, gradient-norm clip (:mod:`grpo_probe.phase2.losses`);
5. theta_{i+1} written as a content-hashed checkpoint, the iteration's numbers as one metrics row.

Determinism: torch runs single-threaded with deterministic algorithms, minibatch order comes from a
keyed generator, rollouts are keyed by (run_key, seed, replan, draw), so rerunning the rule writes the
same checkpoints, tables and metrics byte for byte. The optimizer state lives only in this process:
the loop always runs from theta_0 (per-iteration checkpoints hold weights, not Adam's moments).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from torch import nn
from tqdm import tqdm

from grpo_probe.envs.protocol import Guard
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.phase2.losses import approx_kl_k3, ar_kl_k3, flow_kl_gaussian, policy_loss, token_mean
from grpo_probe.phase2.recompute import (
    FlowStepLogprobs,
    HeadModel,
    ar_logprobs,
    flow_step_logprobs,
    token_batch,
    unit_chains,
    unit_frames,
)
from grpo_probe.phase2.recompute_oracle import RecomputeReport, check_recompute, recompute_batch
from grpo_probe.phase2.reward import guard_trips
from grpo_probe.phase2.rollouts import Episode, Replan, RolloutBatch
from grpo_probe.policies.adam import Adam
from grpo_probe.policies.checkpoint import Checkpoint, write_checkpoint
from grpo_probe.policies.train import deterministic_torch
from grpo_probe.prereg.phase2 import HeadRecipe, Phase2

__all__ = [
    "IterationMetrics",
    "IterationOutput",
    "UpdateStats",
    "batch_chains",
    "deterministic_torch",
    "grpo_update",
    "make_optimizer",
    "metrics_schema",
    "metrics_table",
    "save_policy",
    "table_metrics",
    "train_loop",
]


@dataclass(frozen=True)
class UpdateStats:
    """What one iteration's update did, averaged over its optimizer steps (None: no step was taken)."""

    updates: int
    policy_loss: float | None
    clip_fraction: float | None
    approx_kl: float | None
    kl_to_reference: float | None
    grad_norm: float | None


@dataclass(frozen=True)
class _Minibatch:
    """The kept replans of one optimizer step with their episode advantages."""

    units: tuple[tuple[Episode, Replan], ...]

    @property
    def advantages(self) -> np.ndarray:
        return np.array([e.advantage for e, _ in self.units], dtype=np.float64)


def _minibatches(
    units: Sequence[tuple[Episode, Replan]], phase2: Phase2, run_key: int, iteration: int, epoch: int
) -> list[_Minibatch]:
    """A keyed shuffle of the kept replans split into ``phase2.minibatches`` parts (empty parts dropped)."""
    order = numpy_generator(run_key, tag("phase2_minibatch"), iteration, epoch).permutation(len(units))
    parts = np.array_split(order, phase2.minibatches)
    return [_Minibatch(tuple(units[int(k)] for k in part)) for part in parts if len(part)]


@dataclass(frozen=True)
class _Terms:
    """New and old log-probs [rows, positions], the mask, advantages broadcast, and the KL per entry."""

    logprob: torch.Tensor
    old_logprob: torch.Tensor
    mask: torch.Tensor
    advantages: torch.Tensor
    kl: torch.Tensor | None
    chunk_dims: int = 1
    """Flow: D = chunk_length x action_dim, the dimensions one SDE step's log-prob sums over."""


def _ar_terms(
    policy: HeadModel, reference: HeadModel | None, batch: RolloutBatch, minibatch: _Minibatch
) -> _Terms:
    """Token-level terms of the AR head: one row per replan, one position per recorded token."""
    tokens = token_batch(policy, [r for _, r in minibatch.units])
    temperature = float(batch.mode.temperature)  # type: ignore[arg-type]
    logprob, _ = ar_logprobs(policy.model, policy.mask_table, tokens, temperature)  # type: ignore[arg-type]
    kl = None
    if reference is not None:
        with torch.no_grad():
            ref_logprob, _ = ar_logprobs(reference.model, reference.mask_table, tokens, temperature)  # type: ignore[arg-type]
        kl = ar_kl_k3(logprob, ref_logprob)
    advantages = torch.from_numpy(minibatch.advantages)[:, None].expand_as(logprob)
    return _Terms(logprob, tokens.old_logprob, tokens.mask, advantages, kl)


def _flow_terms(
    policy: HeadModel,
    reference: HeadModel | None,
    batch: RolloutBatch,
    minibatch: _Minibatch,
    chains: dict[tuple[int, int, int], torch.Tensor],
) -> _Terms:
    """Step-level terms of the flow head: one row per replan's chunk, one position per SDE transition."""
    obs = np.stack([r.obs for _, r in minibatch.units])
    cond = torch.from_numpy(policy.normalize(obs))
    seen = unit_frames(policy, minibatch.units)  # a camera-fed head: the stored frames the policy saw
    frames = None if seen is None else torch.from_numpy(seen)
    chain = torch.stack([chains[(e.seed, e.draw, r.replan)] for e, r in minibatch.units])

    def score(head: HeadModel, keep_means: bool) -> FlowStepLogprobs:  # the policy's inputs, either head
        return flow_step_logprobs(head.model, cond, chain, batch.mode, keep_means=keep_means, frames=frames)  # type: ignore[arg-type]

    scored = score(policy, reference is not None)
    kl = None
    if reference is not None:
        with torch.no_grad():
            ref = score(reference, True)
        kl = torch.stack(
            [
                flow_kl_gaussian(m, m_ref, std)
                for m, m_ref, std in zip(scored.means, ref.means, scored.stds, strict=True)
            ],
            dim=1,
        )
    old = torch.from_numpy(np.stack([r.step_logprobs for _, r in minibatch.units]))  # type: ignore[arg-type]
    mask = torch.ones_like(old, dtype=torch.bool)
    advantages = torch.from_numpy(minibatch.advantages)[:, None].expand_as(old)
    return _Terms(scored.logprob, old, mask, advantages, kl, int(np.prod(chain.shape[2:])))


def grpo_update(
    policy: HeadModel,
    reference: HeadModel | None,
    batch: RolloutBatch,
    recipe: HeadRecipe,
    phase2: Phase2,
    optimizer: Adam,
    chains: dict[tuple[int, int, int], torch.Tensor] | None = None,
) -> UpdateStats:
    """One iteration's update of ``policy`` on ``batch``'s kept groups (the loop in the module docstring).

    ``reference`` is the frozen initial policy, needed only when ``recipe.kl_beta > 0``. ``chains`` (flow):
    the regenerated x_t chain of each (seed, draw, replan), data for every step of this iteration.
    """
    units = [(e, r) for e in batch.kept_episodes for r in e.replans]
    if not units:
        return UpdateStats(0, None, None, None, None, None)
    if policy.head == "flow" and chains is None:
        chains = batch_chains(policy, batch, units)
    loss_fn = policy_loss(phase2.policy_loss)
    losses, clips, kls, ref_kls, norms = [], [], [], [], []
    for epoch in range(phase2.epochs):
        for minibatch in _minibatches(units, phase2, batch.run_key, batch.iteration, epoch):
            if policy.head == "ar":
                terms = _ar_terms(policy, reference, batch, minibatch)
            else:
                terms = _flow_terms(policy, reference, batch, minibatch, chains or {})
            # the loss the design names (phase2.policy_loss; by default DAPO's clipped surrogate with
            # token-mean aggregation, PPO arXiv:1707.06347v2 Eq. 7; losses.py has the equations)
            # the flow head's chunk_logprob: mean (Flow-GRPO's per-dimension ratio, clip and KL) divides the
            # step's summed log-probs and its KL by the chunk's D dimensions; sum leaves them per chunk
            scale = terms.chunk_dims if recipe.per_dimension else 1
            if scale == 1:
                pg = loss_fn(terms.logprob, terms.old_logprob, terms.advantages, terms.mask, recipe)
                approx_kl = pg.approx_kl
            else:
                logprob, old = terms.logprob / scale, terms.old_logprob / scale
                pg = loss_fn(logprob, old, terms.advantages, terms.mask, recipe)
                approx_kl = approx_kl_k3(terms.logprob, terms.old_logprob, terms.mask) / scale
            loss = pg.loss
            if terms.kl is not None:
                kl_term = token_mean(terms.kl, terms.mask)
                if scale != 1:
                    kl_term = kl_term / scale
                loss = loss + recipe.kl_beta * kl_term
                ref_kls.append(float(kl_term.detach()))
            optimizer.zero_grad()
            loss.backward()
            norm = nn.utils.clip_grad_norm_(policy.model.parameters(), recipe.grad_clip, foreach=False)
            optimizer.step()
            losses.append(float(pg.loss.detach()))
            clips.append(pg.clip_fraction)
            kls.append(approx_kl)
            norms.append(float(norm))
    return UpdateStats(
        updates=len(losses),
        policy_loss=float(np.mean(losses)),
        clip_fraction=float(np.mean(clips)),
        approx_kl=float(np.mean(kls)),
        kl_to_reference=float(np.mean(ref_kls)) if ref_kls else None,
        grad_norm=float(np.mean(norms)),
    )


def batch_chains(
    policy: HeadModel, batch: RolloutBatch, units: Sequence[tuple[Episode, Replan]]
) -> dict[tuple[int, int, int], torch.Tensor]:
    """The x_t chain the sampler drew for each unit, keyed (seed, draw, replan); regenerated once."""
    regenerated = unit_chains(policy, batch, units)
    return {(e.seed, e.draw, r.replan): chain for (e, r), chain in zip(units, regenerated, strict=True)}


def make_optimizer(policy: HeadModel, recipe: HeadRecipe) -> Adam:
    """Adam at the registered learning rate, no weight decay (memo section 5: RL wants a small lr)."""
    return Adam(policy.model.parameters(), lr=recipe.lr)


def save_policy(policy: HeadModel, path: str | os.PathLike[str]) -> str:
    """Write the current weights with the initial checkpoint's kind, config, tokenizer and norms; sha256."""
    ckpt = policy.checkpoint
    updated = Checkpoint(
        kind=ckpt.kind,
        config=ckpt.config,
        tokenizer_json=ckpt.tokenizer_json,
        norm=ckpt.norm,
        state_dict=policy.model.state_dict(),
    )
    return write_checkpoint(updated, path)


# -- metrics ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IterationMetrics:
    """One row of the per-iteration table: rollout statistics, the update's diagnostics, the checkpoint."""

    iteration: int
    seeds: int
    episodes: int
    mean_reward: float
    mean_progress_cm: float
    mean_group_std: float
    median_group_std: float
    kept_fraction: float
    """Fraction of groups dynamic sampling kept."""
    success_rate: float
    token_entropy: float | None
    """AR: mean over replans of the per-step sampling entropy (nats); None for flow."""
    replay_max_abs_diff: float
    update: UpdateStats
    """What the iteration's update did: its columns (``updates`` to ``grad_norm``) in the row."""
    checkpoint_sha256: str
    """sha256 of theta_{iteration + 1}, the checkpoint this iteration's update wrote."""
    guard_rates: dict[str, float] = field(default_factory=dict)
    """Per guard the environment declares (its order): the fraction of the iteration's episodes that
    tripped it; a column ``<guard>_rate`` of the table."""

    def row(self) -> dict[str, Any]:
        """The table row: the fields, with ``update`` spread into its columns and ``guard_rates`` into
        ``<guard>_rate`` columns."""
        values = asdict(self)
        update, rates = values.pop("update"), values.pop("guard_rates")
        return {**values, **update, **{f"{guard}_rate": rate for guard, rate in rates.items()}}


_METRICS_HEAD: tuple[tuple[str, pa.DataType], ...] = (
    ("iteration", pa.int32()),
    ("seeds", pa.int32()),
    ("episodes", pa.int32()),
    ("mean_reward", pa.float64()),
    ("mean_progress_cm", pa.float64()),
    ("mean_group_std", pa.float64()),
    ("median_group_std", pa.float64()),
    ("kept_fraction", pa.float64()),
)
_METRICS_TAIL: tuple[tuple[str, pa.DataType], ...] = (
    ("success_rate", pa.float64()),
    ("token_entropy", pa.float64()),
    ("replay_max_abs_diff", pa.float64()),
    ("updates", pa.int32()),
    ("policy_loss", pa.float64()),
    ("clip_fraction", pa.float64()),
    ("approx_kl", pa.float64()),
    ("kl_to_reference", pa.float64()),
    ("grad_norm", pa.float64()),
    ("checkpoint_sha256", pa.string()),
)


def metrics_schema(guards: Sequence[str]) -> pa.Schema:
    """The per-iteration table's columns: rollout statistics, ``<guard>_rate`` per guard, the update's."""
    rates = [(f"{guard}_rate", pa.float64()) for guard in guards]
    return pa.schema([*_METRICS_HEAD, *rates, *_METRICS_TAIL])


def table_metrics(table: pa.Table, guards: Sequence[Guard], analysis: Mapping[str, Any]) -> dict[str, Any]:
    """Rollout statistics of one iteration's table (reward, spread, kept groups, guard trips, entropy).

    ``guards``: the environment's declarations, counted as the analysis counts them (``analysis``: the
    registered numbers a threshold may name).
    """
    cols = table.to_pydict()
    seeds = sorted(set(cols["seed"]))
    std_by_seed = {s: g for s, g in zip(cols["seed"], cols["group_std"], strict=True)}
    kept_by_seed = {s: k for s, k in zip(cols["seed"], cols["kept"], strict=True)}
    stds = np.array([std_by_seed[s] for s in seeds])
    entropy = None
    if cols["head"][0] == "ar" and cols["replan_entropy_mean"][0] is not None:
        entropy = float(np.mean([v for row in cols["replan_entropy_mean"] for v in row if v is not None]))
    trips = guard_trips(cols, guards, analysis)
    return {
        "seeds": len(seeds),
        "episodes": table.num_rows,
        "mean_reward": float(np.mean(cols["reward"])),
        "mean_progress_cm": float(np.mean(cols["progress_final_cm"])),
        "mean_group_std": float(stds.mean()),
        "median_group_std": float(np.median(stds)),
        "kept_fraction": float(np.mean([kept_by_seed[s] for s in seeds])),
        "guard_rates": {guard: float(tripped.mean()) for guard, tripped in trips.items()},
        "success_rate": float(np.mean(cols["success"])),
        "token_entropy": entropy,
    }


def metrics_table(rows: Sequence[IterationMetrics], guards: Sequence[str]) -> pa.Table:
    """The per-iteration table (one row per iteration, in order; ``guards``: the environment's names)."""
    return pa.Table.from_pylist([r.row() for r in rows], schema=metrics_schema(guards))


# -- the loop --------------------------------------------------------------------------------------------
RolloutFn = Callable[[int, Path], pa.Table]
"""(iteration, checkpoint of theta_iteration) -> that iteration's rollout table (written by the caller)."""


@dataclass(frozen=True)
class IterationOutput:
    """Where iteration i's artifacts go: theta_{i+1}, and (i >= 1) the table of its rollouts."""

    checkpoint: Path
    rollouts: Path | None


def train_loop(
    policy: HeadModel,
    reference: HeadModel | None,
    recipe: HeadRecipe,
    phase2: Phase2,
    initial_checkpoint: Path,
    first_batch: RolloutBatch,
    first_table: pa.Table,
    outputs: Sequence[IterationOutput],
    rollouts: RolloutFn,
    read: Callable[[Path], tuple[RolloutBatch, pa.Table]],
    on_iteration: Callable[[int, IterationMetrics, RecomputeReport], None],
    guards: Sequence[Guard],
    analysis: Mapping[str, Any],
) -> list[IterationMetrics]:
    """Run ``phase2.iterations`` GRPO iterations from theta_0 = ``initial_checkpoint``.

    Iteration 0 trains on ``first_batch`` (the oracle-checked rollouts of theta_0). For i >= 1,
    ``rollouts(i, theta_i)`` runs iteration i's rollouts and writes them to ``outputs[i].rollouts``, which
    ``read`` reads back, so the update trains on exactly the bytes the table holds. theta_{i+1} goes to
    ``outputs[i].checkpoint``; ``on_iteration`` is called after it is written (manifests, logs).
    ``guards`` and ``analysis``: the environment's guard declarations and the registered analysis
    numbers, for the per-iteration trip rates.
    """
    optimizer = make_optimizer(policy, recipe)
    metrics: list[IterationMetrics] = []
    checkpoint = initial_checkpoint
    bar = tqdm(
        range(phase2.iterations), desc=f"phase2 {policy.head}", file=sys.stderr, ascii=True, mininterval=5.0
    )
    for iteration in bar:
        if iteration == 0:
            batch, table = first_batch, first_table
        else:
            written = outputs[iteration].rollouts
            if written is None:
                raise ValueError(f"iteration {iteration}: no rollout table path")
            rollouts(iteration, checkpoint)
            batch, table = read(written)
        # recompute: ratio 1 before the update, or nothing more is trained
        units = [(e, r) for e in batch.episodes for r in e.replans]
        chains = batch_chains(policy, batch, units) if policy.head == "flow" else None
        stacked = (
            None if chains is None else torch.stack([chains[(e.seed, e.draw, r.replan)] for e, r in units])
        )
        report = recompute_batch(policy, batch, recipe.replay_atol, chains=stacked)
        check_recompute(report, f"{batch.path} (iteration {iteration})")
        stats = grpo_update(policy, reference, batch, recipe, phase2, optimizer, chains)
        if not all(bool(torch.isfinite(p).all()) for p in policy.model.parameters()):
            raise FloatingPointError(
                f"{batch.path} (iteration {iteration}): an update made a weight non-finite"
            )
        checkpoint = outputs[iteration].checkpoint
        sha = save_policy(policy, checkpoint)
        row = IterationMetrics(
            iteration=iteration,
            **table_metrics(table, guards, analysis),
            replay_max_abs_diff=report.max_abs_diff,
            update=stats,
            checkpoint_sha256=sha,
        )
        metrics.append(row)
        on_iteration(iteration, row, report)
        bar.set_postfix(reward=f"{row.mean_reward:.2f}", kept=f"{row.kept_fraction:.2f}")
    bar.close()
    return metrics
