"""Per-episode GRPO policy gradients of a probe cell, for the gradient reads.

Why here: the gradient reads (:mod:`grpo_probe.analysis.cells.gradient_noise`) ask how many episodes a GRPO
step needs before it points the same way twice, so the gradient must be the one phase 2 would take:
each episode's contribution ``g_e = A_e grad_theta log pi_theta(actions_e | obs_e)``, with

- ``A_e = (r_e - mean_group) / (std_group + eps)`` the group-normalised advantage of
  ``progress_final_cm`` (GRPO's outcome advantage, DeepSeekMath arXiv:2402.03300v3 Sec. 4.1.2, verl's
  ``compute_grpo_outcome_advantage``; :func:`grpo_probe.phase2.reward.group_advantages`, std with ddof 1,
  eps the design's ``phase2.advantage_epsilon`` or verl's 1e-6 without a phase-2 section);
- ``log pi_theta(actions_e | obs_e)`` the sum over the episode's replans of the log-probs phase 2
  recomputes (:mod:`grpo_probe.phase2.recompute`): for the AR head the tokens' log-probs under
  softmax(masked_logits / T) by teacher forcing, for the flow head the SDE path's Gaussian transition
  log-probs along the chain regenerated from the row's keys.

The probe's tables keep each replan's summed log-prob and token ids but not the observation a replan
saw, so the cell's episodes are run again through the same engine with the recording policy phase 2
uses (:data:`grpo_probe.phase2.recording.RECORDING_FACTORY`): same keys, same episodes. The rerun must
reproduce the probe shard's ``replan_logprob`` and ``progress_final_cm`` bit for bit, or the job stops
naming the first (seed, draw) that differs.

Every parameter of the head is differentiated; the gradient (one float per parameter, about a million)
is mapped to :data:`SKETCH_DIMS` coordinates by a keyed CountSketch (each parameter to one coordinate,
with a random sign; Charikar, Chen & Farach-Colton 2002), which preserves inner products and norms in
expectation, ``E <S x, S y> = <x, y>``. The file stores the Gram matrix of the episodes' sketched
gradients (all the reads need), each episode's exact |g_e|^2 beside its sketched one (how well the
sketch kept that norm), and what was differentiated.

Where no log-prob exists the file says why instead: a sampler without per-step log-probs (the ODE draws
its chunk deterministically from its initial noise), a served policy (its server returns actions, not
gradients), or an arm bound through an adapter (the heads phase 2 trains are this package's checkpoints).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from grpo_probe.atomic_io import atomic_write_text
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.phase2.recompute import (
    HeadModel,
    ar_logprobs,
    load_head_model,
    score_units,
    token_batch,
    unit_chains,
)
from grpo_probe.phase2.recording import RECORDING_FACTORY, RecordedRow
from grpo_probe.phase2.reward import group_advantages
from grpo_probe.phase2.rollouts import Episode, Replan, RolloutBatch
from grpo_probe.prereg import Cell, Prereg
from grpo_probe.rollout import PolicySource, design_job, read_rollout_table, run_group
from grpo_probe.rollout.results import EpisodeResult

__all__ = [
    "DEFAULT_ADVANTAGE_EPSILON",
    "GRADIENT_FORMAT",
    "OWN_CHECKPOINT_FACTORY",
    "SKETCH_DIMS",
    "cell_gradient_record",
    "count_sketch",
    "episode_gradients",
    "unavailable_reason",
    "write_gradient_file",
]

GRADIENT_FORMAT = "grpo-probe gradients 1"
"""The file's ``format``, which :func:`grpo_probe.analysis.cells.gradient_noise.read_gradient_file`
checks (the analysis reads the file without importing this module, a sibling layer)."""

SKETCH_DIMS = 4096
"""Coordinates of the CountSketch every gradient is mapped to."""

DEFAULT_ADVANTAGE_EPSILON = 1e-6
"""verl's epsilon of GRPO's advantage, for a design without a phase-2 section."""

OWN_CHECKPOINT_FACTORY = "grpo_probe.policies.checkpoint:load_policy"
"""The adapter of a bound checkpoint in this package's own format (the heads phase 2 trains)."""

