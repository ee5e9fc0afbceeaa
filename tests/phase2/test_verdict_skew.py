"""The held-out verdict's false calls at a true zero mean change, for skewed and jump differences.

The verdict (:func:`grpo_probe.phase2.evaluate.paired_interval`: "up" or "down" only where both the paired
t and the bootstrap-t intervals exclude zero) is simulated over 4000 pilots per case, each of n paired
differences with mean exactly zero, drawn from a keyed generator (the counts are the same on every run).
The check a rate must pass (it "holds" its nominal rate): no more than 3 binomial standard errors,
sqrt(p (1 - p) / 4000), above its nominal value p, for the two-sided rate (1 - c = 5 %) and for each
side (2.5 %); a rate below nominal is a conservative verdict, not an error.

What it asserts, and why not more: the verdict holds every rate for normal and Student t (3 df)
differences at 10 and 30 seeds, and for exponential ones at 30 seeds, where the old paired t verdict fails
(6 % "down" against 2.5 %); at 10 seeds it holds the exponential two-sided rate, which the t verdict fails
(10 %), though not its "down" side; at 3 seeds it makes no call at all ("not decidable"). It does not hold
lognormal or rare-jump differences: no test on n seeds can against a jump none of them drew (Bahadur &
Savage, Ann. Math. Stat. 27, 1956); the tests pin that it errs there no more than the old verdict did, so
a regression or an improvement both show.

``python tests/phase2/test_verdict_skew.py`` prints the table docs/phase2.md quotes (every distribution,
3, 10 and 30 seeds; the verdict beside the paired t, the bootstrap-t alone, the sign-flip permutation test
and Hall's skew-corrected t, up/down rates).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy.stats import t as student_t

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.phase2.evaluate import PairedChange, paired_bootstrap_t_intervals, paired_intervals

CONFIDENCE = 0.95
SIMULATIONS = 4000
KEY = 20261207
NOMINAL = 1.0 - CONFIDENCE

Draw = Callable[[np.random.Generator, tuple[int, int]], np.ndarray]
DISTRIBUTIONS: dict[str, Draw] = {
    "normal": lambda rng, shape: rng.standard_normal(shape),
    "t3": lambda rng, shape: rng.standard_t(3, shape),
    "exponential": lambda rng, shape: rng.exponential(1.0, shape) - 1.0,  # skewness 2
    "lognormal": lambda rng, shape: rng.lognormal(0.0, 1.0, shape) - math.exp(0.5),  # skewness 6.2
    # a rare jump: normal noise, plus 10 SDs with probability 0.05, centred (mean -0.5 without the jump)
    "jump": lambda rng, shape: rng.standard_normal(shape) + 10.0 * ((rng.random(shape) < 0.05) - 0.05),
}
"""Paired differences with true mean 0."""


def _draw(name: str, n: int) -> np.ndarray:
    return DISTRIBUTIONS[name](numpy_generator(KEY, tag("verdict-skew"), tag(name), n), (SIMULATIONS, n))


def _verdict_calls(d: np.ndarray) -> tuple[int, int, int]:
    """(up, down, undecidable) over the simulated pilots, each read through ``PairedChange.verdict``."""
    lows, highs = paired_intervals(d, CONFIDENCE)
    up = down = undecidable = 0
    for row, low, high in zip(d, lows, highs, strict=True):
        change = PairedChange("progress_final_cm", "progress (cm)", 0.0, 0.0, float(row.mean()), low, high, 0)
        up += change.verdict == "up"
        down += change.verdict == "down"
        undecidable += not change.decidable
    return up, down, undecidable


def _t_calls(d: np.ndarray) -> tuple[int, int]:
    """(up, down) of the old verdict: the paired t interval alone."""
    n = d.shape[1]
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    q = float(student_t.ppf((1.0 + CONFIDENCE) / 2.0, n - 1))
    return int((t > q).sum()), int((t < -q).sum())


def _within(count: int, p: float) -> bool:
    """``count`` of the pilots is no more than 3 binomial standard errors above rate ``p``."""
    return count / SIMULATIONS <= p + 3.0 * math.sqrt(p * (1.0 - p) / SIMULATIONS)


def _holds(up: int, down: int) -> bool:
    """Each side within its 2.5 % and both together within 5 %, to Monte-Carlo error."""
    return _within(up, NOMINAL / 2) and _within(down, NOMINAL / 2) and _within(up + down, NOMINAL)


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_at_three_seeds_the_verdict_makes_no_call(name: str) -> None:
    """3 seeds: a ninth of the bootstrap-t's resamples repeat one seed, so its interval is unbounded and no
    pilot is called, whatever the shape; the t verdict it replaced erred on skewed and jump differences."""
    d = _draw(name, 3)
    assert _verdict_calls(d) == (0, 0, SIMULATIONS)
    if name in ("exponential", "lognormal", "jump"):
        assert not _holds(*_t_calls(d))


@pytest.mark.parametrize("n", [10, 30])
def test_normal_differences_hold_every_rate(n: int) -> None:
    """Normal: every rate held; at 30 seeds the two-sided rate is also no more than 3 standard errors below
    5 % (the hull costs little there; at 10 seeds it is conservative, about 3.5 %)."""
    up, down, undecidable = _verdict_calls(_draw("normal", n))
    assert undecidable == 0
    assert _holds(up, down), f"n={n}: up {up}, down {down} of {SIMULATIONS}"
    if n == 30:
        assert (up + down) / SIMULATIONS >= NOMINAL - 3.0 * math.sqrt(NOMINAL * (1 - NOMINAL) / SIMULATIONS)


@pytest.mark.parametrize("n", [10, 30])
def test_symmetric_heavy_tails_hold_every_rate(n: int) -> None:
    """Student t, 3 df: the bootstrap-t alone errs above nominal here; the verdict, which also needs the
    t interval (conservative under symmetric heavy tails), must not."""
    d = _draw("t3", n)
    assert _holds(*_verdict_calls(d)[:2])
    boot_low, boot_high = paired_bootstrap_t_intervals(d, CONFIDENCE)
    assert not _holds(int((boot_low > 0).sum()), int((boot_high < 0).sum()))  # the reason for the hull


def test_exponential_differences_hold_every_rate_at_30_seeds_where_the_t_verdict_fails() -> None:
    d = _draw("exponential", 30)
    assert _holds(*_verdict_calls(d)[:2])
    assert not _holds(*_t_calls(d))


def test_exponential_differences_hold_the_two_sided_rate_at_10_seeds_where_the_t_verdict_fails() -> None:
    d = _draw("exponential", 10)
    up, down, _ = _verdict_calls(d)
    t_up, t_down = _t_calls(d)
    assert _within(up + down, NOMINAL) and not _within(t_up + t_down, NOMINAL)
    assert not _within(down, NOMINAL / 2)  # the "down" side is not held at 10 seeds (docs/phase2.md)


@pytest.mark.parametrize("n", [10, 30])
@pytest.mark.parametrize("name", ["lognormal", "jump"])
def test_heavy_skew_and_jumps_are_not_held_and_err_no_more_than_the_t_verdict(name: str, n: int) -> None:
    """Lognormal or rare-jump differences at a true zero: the false calls are "down" (the samples that
    missed the long tail). The verdict errs there above its nominal rate, a limit of every test on n seeds
    that docs/phase2.md states, but no more often than the old t verdict on either side."""
    d = _draw(name, n)
    up, down, _ = _verdict_calls(d)
    t_up, t_down = _t_calls(d)
    assert up <= t_up and down <= t_down
    assert not _holds(up, down) and not _holds(t_up, t_down)


def test_an_undecidable_interval_is_worded_and_recorded_as_such() -> None:
    """3 seeds: the stage reads "not shown: not decidable at 3 seeds", and phase2.json holds null ends."""
    from grpo_probe.phase2.evaluate import minimum_detectable_change, paired_interval
    from grpo_probe.phase2.report import _change_record, stage_verdict

    d = np.array([0.4, 0.1, 0.3])
    low, high = paired_interval(d, CONFIDENCE)
    change = PairedChange("progress_final_cm", "progress (cm)", 1.0, 1.3, float(d.mean()), low, high, 3)
    detectable = minimum_detectable_change("progress_final_cm", d, CONFIDENCE)
    verdict, sentence, detectability = stage_verdict(change, True, detectable)
    assert (verdict, detectability) == ("not shown", "not decidable at 3 seeds")
    assert sentence.startswith("not decidable at 3 seeds at 95% confidence") and "unbounded" in sentence
    assert (_change_record(change)["ci_low"], _change_record(change)["ci_high"]) == (None, None)


def _flip_calls(d: np.ndarray, rng: np.random.Generator) -> tuple[int, int]:
    """The sign-flip permutation test of the mean: every sign vector up to 14 seeds, else 2000 keyed."""
    n = d.shape[1]
    if n <= 14:
        signs = np.array(list(itertools.product([1.0, -1.0], repeat=n)))
    else:
        signs = np.vstack([np.ones(n), np.where(rng.random((1999, n)) < 0.5, 1.0, -1.0)])
    sums, observed = d @ signs.T, d.sum(axis=1, keepdims=True)
    tol = 1e-12 * np.abs(d).sum(axis=1, keepdims=True)
    p_up, p_down = (sums >= observed - tol).mean(axis=1), (sums <= observed + tol).mean(axis=1)
    return int((p_up <= NOMINAL / 2).sum()), int((p_down <= NOMINAL / 2).sum())


def _hall_calls(d: np.ndarray) -> tuple[int, int]:
    """Hall's (JRSS B 54, 1992) skew-corrected t: sqrt(n) (T + g T^2 / 3 + g^2 T^3 / 27 + g / (6 n)),
    T = mean / s, g = m3 / s^3, against t_{1 - alpha/2, n - 1}."""
    n = d.shape[1]
    mean, s = d.mean(axis=1), d.std(axis=1, ddof=1)
    g = ((d - mean[:, None]) ** 3).mean(axis=1) / s**3
    t = mean / s
    stat = math.sqrt(n) * (t + g * t**2 / 3 + g**2 * t**3 / 27 + g / (6 * n))
    q = float(student_t.ppf((1.0 + CONFIDENCE) / 2.0, n - 1))
    return int((stat > q).sum()), int((stat < -q).sum())


def main() -> None:
    """Print docs/phase2.md's table: up / down false calls (%) at a true zero mean, 4000 pilots a row."""
    print(
        "| differences | seeds | verdict (t and bootstrap-t) | paired t (before) | bootstrap-t alone | "
        "sign-flip | Hall's t |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in DISTRIBUTIONS:
        for n in (3, 10, 30):
            d = _draw(name, n)
            up, down, _ = _verdict_calls(d)
            low, high = paired_bootstrap_t_intervals(d, CONFIDENCE)
            rng = numpy_generator(KEY, tag("verdict-skew-flip"), tag(name), n)
            cells = [
                (up, down),
                _t_calls(d),
                (int((low > 0).sum()), int((high < 0).sum())),
                _flip_calls(d, rng),
                _hall_calls(d),
            ]
            text = " | ".join(f"{100 * u / SIMULATIONS:.1f} / {100 * w / SIMULATIONS:.1f}" for u, w in cells)
            print(f"| {name} | {n} | {text} |")


if __name__ == "__main__":
    main()
