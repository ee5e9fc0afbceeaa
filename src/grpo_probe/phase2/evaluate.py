"""Held-out evaluation of the pilot: the initial and the final policy through the arm's anchor path.

Why the anchor path: the question is whether the deployed policy got better, and deployment decodes
deterministically (AR greedy, flow Heun from draw 0 of the keyed noise), as the probe's anchors do. Both
policies run on the same held-out seeds with the same keyed initial noise, so each seed is a pair and the
change is read per seed: final minus initial.

The interval is Efron's percentile bootstrap over seeds (Efron & Tibshirani 1993, ch. 13.3), as the probe
reports its reads: B = ``analysis.bootstrap.resamples`` resamples of the n seeds with replacement, the
mean of each, the (1 - c)/2 and (1 + c)/2 quantiles; its generator is keyed by (the registered bootstrap
seed, "phase2", arm, read), so an interval never depends on which other reads were computed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.prereg import Prereg
from grpo_probe.prereg.rule import BootstrapSpec
from grpo_probe.rollout import GroupJob, PolicySource, RolloutPool, read_rollout_table, write_shard

__all__ = ["EVAL_READS", "PairedChange", "evaluate_checkpoint", "paired_changes", "percentile_interval"]

EVAL_READS: tuple[tuple[str, str], ...] = (
    ("progress_final_cm", "progress (cm)"),
    ("best_point_cm", "best point (cm)"),
    ("success", "success rate"),
    ("contact", "engagement rate"),
    ("any_reset_strike", "episodes with a reset strike"),
    ("reset_strikes", "reset strikes per episode"),
    ("knocked_off", "knocked-off rate"),
    ("not_upright", "not-upright rate"),
    ("swat", "swat rate"),
    ("away_tail", "away-tail rate"),
)
"""Per-episode reads compared between the initial and the final policy: (name, label)."""


def evaluate_checkpoint(
    prereg: Prereg,
    arm: str,
    checkpoint: str | os.PathLike[str],
    label: str,
    table: str | os.PathLike[str],
    *,
    device: str = "cpu",
    workers: int = 0,
    pool: RolloutPool | None = None,
) -> None:
    """The arm's anchor sampler with ``checkpoint`` on the held-out seeds, one rollout each, to ``table``."""
    if prereg.phase2 is None:
        raise ValueError(f"{prereg.path}: the design registers no phase2 section")
    job = GroupJob(
        arm=arm,
        cell=f"phase2-eval-{label}",
        source=PolicySource(checkpoint=str(checkpoint), device=device),
        mode=prereg.arms[arm].anchor,
        seeds=prereg.phase2.eval_seeds,
        draws=1,
        run_key=prereg.run_key,
        env=prereg.env,
    )
    write_shard(job, table, workers=workers, pool=pool)


def _per_episode(table: pa.Table, read: str, swat_speed_m_s: float, away_tail_cm: float) -> np.ndarray:
    cols = table.to_pydict()
    if read == "any_reset_strike":
        return np.array([n > 0 for n in cols["reset_strikes"]], dtype=np.float64)
    if read == "not_upright":
        return np.array([not u for u in cols["final_upright"]], dtype=np.float64)
    if read == "swat":
        return np.array([v > swat_speed_m_s for v in cols["max_boat_speed_m_s"]], dtype=np.float64)
    if read == "away_tail":
        return np.array([p < away_tail_cm for p in cols["progress_final_cm"]], dtype=np.float64)
    return np.asarray(cols[read], dtype=np.float64)


def percentile_interval(
    values: np.ndarray, resamples: int, confidence: float, rng: np.random.Generator
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (one per seed); the point with one seed."""
    x = np.asarray(values, dtype=np.float64)
    index = rng.integers(0, x.size, size=(resamples, x.size))
    replicates = x[index].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return float(low), float(high)


@dataclass(frozen=True)
class PairedChange:
    """One read: its mean under the initial and the final policy and the paired change with its interval."""

    read: str
    label: str
    initial: float
    final: float
    delta: float
    ci_low: float
    ci_high: float
    seeds: int

    @property
    def verdict(self) -> str:
        """``up`` (interval above 0), ``down`` (below 0) or ``unchanged`` (the interval holds 0)."""
        if self.ci_low > 0:
            return "up"
        if self.ci_high < 0:
            return "down"
        return "unchanged"


def paired_changes(
    initial: str | os.PathLike[str],
    final: str | os.PathLike[str],
    arm: str,
    bootstrap: BootstrapSpec,
    swat_speed_m_s: float,
    away_tail_cm: float,
) -> list[PairedChange]:
    """Per read, mean(final - initial) over the held-out seeds with its percentile bootstrap interval."""
    before, after = read_rollout_table(initial), read_rollout_table(final)
    seeds_before, seeds_after = before.column("seed").to_pylist(), after.column("seed").to_pylist()
    if seeds_before != seeds_after:
        raise ValueError(f"{initial} and {final}: evaluated on different seeds, so they cannot be paired")
    changes = []
    for read, label in EVAL_READS:
        x0 = _per_episode(before, read, swat_speed_m_s, away_tail_cm)
        x1 = _per_episode(after, read, swat_speed_m_s, away_tail_cm)
        delta = x1 - x0  # paired by seed: same spawn, same keyed initial noise
        rng = numpy_generator(bootstrap.seed, tag("phase2"), tag(arm), tag(read))
        low, high = percentile_interval(delta, bootstrap.resamples, bootstrap.confidence, rng)
        changes.append(
            PairedChange(
                read, label, float(x0.mean()), float(x1.mean()), float(delta.mean()), low, high, len(delta)
            )
        )
    return changes
