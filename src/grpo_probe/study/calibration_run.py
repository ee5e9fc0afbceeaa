"""One candidate of the pilot calibration, run end to end: its learning curve and its held-out gains.

A candidate (one design's competent arm at one learning rate) is trained by the pilot's own stage
function (:func:`grpo_probe.phase2.stage.train_stage`, replicate 0: keyed rollouts, the log-prob replay
oracle before every update, the registered loss and estimator), from the arm's checkpoint, in a work
folder that is removed afterwards. What is kept is one JSON record per candidate, a pure function of the
calibration, the candidate and the checkpoint (no clock, no path), so a rerun writes the same bytes:

- per iteration: the training reward under the sampler (the iteration's mean registered reward over
  seeds_per_iteration x K episodes, the policy before that iteration's update), the update's clip
  fraction, the **update KL** KL(pi_i || pi_i+1), estimated after the update on the iteration's own
  rollouts, which pi_i sampled, by Schulman's k3, mean of (r - 1) - log r with r = pi_i+1 / pi_i
  (http://joschu.net/blog/kl-approx.html; per token for AR; for flow, per SDE step of the chunk divided
  by its D = chunk_length x action_dim dimensions: the KL of a product of independent Gaussian
  dimensions is the sum of theirs, so this is the KL per action dimension), and the entropy: the AR
  head's token entropy under the sampler (mean over replans of the per-step entropy, nats); for flow, the
  SDE transition's entropy per action dimension, mean over steps of 0.5 log(2 pi e std_i^2), which is
  fixed by the noise schedule and the grid (std_i = sigma_i sqrt(t_i - t_i+1)) and so the same at every
  iteration whatever the weights (recorded as such, not measured);
- held-out, on the registered held-out seeds, paired by seed: the **sampled** policy (the sampler GRPO
  trains, eval_draws draws per seed, their mean the seed's score) and the **anchor** (greedy / ODE, one
  draw: what a lab deploys), each of the initial and the final policy; the gain is the mean over seeds of
  final minus initial, with Efron's percentile bootstrap interval over seeds
  (:func:`percentile_interval`), its generator keyed by (the registered
  bootstrap seed, "calibration", the candidate, the policy);
- when the calibration registers a monitor (``pilot.monitor``): per monitored policy (before iterations
  0, every, 2 every, ..., and the final one), per monitor seed, the mean registered reward (progress minus
  the guards' penalties, the training reward) of ``draws`` episodes under the sampler. A draw's noise is
  keyed by (run key, seed, replan, draw) and by nothing of the policy or the iteration, so every monitored
  policy meets the same draws on the same seeds, and their differences are the policy's alone. A record
  of a calibration without a monitor has no such field, and is byte for byte what it was before the
  monitor existed.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from grpo_probe.atomic_io import atomic_write_json
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.phase2.losses import approx_kl_k3
from grpo_probe.phase2.recompute import (
    HeadModel,
    ar_logprobs,
    score_units,
    token_batch,
)
from grpo_probe.phase2.rollouts import (
    RolloutBatch,
    episode_rewards,
)
from grpo_probe.phase2.stage import WorkFiles, train_stage, work_folder
from grpo_probe.phase2.trainer import IterationMetrics, batch_chains
from grpo_probe.policies.flow_sde import sde_sigma, time_grid
from grpo_probe.prereg import Prereg
from grpo_probe.rollout import EpisodeResult, PolicySource, design_job, run_group
from grpo_probe.rollout.job import DEFAULT_ENVS_PER_WORKER
from grpo_probe.rollout.progress import RolloutProgress
from grpo_probe.sampling import SamplingMode
from grpo_probe.study.calibration import Calibration, Candidate, Monitor

__all__ = ["HELD_OUT_POLICIES", "flow_sde_entropy", "paired_gain", "percentile_interval", "run_candidate"]

HELD_OUT_POLICIES: tuple[str, ...] = ("sampled", "anchor")
"""What the held-out evaluation scores: the sampler GRPO trains, and the anchor a lab deploys."""


def flow_sde_entropy(mode: SamplingMode) -> float:
    """Entropy per action dimension of the flow SDE's Gaussian transition, mean over its steps (nats).

    h_i = 0.5 log(2 pi e std_i^2), std_i = sigma_i sqrt(t_i - t_i+1) (:func:`grpo_probe.policies.flow_sde.
    sde_step`): set by the schedule alone, so GRPO cannot change it.
    """
    grid = time_grid(mode.steps)
    a = float(mode.sde_a)  # type: ignore[arg-type]
    stds = [sde_sigma(a, grid[i], grid[i + 1]) * math.sqrt(grid[i] - grid[i + 1]) for i in range(mode.steps)]
    return float(np.mean([0.5 * math.log(2 * math.pi * math.e * s * s) for s in stds]))


def _update_kl(policy: HeadModel, batch: RolloutBatch, chains: Mapping[Any, torch.Tensor] | None) -> float:
    """KL(pi_i || pi_i+1) by k3 on ``batch`` (pi_i's rollouts), ``policy`` holding pi_i+1's weights; per
    token (AR) or per action dimension and SDE step (flow, ``chains`` regenerated under pi_i)."""
    units = [(e, r) for e in batch.episodes for r in e.replans]
    with torch.no_grad():
        if policy.head == "ar":
            tokens = token_batch(policy, [r for _, r in units])
            logprob, _ = ar_logprobs(
                policy.model,  # type: ignore[arg-type]
                policy.mask_table,  # type: ignore[arg-type]
                tokens,
                float(batch.mode.temperature),  # type: ignore[arg-type]
            )
            return approx_kl_k3(logprob, tokens.old_logprob, tokens.mask)
        assert chains is not None
        chain = torch.stack([chains[(e.seed, e.draw, r.replan)] for e, r in units])
        scored = score_units(policy, batch.mode, units, chain)
        old = torch.from_numpy(np.stack([r.step_logprobs for _, r in units]))  # type: ignore[arg-type]
        dims = int(np.prod(chain.shape[2:]))
        return approx_kl_k3(scored.logprob, old, torch.ones_like(old, dtype=torch.bool)) / dims


def percentile_interval(
    values: np.ndarray, resamples: int, confidence: float, rng: np.random.Generator
) -> tuple[float, float]:
    """Efron's percentile bootstrap interval of the mean of ``values`` (one per seed): ``resamples``
    resamples of the seeds with replacement, the (1 - c)/2 and (1 + c)/2 quantiles of their means (Efron &
    Tibshirani 1993, ch. 13.3). The calibration registers its bootstrap (``bootstrap:``), so its gains keep
    this interval, as locked."""
    x = np.asarray(values, dtype=np.float64)
    replicates = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return float(low), float(high)


def paired_gain(
    initial: Sequence[float],
    final: Sequence[float],
    resamples: int,
    confidence: float,
    rng: np.random.Generator,
) -> dict[str, float]:
    """Mean over seeds of final - initial with its percentile bootstrap interval (seeds paired by index)."""
    diffs = np.asarray(final, dtype=np.float64) - np.asarray(initial, dtype=np.float64)
    low, high = percentile_interval(diffs, resamples, confidence, rng)
    return {"gain": float(diffs.mean()), "low": low, "high": high}


def _episodes(
    design: Prereg,
    arm: str,
    checkpoint: Path,
    mode: SamplingMode,
    seeds: Sequence[int],
    draws: int,
    label: str,
) -> list[EpisodeResult]:
    """``draws`` episodes a seed of ``seeds`` in ``mode`` (noise keyed by seed and draw alone)."""
    source = PolicySource(checkpoint=str(checkpoint), device="cpu")
    job = design_job(design, arm, f"calibration-{label}", source, mode, seeds, draws)
    progress = RolloutProgress(len(job.episodes()), job.label)
    try:
        results = run_group(job, workers=0, envs_per_worker=DEFAULT_ENVS_PER_WORKER, progress=progress)
    finally:
        progress.close()
    return results


def _seed_means(
    results: Sequence[EpisodeResult], values: Sequence[float], seeds: Sequence[int]
) -> list[float]:
    """Per seed of ``seeds`` (in that order), the mean of its episodes' ``values``."""
    by_seed: dict[int, list[float]] = {}
    for result, value in zip(results, values, strict=True):
        by_seed.setdefault(result.spec.seed, []).append(float(value))
    return [float(np.mean(by_seed[s])) for s in seeds]


def _held_out_scores(
    design: Prereg, arm: str, checkpoint: Path, mode: SamplingMode, draws: int, label: str, column: str
) -> list[float]:
    """Per held-out seed (registered order), the mean of ``column`` over ``draws`` episodes in ``mode``."""
    assert design.phase2 is not None
    seeds = design.phase2.eval_seeds
    results = _episodes(design, arm, checkpoint, mode, seeds, draws, label)
    return _seed_means(results, [r.record.to_row()[column] for r in results], seeds)


def _monitor_points(
    design: Prereg, arm: str, monitor: Monitor, mode: SamplingMode, checkpoints: Mapping[int, Path]
) -> list[dict[str, Any]]:
    """Per monitored policy (``checkpoints``: iteration -> the policy that iteration samples), each monitor
    seed's mean registered reward over ``monitor.draws`` sampler episodes, and their mean."""
    points = []
    for iteration, checkpoint in sorted(checkpoints.items()):
        results = _episodes(
            design, arm, checkpoint, mode, monitor.seeds, monitor.draws, f"monitor-{iteration}"
        )
        scores = _seed_means(results, episode_rewards(design, results), monitor.seeds)
        points.append({"iteration": iteration, "mean_reward": float(np.mean(scores)), "scores": scores})
    return points


def run_candidate(
    calibration: Calibration, candidate: Candidate, checkpoint: str | Path, work: str | Path, out: str | Path
) -> dict[str, Any]:
    """Train ``candidate`` from ``checkpoint`` (work files under ``work``, removed at the end), score it
    held-out, and write its record to ``out`` (JSON); returns the record."""
    initial = Path(checkpoint)
    batches: dict[int, tuple[RolloutBatch, Any]] = {}
    kls: dict[int, float] = {}

    def stash(policy: HeadModel, batch: RolloutBatch) -> None:
        """Keep pi_i's batch (and, flow, its chains, regenerated now, under pi_i) for the update KL."""
        units = [(e, r) for e in batch.episodes for r in e.replans]
        chains = batch_chains(policy, batch, units) if policy.head == "flow" else None
        batches[batch.iteration] = (batch, chains)

    def update_kl(policy: HeadModel, iteration: int, row: Any, report: Any) -> None:
        batch, chains = batches.pop(iteration)
        kls[iteration] = _update_kl(policy, batch, chains)

    with work_folder(work) as files:
        rows = train_stage(
            candidate.design, candidate.arm, initial, files, on_batch=stash, on_iteration=update_kl
        )
        record = _record(calibration, candidate, initial, files, rows, kls)
        atomic_write_json(out, record)
    return record


def _record(
    calibration: Calibration,
    candidate: Candidate,
    initial: Path,
    files: WorkFiles,
    rows: Sequence[IterationMetrics],
    kls: Mapping[int, float],
) -> dict[str, Any]:
    """The candidate's record: its learning curve, its held-out gains and, with a monitor, its monitored
    rewards (the policies read from ``files``, the work folder training wrote)."""
    design, arm = candidate.design, candidate.arm
    phase2 = design.phase2
    assert phase2 is not None
    recipe = phase2.recipe(candidate.head)
    final = Path(files.checkpoint(phase2.iterations))
    flow_entropy = flow_sde_entropy(recipe.mode) if candidate.head == "flow" else None
    iterations = [
        {
            "iteration": row.iteration,
            "mean_reward": row.mean_reward,
            "mean_progress_cm": row.mean_progress_cm,
            "kept_fraction": row.kept_fraction,
            "update_kl": kls[row.iteration],
            "approx_kl_in_update": row.update.approx_kl,
            "clip_fraction": row.update.clip_fraction,
            "kl_to_reference": row.update.kl_to_reference,
            "entropy": row.token_entropy if candidate.head == "ar" else flow_entropy,
            "grad_norm": row.update.grad_norm,
        }
        for row in rows
    ]
    modes = {"sampled": (recipe.mode, calibration.eval_draws), "anchor": (design.arms[arm].anchor, 1)}
    held_out: dict[str, Any] = {}
    for policy_name in HELD_OUT_POLICIES:
        mode, draws = modes[policy_name]
        scores = {
            label: _held_out_scores(
                design, arm, ckpt, mode, draws, f"{policy_name}-{label}", calibration.gain
            )
            for label, ckpt in (("initial", initial), ("final", final))
        }
        rng = numpy_generator(
            calibration.bootstrap_seed, tag("calibration"), tag(candidate.id), tag(policy_name)
        )
        held_out[policy_name] = {
            **scores,
            **paired_gain(
                scores["initial"],
                scores["final"],
                calibration.resamples,
                calibration.selection.confidence,
                rng,
            ),
        }
    monitor = calibration.monitor
    record: dict[str, Any] = {
        "candidate": candidate.id,
        "design": design.name,
        "arm": arm,
        "head": candidate.head,
        "lr": candidate.lr,
        "calibration_sha256": calibration.sha256,
        "initial_checkpoint_sha256": hashlib.sha256(initial.read_bytes()).hexdigest(),
        "final_checkpoint_sha256": rows[-1].checkpoint_sha256,
        "entropy_kind": "token entropy under the sampler (nats)"
        if candidate.head == "ar"
        else "SDE transition entropy per action dimension (nats), fixed by the schedule",
        "kl_unit": "nats per token" if candidate.head == "ar" else "nats per action dimension and SDE step",
        "chunk_logprob": recipe.chunk_logprob,
        "episodes_per_iteration": phase2.episodes_per_iteration,
        "eval_seeds": list(phase2.eval_seeds),
        "iterations": iterations,
        "held_out": held_out,
    }
    if monitor is not None:
        checkpoints = {
            i: initial if i == 0 else files.checkpoint(i) for i in monitor.iterations(phase2.iterations)
        }
        record["monitor"] = {
            "seeds": list(monitor.seeds),
            "draws": monitor.draws,
            "every": monitor.every,
            "points": _monitor_points(design, arm, monitor, recipe.mode, checkpoints),
        }
    return record
