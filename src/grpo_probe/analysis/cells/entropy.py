"""AR cells: how much room the temperature opens, read from the action-token entropy of each replan.

Why: a temperature that leaves the per-token distribution near one-hot cannot create spread however
many draws are taken (memo section 4, the AR-cell secondary read). The rollout rows carry, per replan,
the mean entropy of the sampling distribution over the chunk's tokens and the token count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpo_probe.analysis.cells.tables import RolloutTable

__all__ = ["EntropySummary", "entropy_summary"]


@dataclass(frozen=True)
class EntropySummary:
    """Per-replan action-token entropy (nats) and tokens per chunk over a cell's sampled episodes."""

    n_replans: int
    mean: float
    p10: float
    median: float
    p90: float
    per_replan_index_mean: tuple[float, ...]
    """Mean over episodes at replan 0, 1, ...; an episode ended early by the strike cap adds nothing
    to the replans it did not reach."""
    mean_tokens_per_chunk: float
    min_tokens_per_chunk: int
    max_tokens_per_chunk: int


def entropy_summary(table: RolloutTable) -> EntropySummary | None:
    """The distribution of ``replan_entropy_mean`` over all (episode, replan) pairs; None for non-AR tables.

    Each value is already the mean over the chunk's token steps, so the overall mean weights replans
    equally, not tokens. Quantiles use numpy's default linear interpolation.
    """
    if table.replan_entropy_mean is None or table.replan_n_tokens is None:
        return None
    per_episode = table.replan_entropy_mean
    values = np.concatenate(per_episode) if per_episode else np.empty(0)
    tokens = np.concatenate(table.replan_n_tokens) if table.replan_n_tokens else np.empty(0, dtype=np.int64)
    if values.size == 0 or tokens.size == 0:
        raise ValueError(
            f"{table.path}: columns replan_entropy_mean, replan_n_tokens are empty in an AR table"
        )
    longest = max(len(e) for e in per_episode)
    by_index = tuple(float(np.mean([e[i] for e in per_episode if len(e) > i])) for i in range(longest))
    p10, median, p90 = np.quantile(values, [0.1, 0.5, 0.9])
    return EntropySummary(
        n_replans=int(values.size),
        mean=float(np.mean(values)),
        p10=float(p10),
        median=float(median),
        p90=float(p90),
        per_replan_index_mean=by_index,
        mean_tokens_per_chunk=float(np.mean(tokens)),
        min_tokens_per_chunk=int(tokens.min()),
        max_tokens_per_chunk=int(tokens.max()),
    )
