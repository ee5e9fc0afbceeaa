"""Coverage of the upper end of the pooled chaos share's interval over seeds: percentile against
bootstrap-t, where the chaos differs between seeds.

Run by hand (a few CPU-s; not in CI):

    .venv/bin/python benchmarks/pooled_share_interval_coverage.py [RUNS] [ALPHA]

Per simulated run, 15 seeds x K = 8 x m = 5 rewards, the choice spread equal in every seed and each seed's
chaos std drawn from a population (all alike, 0.5-8 cm, or the default's flow cell c3's 15 seeds): the
pooled one-way ANOVA share m C / (A + (m - 1) C) (A, C the mean over seeds of MS_b and MS_w, sigma_b^2
clipped at 0 as the registered read does) and its one-sided upper end at 1 - ALPHA (0.0025: the
default's 0.995 intervals), by B = 1000 resamples of the seeds, as
- the percentile bootstrap (Efron & Tibshirani, 1993, ch. 13.3): the 1 - ALPHA quantile of the
  resampled shares;
- the bootstrap-t (studentised; Efron & Tibshirani, 1993, ch. 12.5; Davison & Hinkley, 1997, Sec. 5.2.1):
  theta - q_ALPHA(t*) se, t* = (theta* - theta) / se*, se the delta-method standard error over seeds
  sqrt(sum_s g_s^2) / n of the influence g_s = dtheta/dA (a_s - A) + dtheta/dC (c_s - C).
It prints how often each passes `upper <= 0.5` at a true pooled share of 0.5 (a false pass; nominal
ALPHA) and of 0.35 (power).
"""

import sys

import numpy as np

n, K, m, B, runs = 15, 8, 5, 1000, int(sys.argv[1]) if len(sys.argv) > 1 else 400
alpha = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0025  # one-sided (0.995 interval)
rng = np.random.default_rng(5)


def sims(stds, share):
    sw2 = np.mean(stds**2)
    sb = np.sqrt(sw2 * (1 - share) / share)
    b = rng.standard_normal((runs, n, K, 1)) * sb
    pick = stds[rng.integers(0, stds.size, (runs, n))]  # each run's seeds drawn from the population
    e = rng.standard_normal((runs, n, K, m)) * pick[:, :, None, None]
    y = b + e
    dm = y.mean(-1)
    a = m * ((dm - dm.mean(-1, keepdims=True)) ** 2).sum(-1) / (K - 1)  # MS_b per seed
    c = ((y - dm[..., None]) ** 2).sum((-1, -2)) / (K * (m - 1))  # MS_w per seed
    return a, c


def share(A, C):
    sb2 = np.maximum(0.0, (A - C) / m)
    return C / (C + sb2)


def se(a, c, A, C):  # delta method over seeds, unclipped share m C / (A + (m-1) C)
    d = (A + (m - 1) * C) ** 2
    g = (-m * C / d)[..., None] * (a - A[..., None]) + (m * A / d)[..., None] * (c - C[..., None])
    return np.sqrt((g**2).sum(-1)) / a.shape[-1]


idx = np.random.default_rng(9).integers(0, n, (B, n))


def uppers(a, c):
    A, C = a.mean(-1), c.mean(-1)
    th = share(A, C)
    s = se(a, c, A, C)
    ab, cb = a[:, idx], c[:, idx]  # [runs, B, n]
    Ab, Cb = ab.mean(-1), cb.mean(-1)
    thb = share(Ab, Cb)
    sb = se(ab, cb, Ab, Cb)
    pct = np.quantile(thb, 1 - alpha, axis=-1)
    t = (thb - th[:, None]) / np.where(sb > 0, sb, np.nan)
    bt = th - np.nanquantile(t, alpha, axis=-1) * s
    return pct, bt


for label, stds in (
    ("seeds alike", np.full(n, 3.0)),
    ("chaos 0.5-8 cm", np.geomspace(0.5, 8, n)),
    (
        "default c3 seeds",
        np.array([4.12, 2.66, 2.01, 0.43, 4.98, 4.97, 1.27, 5.81, 3.51, 2.01, 6.05, 4.5, 2.48, 3.1, 4.63]),
    ),
):
    for true in (0.5, 0.35):
        a, c = sims(stds, true)
        pct, bt = uppers(a, c)
        print(
            f"{label:18s} share {true}: passes upper<=0.5  percentile {100 * np.mean(pct <= 0.5):5.1f} %  "
            f"bootstrap-t {100 * np.mean(bt <= 0.5):5.1f} %"
        )