_DIFFERENTIABLE_KINDS = {"ar": "temperature", "flow": "flow_sde"}
"""Per head, the sampling kind whose log-probs phase 2 recomputes (and so can differentiate)."""


def unavailable_reason(cell: Cell, recipe: dict[str, Any]) -> str | None:
    """Why the cell's arm cannot give the gradient reads (None: it can). ``recipe``: the arm's
    source.json (a served arm's address, a bound arm's adapter)."""
    if recipe.get("address"):
        return (
            f"not available: arm {cell.arm!r} is served by a policy server ({recipe['address']}), which "
            "returns actions and log-probs but not their gradients in the policy's parameters"
        )
    factory = recipe.get("factory")
    if factory not in (None, OWN_CHECKPOINT_FACTORY):
        return (
            f"not available: arm {cell.arm!r} is bound through adapter {factory!r}; the gradient reads "
            "differentiate checkpoints in grpo-probe's own format (the heads phase 2 trains)"
        )
    wanted = _DIFFERENTIABLE_KINDS.get(cell.head)
    if cell.mode.kind != wanted:
        if cell.head == "flow":
            return (
                f"not available: the {cell.mode.kind} sampler has no per-step log-prob (it draws the chunk "
                "deterministically from its initial noise), so there is no log pi to differentiate; the "
                "flow head's gradient is read at a flow_sde cell, the sampler phase 2 trains under"
            )
        return (
            f"not available: the {cell.mode.kind} sampler of the {cell.head} head has no log-prob phase 2 "
            "recomputes"
        )
    return None


def count_sketch(n_params: int, dims: int, key: int) -> tuple[np.ndarray, np.ndarray]:
    """Each parameter's coordinate (int64 [P]) and sign (float64 [P]), from the generator keyed by
    (the sketch's stream, ``key``, P, D): a fixed map, the same for every episode of a cell."""
    rng = numpy_generator(tag("gradient_count_sketch"), key, n_params, dims)
    buckets = rng.integers(0, dims, size=n_params)
    signs = rng.integers(0, 2, size=n_params) * 2.0 - 1.0
    return buckets, signs


def _episode_logprob(
    head_model: HeadModel, batch: RolloutBatch, episode: Episode
) -> tuple[torch.Tensor, float]:
    """log pi_theta of the episode's actions, summed over its replans, differentiable; and the largest
    |recomputed - recorded| of its entries (nats), which phase 2's replay oracle bounds."""
    replans = list(episode.replans)
    if head_model.head == "ar":
        tokens = token_batch(head_model, replans)
        logprob, _ = ar_logprobs(
            head_model.model, head_model.mask_table, tokens, float(batch.mode.temperature)
        )  # type: ignore[arg-type]
        total = torch.where(tokens.mask, logprob, torch.zeros_like(logprob)).sum()
        diff = (logprob.detach() - tokens.old_logprob).abs()[tokens.mask]
    else:
        units = [(episode, r) for r in replans]
        scored = score_units(head_model, batch.mode, units, unit_chains(head_model, batch, units))
        total = scored.logprob.sum()
        recorded = torch.from_numpy(np.stack([r.step_logprobs for r in replans]))  # type: ignore[arg-type]
        diff = (scored.logprob.detach() - recorded).abs()
    return total, float(diff.max()) if diff.numel() else 0.0


def _flat_grad(model: torch.nn.Module) -> np.ndarray:
    parts = [
        (p.grad if p.grad is not None else torch.zeros_like(p)).detach().reshape(-1).to(torch.float64)
        for p in model.parameters()
    ]
    return torch.cat(parts).numpy()


