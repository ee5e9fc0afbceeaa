"""Held-out evaluation of the pilot: the initial and the final policy through the arm's anchor path.

Why the anchor path: the question is whether the deployed policy got better, and deployment decodes
deterministically (AR greedy, flow Heun from draw 0 of the keyed noise), as the probe's anchors do. Both
policies run on the same held-out seeds with the same keyed initial noise, so each seed is a pair and the
change is read per seed: final minus initial.

What is compared: the registered metrics every environment records (progress, best point, success,
engagement) and every guard the environment declares (:class:`grpo_probe.envs.protocol.Guard`), as the
share of held-out episodes that tripped it, with n, counted as the probe's analysis counts trips.

The verdict's interval (:func:`paired_interval`) is the hull of two intervals of the mean change over the
n held-out seeds, d_i = final_i - initial_i, s_d their standard deviation (ddof 1), c the registered
confidence (``analysis.bootstrap.confidence``):

- the paired Student t interval, mean(d) +- t_{(1 + c)/2, n - 1} s_d / sqrt(n) (:func:`paired_t_interval`;
  Student 1908; Casella & Berger, *Statistical Inference*, 2nd ed., 2002, Sec. 9.2.2);
- the studentised bootstrap (bootstrap-t) interval, [mean(d) - t*_{(1 + c)/2} s_d / sqrt(n),
  mean(d) - t*_{(1 - c)/2} s_d / sqrt(n)], t*_q the q-quantile of the resampled
  t* = (mean(d*) - mean(d)) / (s_d* / sqrt(n)) (:func:`paired_bootstrap_t_intervals`; Efron, Can. J. Stat.
  9, 1981; Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, Sec. 12.5).

"up" (or "down") needs both to lie above (below) zero, so on each side the verdict errs no more often than
the better of the two tests for the differences' shape. Why both: the t interval alone is exact only for
normal differences. Skewed ones make mean(d) and s_d move together, so at a true zero mean it called a
change one-sidedly far above its nominal rate (exponential differences: 10 % at 10 seeds against 5 %,
nearly all "down"; lognormal 16 %). The bootstrap-t reads the skew from the resampled t* (second-order
accurate: Hall, *The Bootstrap and Edgeworth Expansion*, 1992, ch. 3) and more than halves that excess, but
alone it errs above nominal for symmetric heavy tails (Student t, 3 df: 7 % at 10 and 30 seeds), where the
t-test is conservative (4 %). The hull holds both. Why not the sign-flip permutation test: it is exact for
differences symmetric about zero, which a skewed difference with mean zero is not, and it erred as often
as the t-test there; the skew-corrected t statistics (Johnson, JASA 73, 1978; Hall, JRSS B 54, 1992) did
no better than the bootstrap-t (docs/phase2.md has every simulated rate). What no test on n seeds can do
is hold the rate against a rare jump that none of the n seeds drew (Bahadur & Savage, Ann. Math. Stat.
27, 1956: no test of a mean has power above its level over all distributions); phase2.md says so beside
every verdict. At 3 seeds the bootstrap-t cannot call anything at 95 % (a ninth of its resamples repeat
one seed, so its quantiles are unbounded): the verdict is "not decidable" there, not a t-test's call that
skew would bias. The resamples are one fixed keyed plan per n (:func:`_resample_plan`): the same bytes on
every rerun. (tests/phase2/test_verdict_skew.py and test_verdict_calibration.py simulate it.)

What the evaluation can detect (:func:`minimum_detectable_change`): the paired t-test's approximation, since
the verdict's interval has no closed-form power. Against normal differences shifted by this MDE it called
"up" in 78 % of simulated pilots at 30 seeds and 71 % at 10 (tests/phase2/test_verdict_calibration.py).
With n held-out seeds and the paired differences d_i = final_i - initial_i, a two-sided paired t-test at
the registered confidence c has power 1 - beta against a true mean change of

    MDE = (t_{1 - alpha/2, n - 1} + t_{1 - beta, n - 1}) * s_d / sqrt(n),    alpha = 1 - c,

s_d the standard deviation (ddof 1) of the d_i: the sample-size formula of the paired (one-sample on the
differences) design, n = (z_{1 - alpha/2} + z_{1 - beta})^2 s_d^2 / MDE^2 (Chow, Shao & Wang, *Sample
Size Calculations in Clinical Research*, 2nd ed., 2008, Sec. 3.1), solved for MDE, with Student t
quantiles at n - 1 degrees of freedom in place of the normal ones: the standard small-sample form, since
s_d is estimated from the same n seeds (at 3 seeds the z form understates the MDE by a factor of 1.9).

Why the spread of the differences: the comparison is paired, so the interval and the test read the d_i
alone, and what the seeds can detect is set by how much the change varies from seed to seed, not by how
much the seeds differ from one another. The two can be far apart: the same spawn and the same keyed noise
make both policies' values move together, so the per-policy spread mostly cancels in d_i (the smoke
design's pilot: the initial policy's per-seed SD 0.106 cm, the differences' 0.0031 cm). s_d is computed
from the held-out pairs themselves, the same differences the interval is built on, with no free choice in
it, so it is as fixed a function of the two evaluation tables as the interval is. "Not shown" then reads
against it: a change below the MDE is one these seeds would mostly miss.

What the seeds can rule out (:meth:`DetectableChange.resolves`): an interval inside +-MDE says "a change
that large is absent at this power", on any number of seeds from two on. Why: if the true change were at
least the MDE in size while the interval lay inside +-MDE, the interval would miss the true change, which
a level-c interval does with probability at most 1 - c: the bootstrap-t's coverage, near c for normal and
moderately skewed differences (docs/phase2.md has the simulated rates), which no interval on n seeds can
promise against a jump none of them drew.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from grpo_probe.envs.observation import OBSERVATION_STATE
from grpo_probe.envs.protocol import Guard
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.phase2.recording import RECORDING_FACTORY, RecordedRow
from grpo_probe.policies.protocol import RowKey
from grpo_probe.prereg import Prereg
from grpo_probe.rollout import PolicySource, RolloutPool, design_job, read_rollout_table, run_group
from grpo_probe.rollout.engine import group_table
from grpo_probe.rollout.job import DEFAULT_ENVS_PER_WORKER
from grpo_probe.rollout.progress import RolloutProgress
from grpo_probe.rollout.shards import remove_stale_temps
from grpo_probe.rollout.table import write_rollout_table
from grpo_probe.sampling import SamplingMode

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "METRIC_READS",
    "POWER",
    "DetectableChange",
    "HeldOutObservations",
    "PairedChange",
    "evaluate_checkpoint",
    "minimum_detectable_change",
    "paired_bootstrap_t_interval",
    "paired_bootstrap_t_intervals",
    "paired_changes",
    "paired_interval",
    "paired_intervals",
    "paired_t_interval",
    "skewness",
]

METRIC_READS: tuple[tuple[str, str], ...] = (
    ("progress_final_cm", "progress (cm)"),
    ("best_point_cm", "best point (cm)"),
    ("success", "success rate"),
    ("contact", "engagement rate"),
)
"""Per-episode registered metrics compared between the initial and the final policy: (column, label).
Every guard the environment declares follows them, as the share of episodes that tripped it."""

POWER = 0.8
"""1 - beta of the minimum detectable change: the conventional 80 % power (Cohen, *Statistical Power
Analysis for the Behavioral Sciences*, 2nd ed., 1988, ch. 2), so "not shown" is read against the change
the held-out seeds would find four times out of five. A documented constant, not a registered number: it
only words what an interval already shows, and changes no verdict."""


BOOTSTRAP_RESAMPLES = 999
"""B, the resamples of the bootstrap-t interval: (B + 1) (1 - c) / 2 is a whole number at c = 0.95 and 0.9,
so its quantiles are order statistics with no interpolation (Davison & Hinkley, *Bootstrap Methods and their
Application*, 1997, ch. 5), and a read's resampling costs milliseconds in the report job."""

