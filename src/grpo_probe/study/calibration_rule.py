"""The calibration's registered selection rule: which recipe passes on an arm, and which one is chosen.

A candidate (one arm at one recipe) **passes** when all four hold, each read from its record
(:mod:`grpo_probe.study.calibration_run`) at the registered numbers (:class:`~grpo_probe.study.calibration.
Selection`):

1. **the training reward rises**, read as the calibration registers (``selection.rises``):

   - ``training_slope`` (the default, the first calibration's): the OLS slope of the per-iteration mean
     reward under the sampler on the iteration index has a t interval at the registered confidence whose
     lower end is above 0. The slope's standard error is the textbook one, se = sqrt(sum e_i^2 / (n - 2) /
     sum (x_i - xbar)^2), with Student t quantiles at n - 2 degrees of freedom (Draper & Smith, *Applied
     Regression Analysis*, 3rd ed., 1998, sec. 1.4; ``scipy.stats.linregress``'s ``stderr``). Each
     iteration trains on fresh seeds, so the iterations' means are independent draws around the curve, and
     the seeds' difficulty is in their spread;
   - ``monitor_slope``: on the registered monitor seeds, each scored under the sampler at every monitored
     policy with the same keyed draws (:mod:`grpo_probe.study.calibration_run`), per seed the OLS slope of
     its scores on the iteration index, b_s = sum (x_t - xbar)(y_st - ybar_s) / sum (x_t - xbar)^2; the
     read is the mean of b_s over the S seeds with the one-sample Student t interval at S - 1 degrees of
     freedom, mean +- t * sd(b) / sqrt(S), its lower end above 0. A seed's difficulty shifts all its
     scores alike and leaves its slope alone: the seeds are the paired block (the summary-measures
     analysis of serial measurements, Matthews, Altman, Campbell & Royston, BMJ 300:230-235, 1990);
   - ``monitor_difference``: per monitor seed, the final policy's score minus the initial one's; their
     mean with the same t interval at S - 1 degrees of freedom (the paired t interval), its lower end
     above 0;
2. **the policy moves in small steps**: every iteration's update KL, KL(pi_i || pi_i+1) (nats per token, or
   per action dimension and SDE step), is at most ``max_update_kl``;
3. **the entropy does not grow**: the mean entropy of the last quarter of the iterations minus that of the
   first quarter (a quarter: max(1, n // 4) iterations) is at most ``entropy_tolerance_nats``;
4. **the held-out score does not fall**: for the sampled policy and for the anchor alike, the lower end of
   the held-out gain's interval lies above -``heldout_tolerance``.

A candidate **gains** when the gain of the registered ``rank_by`` policy (the anchor: what a lab deploys)
has an interval whose lower end is above 0. Per head, the **chosen** learning rate is the one whose
candidates pass on every arm of that head, gain on at least one, and have the largest mean gain over
those arms. A head with no such learning rate has no chosen recipe, and when no candidate of any head
gains, the page says that plainly: at this compute there is no benefit for the probe to predict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from grpo_probe.study.calibration import Selection

__all__ = [
    "CandidateVerdict",
    "HeadChoice",
    "PairedRise",
    "Slope",
    "choose",
    "judge",
    "paired_rise",
    "quarter_change",
    "reward_slope",
]


@dataclass(frozen=True)
class Slope:
    """The OLS slope of a curve on its index, with its t interval."""

    slope: float
    low: float
    high: float


def reward_slope(values: Sequence[float], confidence: float) -> Slope:
    """OLS slope of ``values`` on 0..n-1 with a Student t interval at n - 2 degrees of freedom (n >= 3)."""
    y = np.asarray(values, dtype=np.float64)
    if y.size < 3:
        raise ValueError(f"a slope's interval needs at least 3 iterations, got {y.size}")
    fit = stats.linregress(np.arange(y.size, dtype=np.float64), y)
    half = float(stats.t.ppf(0.5 + confidence / 2.0, y.size - 2)) * float(fit.stderr)
    return Slope(float(fit.slope), float(fit.slope) - half, float(fit.slope) + half)


@dataclass(frozen=True)
class PairedRise:
    """A monitor read of the reward's rise (``monitor_slope``: per iteration; ``monitor_difference``:
    final minus initial), mean over the monitor seeds with its t interval."""

    kind: str
    estimate: float
    low: float
    high: float
    seeds: int


def paired_rise(
    iterations: Sequence[int], scores: Sequence[Sequence[float]], kind: str, confidence: float
) -> PairedRise:
    """The ``kind`` read of ``scores`` (one row per monitored policy, in ``iterations`` order; one column
    per monitor seed): per seed its slope on the iteration (or its last score minus its first), then the
    mean over seeds with the Student t interval at S - 1 degrees of freedom (see the module docstring)."""
    x = np.asarray(iterations, dtype=np.float64)
    y = np.asarray(scores, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] != x.size or x.size < 2 or y.shape[1] < 2:
        raise ValueError(
            f"a paired rise needs at least 2 monitored policies of at least 2 seeds each, got {y.shape} "
            f"scores at {x.size} iterations"
        )
    if kind == "monitor_slope":
        dx = x - x.mean()
        per_seed = dx @ (y - y.mean(axis=0)) / float(dx @ dx)
    elif kind == "monitor_difference":
        per_seed = y[-1] - y[0]
    else:
        raise ValueError(f"no paired rise {kind!r} (monitor_slope, monitor_difference)")
    mean = float(per_seed.mean())
    half = float(stats.t.ppf(0.5 + confidence / 2.0, per_seed.size - 1)) * float(
        per_seed.std(ddof=1) / np.sqrt(per_seed.size)
    )
    return PairedRise(kind, mean, mean - half, mean + half, int(per_seed.size))


def quarter_change(values: Sequence[float]) -> float:
    """Mean of the last quarter minus mean of the first quarter (a quarter: max(1, n // 4) values)."""
    y = np.asarray(values, dtype=np.float64)
    q = max(1, y.size // 4)
    return float(y[-q:].mean() - y[:q].mean())


@dataclass(frozen=True)
class CandidateVerdict:
    """The rule applied to one candidate's record."""

    candidate: str
    head: str
    lr: float
    slope: Slope | None
    """None when there are fewer than 3 iterations (the reward criterion then fails)."""
    max_update_kl: float
    entropy_change: float
    gains: Mapping[str, tuple[float, float, float]]
    """policy -> (gain, low, high)."""
    rises: bool
    small_steps: bool
    entropy_kept: bool
    no_fall: bool
    gained: bool
    rise: PairedRise | None = None
    """The monitor read the rule reads ``rises`` from; None under ``training_slope``."""

    @property
    def passes(self) -> bool:
        return self.rises and self.small_steps and self.entropy_kept and self.no_fall

    @property
    def failed(self) -> tuple[str, ...]:
        """The criteria it fails, in the rule's order."""
        named = (
            ("reward does not rise", self.rises),
            ("update KL above the bound", self.small_steps),
            ("entropy grows", self.entropy_kept),
            ("held-out score falls", self.no_fall),
        )
        return tuple(name for name, ok in named if not ok)


def judge(record: Mapping[str, Any], selection: Selection) -> CandidateVerdict:
    """The registered rule applied to one candidate's record."""
    iterations = record["iterations"]
    rewards = [float(it["mean_reward"]) for it in iterations]
    kls = [float(it["update_kl"]) for it in iterations]
    entropies = [float(it["entropy"]) for it in iterations]
    slope = reward_slope(rewards, selection.confidence) if len(rewards) >= 3 else None
    rise = None
    if selection.rises != "training_slope":
        if "monitor" not in record:
            raise ValueError(
                f"candidate {record['candidate']}: selection.rises is {selection.rises}, and its record "
                "holds no monitor scores; run it again under the calibration that registers the monitor"
            )
        points = record["monitor"]["points"]
        rise = paired_rise(
            [p["iteration"] for p in points],
            [p["scores"] for p in points],
            selection.rises,
            selection.confidence,
        )
    gains = {
        policy: (float(v["gain"]), float(v["low"]), float(v["high"]))
        for policy, v in record["held_out"].items()
    }
    return CandidateVerdict(
        candidate=str(record["candidate"]),
        head=str(record["head"]),
        lr=float(record["lr"]),
        slope=slope,
        max_update_kl=max(kls),
        entropy_change=quarter_change(entropies),
        gains=gains,
        rises=(slope is not None and slope.low > 0) if rise is None else rise.low > 0,
        small_steps=max(kls) <= selection.max_update_kl,
        entropy_kept=quarter_change(entropies) <= selection.entropy_tolerance_nats,
        no_fall=all(low > -selection.heldout_tolerance for _, low, _ in gains.values()),
        gained=gains[selection.rank_by][1] > 0,
        rise=rise,
    )


@dataclass(frozen=True)
class HeadChoice:
    """Per head: each learning rate's verdicts over the head's arms, and the chosen one (None: none)."""

    head: str
    by_lr: Mapping[float, tuple[CandidateVerdict, ...]]
    chosen: float | None

    def mean_gain(self, lr: float, policy: str) -> float:
        return float(np.mean([v.gains[policy][0] for v in self.by_lr[lr]]))


def choose(verdicts: Sequence[CandidateVerdict], selection: Selection) -> dict[str, HeadChoice]:
    """Per head (in the order first seen), the chosen learning rate by the rule in the module docstring."""
    heads: dict[str, dict[float, list[CandidateVerdict]]] = {}
    for v in verdicts:
        heads.setdefault(v.head, {}).setdefault(v.lr, []).append(v)
    choices = {}
    for head, by_lr in heads.items():
        eligible = [lr for lr, vs in by_lr.items() if all(v.passes for v in vs) and any(v.gained for v in vs)]
        frozen = {lr: tuple(vs) for lr, vs in by_lr.items()}
        choice = HeadChoice(head, frozen, None)
        if eligible:
            best = max(eligible, key=lambda lr: (choice.mean_gain(lr, selection.rank_by), -lr))
            choice = HeadChoice(head, frozen, best)
        choices[head] = choice
    return choices
