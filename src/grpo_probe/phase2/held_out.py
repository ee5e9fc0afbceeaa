"""The held-out gains of a stage's replicates, by each policy it scores: the anchor and the sampled policy.

Why both policies: the pilot optimises the sampled policy (AR at its temperature, flow with the SDE
sampler) and a lab deploys the anchor (greedy, flow's ODE from draw 0). A pilot can improve the first and
not the second, so phase2.md shows both gains, and a study registers which one it ranks
(:mod:`grpo_probe.study.design`, ``gain.policy``).

Why replicates: one pilot's gain mixes what the recipe does to the arm with the luck of its training
spawns and draws. Replicate r trains from the same theta_0 on training seeds of its own
(:meth:`grpo_probe.prereg.phase2.Phase2.iteration_seeds`), and every replicate's final policy is scored
on the same held-out seeds as the initial one, so the spread of the replicates' gains is the error of one
pilot's gain, training luck and held-out noise together.

Per policy and read, each replicate's gain is the mean over held-out seeds of (final - initial), a seed's
score being the mean over its draws (one for the anchor, ``phase2.sampled_draws`` for the sampler), with
the paired Student t interval over seeds (:func:`grpo_probe.phase2.evaluate.paired_t_interval`). The
arm's gain is the mean of its R replicates' gains; its standard error is

    se = s_r / sqrt(R),    s_r the standard deviation (ddof 1) of the R replicate gains,

the standard error of a mean of R independent replicates (each replicate a fresh training run on fresh
spawns, so they are independent given the arm), which is what the study's reliability reads
(:mod:`grpo_probe.study.reliability`). With one replicate there is no spread, and se is None. The mean's
interval over seeds (the replicates' per-seed differences averaged, then the paired t interval) is shown
too: it is conditional on these replicates, the held-out noise alone.

Everything here is a closed form of the tables: the same bytes on every rerun.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from grpo_probe.phase2.evaluate import METRIC_READS, evaluate_checkpoint, paired_t_interval
from grpo_probe.phase2.paths import StagePaths
from grpo_probe.prereg import Prereg
from grpo_probe.rollout import read_rollout_table

__all__ = ["PolicyGains", "ReplicateGain", "evaluate_extra", "policy_gains", "seed_scores"]


def seed_scores(table: str | os.PathLike[str], read: str) -> tuple[list[int], np.ndarray]:
    """Per held-out seed (ascending), the mean of ``read`` over that seed's episodes in ``table``."""
    cols = read_rollout_table(table).to_pydict()
    if read not in cols:
        raise ValueError(f"{table}: no column {read!r}")
    by_seed: dict[int, list[float]] = {}
    for seed, value in zip(cols["seed"], cols[read], strict=True):
        by_seed.setdefault(int(seed), []).append(float(value))
    seeds = sorted(by_seed)
    return seeds, np.array([np.mean(by_seed[s]) for s in seeds], dtype=np.float64)


@dataclass(frozen=True)
class ReplicateGain:
    """One replicate's held-out gain: mean over seeds of final - initial, with its paired t interval."""

    replicate: int
    gain: float
    ci_low: float
    ci_high: float
    diff_sd: float
    """Standard deviation (ddof 1) of the per-seed differences."""
    seeds: int


@dataclass(frozen=True)
class PolicyGains:
    """One policy's and one read's gains over a stage's replicates."""

    policy: str
    read: str
    draws: int
    """Draws per held-out seed (1 for the anchor)."""
    replicates: tuple[ReplicateGain, ...]
    gain: float
    """Mean of the replicates' gains."""
    ci_low: float
    ci_high: float
    """Paired t interval over seeds of the replicates' mean per-seed difference (held-out noise only)."""
    replicate_sd: float | None
    """Standard deviation (ddof 1) of the replicates' gains; None with one replicate."""
    se: float | None
    """replicate_sd / sqrt(R): the standard error of the arm's gain; None with one replicate."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "read": self.read,
            "draws": self.draws,
            "replicates": [vars(r) for r in self.replicates],
            "gain": self.gain,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "replicate_sd": self.replicate_sd,
            "se": self.se,
        }


def _gains(policy: str, read: str, draws: int, tables: Mapping[str, str], confidence: float) -> PolicyGains:
    seeds, initial = seed_scores(tables["initial"], read)
    finals = [label for label in tables if label != "initial"]
    diffs, per_replicate = [], []
    for label in finals:
        r = int(label.removeprefix("final-"))
        final_seeds, final = seed_scores(tables[label], read)
        if final_seeds != seeds:
            raise ValueError(
                f"{tables['initial']} and {tables[label]}: evaluated on different seeds, so they cannot "
                "be paired"
            )
        d = final - initial
        low, high = paired_t_interval(d, confidence)
        per_replicate.append(
            ReplicateGain(r, float(d.mean()), low, high, float(np.std(d, ddof=1)), len(seeds))
        )
        diffs.append(d)
    mean_diff = np.mean(np.stack(diffs), axis=0)
    low, high = paired_t_interval(mean_diff, confidence)
    gains = np.array([g.gain for g in per_replicate])
    sd = float(np.std(gains, ddof=1)) if len(gains) >= 2 else None
    return PolicyGains(
        policy=policy,
        read=read,
        draws=draws,
        replicates=tuple(per_replicate),
        gain=float(gains.mean()),
        ci_low=low,
        ci_high=high,
        replicate_sd=sd,
        se=None if sd is None else sd / math.sqrt(len(gains)),
    )


def policy_gains(
    tables: Mapping[str, Mapping[str, str]],
    draws: Mapping[str, int],
    confidence: float,
    reads: Sequence[str] = tuple(read for read, _ in METRIC_READS),
) -> list[PolicyGains]:
    """Per policy of ``tables`` (policy -> {"initial": path, "final-0": path, "final-1": ...}) and per
    read, the replicates' held-out gains; ``draws``: each policy's draws per held-out seed."""
    return [
        _gains(policy, read, int(draws[policy]), by_label, confidence)
        for policy, by_label in tables.items()
        for read in reads
    ]


def evaluate_extra(
    prereg: Prereg,
    arm: str,
    paths: StagePaths,
    initial: str | os.PathLike[str],
    pool: Any,
    device: str = "cpu",
) -> list[str]:
    """The held-out tables beyond the anchor's two (:meth:`StagePaths.extra_eval_tables`): each further
    replicate's final policy by the anchor, and, when registered, every policy by the phase-2 sampler at
    ``phase2.sampled_draws`` draws a seed. Returns the tables written, in order."""
    phase2 = prereg.phase2
    assert phase2 is not None
    sampler = phase2.recipe(prereg.arms[arm].head).mode
    written = []
    extra = set(paths.extra_eval_tables().values())
    for policy in paths.policies:
        for label in paths.eval_labels:
            table = paths.eval_table(policy, label)
            if table not in extra:
                continue
            checkpoint = initial if label == "initial" else paths.final_of(int(label.removeprefix("final-")))
            if policy == "sampled":
                mode, draws = sampler, int(phase2.sampled_draws or 1)
            else:
                mode, draws = None, 1
            evaluate_checkpoint(
                prereg,
                arm,
                checkpoint,
                f"{policy}-{label}",
                table,
                device=device,
                pool=pool,
                mode=mode,
                draws=draws,
            )
            written.append(table)
    return written