INTERVAL_NAME = "hull of the paired t and the studentised bootstrap (bootstrap-t)"
"""How the page names the verdict's test."""


@dataclass(frozen=True)
class HeldOutObservations:
    """The observations a policy saw on the held-out seeds, one per replan, with the keys it drew by."""

    keys: tuple[RowKey, ...]
    obs: np.ndarray
    """float32 [replans over all held-out episodes, obs_dim], in (seed, replan) order."""
    frames: Mapping[str, np.ndarray] | None = None
    """Camera-fed policy: ``observation.images.<camera>`` -> uint8 [replans, H, W, 3], the frames it saw."""

    def policy_input(self) -> np.ndarray | dict[str, np.ndarray]:
        """What ``Policy.act`` reads: the state array, or the state and the frames as an observation
        mapping for a camera-fed policy (the keys it declared)."""
        if not self.frames:
            return self.obs
        return {OBSERVATION_STATE: self.obs, **self.frames}


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
    mode: SamplingMode | None = None,
    draws: int = 1,
) -> HeldOutObservations:
    """The arm's anchor sampler with ``checkpoint`` on the held-out seeds, one rollout each, to ``table``.

    ``mode`` and ``draws``: another sampler (the arm's phase-2 sampler, to score the sampled policy) and
    how many keyed draws per held-out seed; the draws' noise is keyed by (run key, seed, replan, draw), so
    the initial and the final policy meet the same draws and stay paired by seed and draw.

    The policy runs through the recording wrapper, which returns the same actions and keeps each replan's
    observation (the table's bytes are those of a plain run: rows never name the policy's factory); the
    observations come back, for the anchor-movement read (:mod:`grpo_probe.phase2.movement`).
    """
    if prereg.phase2 is None:
        raise ValueError(f"{prereg.path}: the design registers no phase2 section")
    source = PolicySource(checkpoint=str(checkpoint), factory=RECORDING_FACTORY, device=device)
    mode = prereg.arms[arm].anchor if mode is None else mode
    job = design_job(prereg, arm, f"phase2-eval-{label}", source, mode, prereg.phase2.eval_seeds, draws)
    remove_stale_temps(table)
    progress = RolloutProgress(len(job.episodes()), job.label)
    try:
        results = run_group(
            job, workers=workers, pool=pool, envs_per_worker=DEFAULT_ENVS_PER_WORKER, progress=progress
        )
    finally:
        progress.close()
    write_rollout_table(group_table(job, results), table)
    keys: list[RowKey] = []
    seen: list[np.ndarray] = []
    frames: dict[str, list[np.ndarray]] = {}
    for result in sorted(results, key=lambda r: r.spec):
        for replan, diag in enumerate(result.diagnostics):
            if not isinstance(diag, RecordedRow) or diag.obs is None:
                raise ValueError(
                    f"held-out seed {result.spec.seed} replan {replan}: the policy recorded no observation"
                )
            keys.append(RowKey(prereg.run_key, result.spec.seed, replan, result.spec.draw))
            seen.append(diag.obs)
            for key, frame in (diag.frames or {}).items():
                frames.setdefault(key, []).append(frame)
    stacked = {key: np.stack(values) for key, values in frames.items()} or None
    return HeldOutObservations(tuple(keys), np.stack(seen).astype(np.float32), stacked)