def episode_gradients(
    head_model: HeadModel, batch: RolloutBatch, key: int, dims: int = SKETCH_DIMS
) -> tuple[np.ndarray, np.ndarray, float]:
    """Per episode of ``batch`` (in its order), the sketched g_e = A_e grad log pi(actions_e | obs_e)
    ([E, dims]) and the exact |g_e|^2 ([E]); and the largest |recomputed - recorded| log-prob entry."""
    model = head_model.model
    params = [p for p in model.parameters() if p.requires_grad]
    n_params = sum(p.numel() for p in params)
    buckets, signs = count_sketch(n_params, dims, key)
    sketches = np.zeros((len(batch.episodes), dims))
    norms = np.zeros(len(batch.episodes))
    worst = 0.0
    for i, episode in enumerate(batch.episodes):
        model.zero_grad(set_to_none=True)
        logprob, diff = _episode_logprob(head_model, batch, episode)
        worst = max(worst, diff)
        if episode.advantage == 0.0:
            continue  # g_e = 0: a group whose rewards never differ
        (episode.advantage * logprob).backward()  # g_e = A_e grad log pi_theta (ascent direction)
        flat = _flat_grad(model)
        norms[i] = float(flat @ flat)
        sketches[i] = np.bincount(buckets, weights=signs * flat, minlength=dims)  # CountSketch S g_e
    model.zero_grad(set_to_none=True)
    return sketches, norms, worst


def _rerun(
    prereg: Prereg, cell: Cell, checkpoint: str, seeds: Sequence[int], workers: int
) -> list[EpisodeResult]:
    """The cell's episodes on ``seeds``, run again through the engine with the recording policy."""
    source = PolicySource(checkpoint=checkpoint, factory=RECORDING_FACTORY, device="cpu")
    job = design_job(prereg, cell.arm, cell.id, source, cell.mode, seeds, prereg.group_size)
    return sorted(run_group(job, workers=workers), key=lambda r: (r.spec.seed, r.spec.draw))


def _check_rerun(results: Sequence[EpisodeResult], shards: Sequence[str]) -> int:
    """The rerun reproduces the probe shards' rows: every (seed, draw), its ``replan_logprob`` and its
    ``progress_final_cm``, bit for bit; returns the rows compared."""
    recorded: dict[tuple[int, int], tuple[list[Any], float]] = {}
    for path in shards:
        cols = read_rollout_table(
            path, columns=["seed", "draw", "replan_logprob", "progress_final_cm"]
        ).to_pydict()
        for s, d, lp, p in zip(
            cols["seed"], cols["draw"], cols["replan_logprob"], cols["progress_final_cm"], strict=True
        ):
            recorded[(int(s), int(d))] = (list(lp), float(p))
    keys = [(r.spec.seed, r.spec.draw) for r in results]
    if sorted(recorded) != keys:
        raise ValueError(
            f"{', '.join(shards)}: the probe shards hold other (seed, draw) rows than the cell's seeds x K"
        )
    for result, key in zip(results, keys, strict=True):
        logprobs = [None if d.logprob is None else float(d.logprob) for d in result.diagnostics]
        progress = float(result.record.to_row()["progress_final_cm"])
        if (logprobs, progress) != recorded[key]:
            raise ValueError(
                f"seed {key[0]}, draw {key[1]}: the recording rerun differs from the probe shard's row "
                "(replan_logprob or progress_final_cm); the probe path is not reproduced, so no gradient "
                "is read"
            )
    return len(keys)