def _per_episode(
    cols: Mapping[str, list[Any]], read: str, guards: Mapping[str, Guard], analysis: Mapping[str, Any]
) -> np.ndarray:
    """One value per held-out episode: a metric column, or 1.0 where the episode tripped guard ``read``."""
    guard = guards.get(read)
    if guard is not None:
        return guard.trips(np.asarray(cols[guard.column]), analysis).astype(np.float64)
    return np.asarray(cols[read], dtype=np.float64)


def _t_quantile(p: float, df: int) -> float:
    """t_{p, df}, the Student t quantile ``scipy.stats.t.ppf(p, df)`` evaluates, through
    ``scipy.special.stdtrit``: scipy.stats is a CPU-second to import, and the report job would pay it for
    a handful of numbers."""
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def paired_t_interval(values: Sequence[float] | np.ndarray, confidence: float) -> tuple[float, float]:
    """The paired Student t interval of the mean of ``values`` (one paired difference per seed):

        mean +- t_{(1 + c)/2, n - 1} * s / sqrt(n),    s the standard deviation with ddof 1,

    the one-sample t interval on the differences (Casella & Berger, *Statistical Inference*, 2nd ed.,
    2002, Sec. 9.2.2), c = ``confidence``; the same as ``scipy.stats.t.interval(c, n - 1, mean, s /
    sqrt(n))``. When every seed changed alike (s = 0, exactly) the interval is the point: the paired
    t-test has nothing to scale by, and a change that every seed shows is called by its sign. Fewer than
    two values have no degree of freedom and are refused (the design check asks for two held-out seeds).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(f"the paired t interval needs at least two paired differences, got shape {x.shape}")
    n = int(x.size)
    mean = float(x.mean())
    if np.ptp(x) == 0:  # every seed changed alike: np.std of equal values can round to about 1e-17
        return mean, mean
    half = _t_quantile((1.0 + confidence) / 2.0, n - 1) * float(np.std(x, ddof=1)) / float(np.sqrt(n))
    return mean - half, mean + half


@functools.lru_cache(maxsize=64)
def _resample_plan(n: int, resamples: int) -> np.ndarray:
    """The resampling plan of n seeds: int [resamples, n] indices, drawn with replacement from a generator
    keyed by (tag, n, resamples) alone, so every read, every pilot and every rerun with n seeds resamples
    alike and the interval is a pure function of the differences."""
    plan = numpy_generator(tag("paired-bootstrap-t"), n, resamples).integers(0, n, size=(resamples, n))
    plan.setflags(write=False)
    return plan


def paired_bootstrap_t_intervals(
    values: np.ndarray, confidence: float, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[np.ndarray, np.ndarray]:
    """The bootstrap-t interval of the mean of each row of ``values`` [pilots, n] (one row, one read's
    paired differences), at ``confidence`` c: the studentised bootstrap (Efron 1981; Efron & Tibshirani,
    *An Introduction to the Bootstrap*, 1993, Sec. 12.5),

        [mean - t*_(B + 1 - k) * s / sqrt(n),  mean - t*_(k) * s / sqrt(n)],    k = floor((B + 1)(1 - c) / 2),

    t*_(j) the j-th smallest of t*_b = (mean(d*_b) - mean) / (s*_b / sqrt(n)) over the B resamples d*_b of
    the row (with replacement, the fixed plan :func:`_resample_plan`), s and s*_b standard deviations with
    ddof 1. A resample that repeats one value (s*_b = 0) has t*_b = +inf or -inf by the sign of its mean's
    departure (0 when it has none): at 3 seeds a ninth of the resamples do, the order statistics are
    infinite, and so is the interval ("not decidable"). A row with no spread (every seed changed alike)
    gets the point interval [mean, mean], as the t interval does: a change every seed shows is called by its
    sign. Rows are independent; batching only shares the plan, so a row's interval is the same alone or in
    a batch (the simulations in tests/phase2 run the verdict's own arithmetic this way).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"the bootstrap-t interval needs at least two paired differences, got {x.shape}")
    n = int(x.shape[1])
    k = math.floor((resamples + 1) * (1.0 - confidence) / 2.0)
    if k < 1:
        raise ValueError(f"{resamples} resamples cannot reach {confidence:.0%} confidence")
    plan = _resample_plan(n, resamples)
    mean = x.mean(axis=1)
    sd = x.std(axis=1, ddof=1)
    low, high = np.empty_like(mean), np.empty_like(mean)
    for start in range(0, x.shape[0], 64):  # [64, B, n] float64 at a time: tens of MB at n = 96
        rows = slice(start, start + 64)
        d = x[rows][:, plan]
        m_star = d.mean(axis=2)
        s_star = d.std(axis=2, ddof=1)
        flat = d.max(axis=2) == d.min(axis=2)  # exactly one value repeated: no spread, whatever rounding says
        centre = mean[rows, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            t_star = (m_star - centre) / (s_star / math.sqrt(n))
        departure = np.where(m_star > centre, np.inf, np.where(m_star < centre, -np.inf, 0.0))
        t_star = np.where(flat, departure, t_star)
        t_star.sort(axis=1)
        lower_q, upper_q = t_star[:, k - 1], t_star[:, resamples - k]
        se = sd[rows] / math.sqrt(n)
        with np.errstate(invalid="ignore"):
            low[rows] = mean[rows] - upper_q * se
            high[rows] = mean[rows] - lower_q * se
    alike = np.ptp(x, axis=1) == 0  # every seed changed alike: np.std of equal values can round to ~1e-17
    low = np.where(alike, mean, low)
    high = np.where(alike, mean, high)
    return low, high


def paired_bootstrap_t_interval(
    values: Sequence[float] | np.ndarray, confidence: float, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """The bootstrap-t interval of the mean of ``values`` (one paired difference per seed) at
    ``confidence``: :func:`paired_bootstrap_t_intervals` of one row (its docstring has the formula). Its
    ends are -inf / +inf where the seeds are too few to bound it ("not decidable"). Fewer than two values
    are refused (the design check asks for two held-out seeds)."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(
            f"the bootstrap-t interval needs at least two paired differences, got shape {x.shape}"
        )
    low, high = paired_bootstrap_t_intervals(x[None, :], confidence, resamples)
    return float(low[0]), float(high[0])


def paired_intervals(values: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The verdict's interval of each row of ``values`` [pilots, n]: the hull

        [min(t_low, bt_low), max(t_high, bt_high)],

    of the paired t interval mean +- t_{(1 + c)/2, n - 1} s / sqrt(n) and the bootstrap-t interval
    (:func:`paired_bootstrap_t_intervals`), so it excludes zero only where both do (module docstring: each
    side's false-call rate is then at most the smaller of the two tests'). A row with no spread gets
    [mean, mean], as both do."""
    x = np.asarray(values, dtype=np.float64)
    boot_low, boot_high = paired_bootstrap_t_intervals(x, confidence)
    n = int(x.shape[1])
    mean = x.mean(axis=1)
    half = _t_quantile((1.0 + confidence) / 2.0, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n)
    alike = np.ptp(x, axis=1) == 0
    half = np.where(alike, 0.0, half)
    return np.minimum(boot_low, mean - half), np.maximum(boot_high, mean + half)


def paired_interval(values: Sequence[float] | np.ndarray, confidence: float) -> tuple[float, float]:
    """The verdict's interval of the mean of ``values`` (one paired difference per seed): the hull of the
    paired t and the bootstrap-t intervals, :func:`paired_intervals` of one row. Its ends are -inf / +inf
    where the seeds are too few for the bootstrap-t to reach the confidence ("not decidable")."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(f"the paired interval needs at least two paired differences, got shape {x.shape}")
    low, high = paired_intervals(x[None, :], confidence)
    return float(low[0]), float(high[0])


def skewness(values: Sequence[float] | np.ndarray) -> float | None:
    """g1 = m3 / m2^(3/2), the sample skewness of the paired differences (m_k the k-th central moment with
    divisor n; Joanes & Gill, The Statistician 47, 1998): what phase2.md reports beside the verdict, since
    skew is what moves the verdict's error rate off nominal. None without spread."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 3 or np.ptp(x) == 0:
        return None
    centred = x - x.mean()
    return float((centred**3).mean() / (centred**2).mean() ** 1.5)


@dataclass(frozen=True)
class PairedChange:
    """One read: its mean under the initial and the final policy and the paired change with the verdict's
    interval (``ci_low``, ``ci_high``: :func:`paired_interval` at the registered confidence; -inf / +inf
    where the seeds are too few to bound it).

    For a guard read (``guard`` True) the means are trip rates: the share of the ``seeds`` held-out
    episodes (one per seed) that tripped it.
    """

    read: str
    label: str
    initial: float
    final: float
    delta: float
    ci_low: float
    ci_high: float
    seeds: int
    guard: bool = False

    @property
    def decidable(self) -> bool:
        """Whether the interval is bounded: False where the seeds are too few for the bootstrap-t to reach
        the confidence (3 seeds at 95 %), and no call can be made."""
        return math.isfinite(self.ci_low) and math.isfinite(self.ci_high)

    @property
    def verdict(self) -> str:
        """``up`` (interval above 0), ``down`` (below 0) or ``unchanged`` (the interval holds 0): the
        two-sided call of the paired t and the bootstrap-t together, each at level 1 - confidence."""
        if self.ci_low > 0:
            return "up"
        if self.ci_high < 0:
            return "down"
        return "unchanged"


def paired_changes(
    initial: str | os.PathLike[str],
    final: str | os.PathLike[str],
    confidence: float,
    guards: Sequence[Guard],
    analysis: Mapping[str, Any],
) -> list[PairedChange]:
    """Per read, mean(final - initial) over the held-out seeds with the verdict's interval at
    ``confidence`` (the registered ``analysis.bootstrap.confidence``).

    Reads: :data:`METRIC_READS`, then every guard in ``guards`` (the environment's declarations, in its
    order); ``analysis``: the registered numbers a guard's threshold may name.
    """
    before, after = read_rollout_table(initial), read_rollout_table(final)
    seeds_before, seeds_after = before.column("seed").to_pylist(), after.column("seed").to_pylist()
    if seeds_before != seeds_after:
        raise ValueError(f"{initial} and {final}: evaluated on different seeds, so they cannot be paired")
    by_name = {g.name: g for g in guards}
    reads = [*METRIC_READS, *((g.name, f"{g.name} rate") for g in guards)]
    cols_before, cols_after = before.to_pydict(), after.to_pydict()
    changes = []
    for read, label in reads:
        x0 = _per_episode(cols_before, read, by_name, analysis)
        x1 = _per_episode(cols_after, read, by_name, analysis)
        delta = x1 - x0  # paired by seed: same spawn, same keyed initial noise
        low, high = paired_interval(delta, confidence)
        changes.append(
            PairedChange(
                read,
                label,
                float(x0.mean()),
                float(x1.mean()),
                float(delta.mean()),
                low,
                high,
                len(delta),
                read in by_name,
            )
        )
    return changes


@dataclass(frozen=True)
class DetectableChange:
    """The smallest true mean change of a read that the held-out seeds detect at the registered
    confidence with probability :data:`POWER` (the module docstring has the formula)."""

    read: str
    seeds: int
    diff_sd: float | None
    """Standard deviation (ddof 1) of the per-seed paired differences final - initial; None with one seed."""
    confidence: float
    power: float
    t_confidence: float | None
    """t_{1 - alpha/2, n - 1}, alpha = 1 - confidence; None with one seed (no degree of freedom)."""
    t_power: float | None
    """t_{power, n - 1} (= t_{1 - beta, n - 1}); None with one seed."""
    mde: float | None
    """(t_confidence + t_power) * diff_sd / sqrt(seeds); None when the differences have no spread to scale
    by (one seed, or every seed changed alike: the paired t-test then says nothing)."""

    def resolves(self, low: float, high: float) -> bool:
        """Whether a held-out interval [low, high] lies strictly inside (-MDE, +MDE): a change as large as
        the MDE is then ruled out at the registered confidence ("absent at this power"), on any number of
        seeds: a true change of at least the MDE would lie outside the interval, which a level-c interval
        allows with probability at most 1 - c (module docstring)."""
        return self.mde is not None and -self.mde < low and high < self.mde


def minimum_detectable_change(
    read: str, differences: Sequence[float] | np.ndarray, confidence: float, power: float = POWER
) -> DetectableChange:
    """MDE = (t_{1 - alpha/2, n - 1} + t_{power, n - 1}) * s_d / sqrt(n) of a paired comparison over n seeds.

    ``differences``: final - initial of the read on each held-out seed, paired by seed; s_d is their
    standard deviation (ddof 1). The paired t-test's sample-size formula (Chow, Shao & Wang, *Sample Size
    Calculations in Clinical Research*, 2nd ed., 2008, Sec. 3.1) solved for the change, with t quantiles at
    n - 1 degrees of freedom, the small-sample form (module docstring).
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or d.size == 0:
        raise ValueError(f"{read}: need one paired difference per held-out seed, got shape {d.shape}")
    n = int(d.size)
    if n < 2:
        return DetectableChange(read, n, None, confidence, power, None, None, None)
    t_confidence = _t_quantile(1.0 - (1.0 - confidence) / 2.0, n - 1)  # t_{1 - alpha/2, n - 1}
    t_power = _t_quantile(power, n - 1)  # t_{1 - beta, n - 1}
    # every seed changed alike: no spread, exactly (np.std of equal values can round to about 1e-17)
    sd = float(np.std(d, ddof=1)) if np.ptp(d) > 0 else 0.0
    mde = (t_confidence + t_power) * sd / float(np.sqrt(n)) if sd > 0 else None
    return DetectableChange(read, n, sd, confidence, power, t_confidence, t_power, mde)