def _batch(prereg: Prereg, cell: Cell, results: Sequence[EpisodeResult], epsilon: float) -> RolloutBatch:
    """The rerun's episodes with their recorded observations and GRPO advantages of progress_final_cm."""
    rewards = [float(r.record.to_row()["progress_final_cm"]) for r in results]
    adv = group_advantages(rewards, [r.spec.seed for r in results], epsilon, -1.0)  # every group kept
    episodes = []
    for i, result in enumerate(results):
        replans = []
        for j, diag in enumerate(result.diagnostics):
            if not isinstance(diag, RecordedRow) or diag.obs is None or diag.logprob is None:
                raise ValueError(
                    f"cell {cell.id}: seed {result.spec.seed}, draw {result.spec.draw}, replan {j}: no "
                    "recorded observation or log-prob"
                )
            replans.append(
                Replan(
                    replan=j,
                    obs=diag.obs,
                    logprob=float(diag.logprob),
                    token_ids=None if diag.token_ids is None else np.asarray(diag.token_ids, dtype=np.int64),
                    token_logprobs=None if diag.token_logprobs is None else np.asarray(diag.token_logprobs),
                    step_logprobs=None if diag.step_logprobs is None else np.asarray(diag.step_logprobs),
                    frames=diag.frames,
                )
            )
        episodes.append(
            Episode(
                result.spec.seed, result.spec.draw, rewards[i], float(adv.advantage[i]), True, tuple(replans)
            )
        )
    return RolloutBatch(cell.id, 0, cell.head, cell.mode, prereg.run_key, tuple(episodes))


def cell_gradient_record(
    prereg: Prereg,
    cell_id: str,
    recipe: dict[str, Any],
    checkpoint: str | None,
    shards: Sequence[str],
    workers: int = 0,
) -> dict[str, Any]:
    """The cell's gradient file as a mapping: the episodes' sketched Gram matrix, or why there is none."""
    cell = prereg.cell(cell_id)
    head = {
        "format": GRADIENT_FORMAT,
        "cell": cell.id,
        "arm": cell.arm,
        "head": cell.head,
        "mode_text": cell.mode_text(),
    }
    reason = unavailable_reason(cell, recipe)
    if reason is None and not checkpoint:
        reason = f"not available: arm {cell.arm!r} has no checkpoint file to differentiate"
    if reason is not None:
        return {**head, "available": False, "reason": reason}
    epsilon = prereg.phase2.advantage_epsilon if prereg.phase2 is not None else DEFAULT_ADVANTAGE_EPSILON
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same float sums, so the same bytes, on every machine size
    try:
        results = _rerun(prereg, cell, str(checkpoint), prereg.seeds, workers)
        compared = _check_rerun(results, shards)
        batch = _batch(prereg, cell, results, epsilon)
        head_model = load_head_model(str(checkpoint))
        sketches, norms, worst = episode_gradients(head_model, batch, prereg.run_key)
    finally:
        torch.set_num_threads(threads)
    n_params = sum(p.numel() for p in head_model.model.parameters() if p.requires_grad)
    gram = sketches @ sketches.T
    return {
        **head,
        "available": True,
        "reason": None,
        "differentiated": (
            "log softmax(masked_logits / T) of the recorded tokens, by teacher forcing"
            if cell.head == "ar"
            else "the SDE path's Gaussian transition log-probs, on the chain regenerated from the row keys"
        ),
        "advantage": "(progress_final_cm - group mean) / (group std, ddof 1, + eps)",
        "advantage_epsilon": epsilon,
        "parameters": n_params,
        "sketch": {
            "kind": "count_sketch",
            "dims": SKETCH_DIMS,
            "key": [tag("gradient_count_sketch"), prereg.run_key],
        },
        "rerun_rows_compared": compared,
        "max_abs_logprob_diff_nats": worst,
        "episodes": [
            {
                "seed": e.seed,
                "draw": e.draw,
                "reward_cm": e.reward,
                "advantage": e.advantage,
                "grad_sq_norm": float(norms[i]),
                "sketched_sq_norm": float(gram[i, i]),
            }
            for i, e in enumerate(batch.episodes)
        ],
        "episode_gram": gram.tolist(),
    }


def write_gradient_file(record: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """The cell's gradient file, written atomically (sorted keys, every digit: same record, same bytes)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, sort_keys=True, indent=1, allow_nan=False) + "\n")
