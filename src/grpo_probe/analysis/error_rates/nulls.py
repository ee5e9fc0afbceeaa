"""The null's points and the chaos the operating simulation draws: where a rule's go is a false go.

Why apart from :mod:`grpo_probe.analysis.error_rates.operating`: what a null *is* for a registered rule (the
boundary of each clause the simulation can model) and where its chaos comes from (a normal, or the run's
own residuals) are questions of their own, read by the simulation, by ``grpo-probe plan`` and by the
tests; the simulation itself only runs them.

- :func:`boundaries`: for each clause on the choice, the chaos or the chaos share, the levels at which
  the true value sits exactly at its threshold (the null's least favourable point; Lehmann & Romano,
  *Testing Statistical Hypotheses*, 2005, Sec. 3.4 and 8.1).
- :class:`ResidualPool`: a residual bootstrap of the one-way model (Davison & Hinkley, *Bootstrap Methods
  and their Application*, 1997, Sec. 3.8): chaos drawn per replayed seed from its within-draw residuals.
- :data:`SPREADS`: how a boundary point spreads its levels over the seeds. The registered reads pool the
  seeds, so the null's boundary is a set, not a point: the pooled share sits at its bar when every seed
  does (``share``), and also when the choice spread is equal in every seed while the chaos differs
  between seeds as the run's does (``seeds``: normal chaos at each replayed seed's own scale,
  ``seeds_data``: each seed's own residuals, ``draws_data``: residuals pooled over the seeds, drawn per
  draw). The operating simulation searches them and checks the target at the worst.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from grpo_probe.analysis.cells.variance_components import COMPONENT_READS
from grpo_probe.prereg import Cell
from grpo_probe.prereg.rule import Condition, DecisionRule

__all__ = [
    "SIMULATED_READS",
    "SPREADS",
    "Levels",
    "ResidualPool",
    "boundaries",
    "share_boundary",
    "simulated",
]

SIMULATED_READS: frozenset[str] = frozenset(
    {
        "median_group_std_progress_cm",
        "nondegenerate_fraction",
        *COMPONENT_READS,
        "median_choice_std_cm",
        "replay_std_cm",
        "chaos_fraction",
    }
)
"""Reads computed from the rewards alone, which the simulation recomputes in every simulated run."""

SPREADS: tuple[str, ...] = ("share", "seeds", "seeds_data", "draws_data")
"""How a boundary point's chaos is drawn over the seeds (:meth:`ResidualPool.draw_spread`)."""

_SHARE_READS = frozenset({"chaos_share", "chaos_fraction"})
"""Reads whose true value is sigma_w^2 / (sigma_w^2 + sigma_b^2)."""
_CHOICE_READS = frozenset({"choice_std_cm", "median_choice_std_cm"})
"""Reads whose true value is sigma_b."""
_CHAOS_READS = frozenset({"chaos_std_cm", "replay_std_cm"})
"""Reads whose true value is sigma_w."""


@dataclass(frozen=True)
class Levels:
    """The choice and chaos std (cm) a scenario simulates."""

    choice_std_cm: float
    chaos_std_cm: float

    def to_dict(self) -> dict[str, float]:
        return {"choice_std_cm": self.choice_std_cm, "chaos_std_cm": self.chaos_std_cm}


@dataclass(frozen=True)
class ResidualPool:
    """A cell's within-draw residuals, per replayed seed: the chaos the data-resampled scenarios draw.

    Per replayed seed s, draw j and observation r: e_sjr = (y_sjr - ybar_sj) sqrt(m / (m - 1)), so that
    E[e^2] = sigma_w^2 under the one-way model (the residuals of a draw's m rewards have variance
    sigma_w^2 (m - 1) / m). ``chaos_var`` is the pooled MS_w, the sigma_w^2 the pool carries.
    """

    residuals: NDArray[np.float64]
    """[S, K x m]: each replayed seed's residuals, flattened."""
    seed_var: NDArray[np.float64]
    """[S]: each replayed seed's own MS_w."""
    chaos_var: float

    @classmethod
    def of(cls, rewards: NDArray[np.float64] | None) -> ResidualPool | None:
        """From a cell's [n, K, m] rewards (NaN rows: seeds without replays); None without any."""
        if rewards is None:
            return None
        y = rewards[np.isfinite(rewards).all(axis=(1, 2))]
        if y.shape[0] == 0 or y.shape[2] < 2:
            return None
        m = y.shape[2]
        e = (y - y.mean(axis=2, keepdims=True)) * np.sqrt(m / (m - 1))
        seed_var = (e**2).mean(axis=(1, 2))
        chaos_var = float(seed_var.mean())
        if not chaos_var > 0.0:
            return None
        return cls(e.reshape(e.shape[0], -1), seed_var, chaos_var)

    def draw(
        self, levels: Levels, rng: np.random.Generator, runs: int, n: int, k: int, m: int
    ) -> NDArray[np.float64]:
        """[runs, n, k, m] rewards at ``levels``: each simulated seed picks a replayed seed of the run,
        draws its chaos from that seed's residuals (scaled to sigma_w = ``levels.chaos_std_cm`` over the
        pool) and its draws' choices from N(0, sigma_b^2) scaled alike, so every seed keeps the
        scenario's share while the seeds keep the run's spread of chaos levels."""
        scale = levels.chaos_std_cm / np.sqrt(self.chaos_var)
        which = rng.integers(0, self.residuals.shape[0], size=(runs, n))
        picks = rng.integers(0, self.residuals.shape[1], size=(runs, n, k, m))
        chaos = self.residuals[which[..., None, None], picks] * scale
        seed_scale = np.sqrt(self.seed_var[which] / self.chaos_var)[..., None, None]
        choice = rng.standard_normal((runs, n, k, 1)) * levels.choice_std_cm * seed_scale
        return choice + chaos

    def draw_spread(
        self, spread: str, levels: Levels, rng: np.random.Generator, runs: int, n: int, k: int, m: int
    ) -> NDArray[np.float64]:
        """[runs, n, k, m] rewards at ``levels`` with the choice spread equal in every seed, b ~ N(0,
        sigma_b^2), and the chaos differing between seeds as the run's does, scaled so that the pool's
        sigma_w^2 (the mean over seeds of a seed's chaos variance, what the pooled MS_w estimates) is
        ``levels.chaos_std_cm``^2: the pooled chaos share sigma_w^2 / (sigma_w^2 + sigma_b^2) is then the
        boundary's while a seed with more chaos than the pool sits above it and one with less below.

        ``spread``: ``share`` is :meth:`draw` (every seed at the share); ``seeds``: normal chaos, each
        simulated seed at the scale of a replayed seed of the run drawn at random, sigma_w
        sqrt(v_s / v); ``seeds_data``: each simulated seed's chaos resampled from one replayed seed's
        residuals; ``draws_data``: each simulated draw's m residuals from a replayed seed drawn per draw
        (the seeds' chaos mixed, so the simulated seeds differ less than the run's)."""
        if spread == "share":
            return self.draw(levels, rng, runs, n, k, m)
        scale = levels.chaos_std_cm / np.sqrt(self.chaos_var)
        seeds = self.residuals.shape[0]
        if spread == "seeds":
            which = rng.integers(0, seeds, size=(runs, n))
            sd = np.sqrt(self.seed_var[which])[..., None, None] * scale
            chaos = rng.standard_normal((runs, n, k, m)) * sd
        elif spread == "seeds_data":
            which = rng.integers(0, seeds, size=(runs, n))
            picks = rng.integers(0, self.residuals.shape[1], size=(runs, n, k, m))
            chaos = self.residuals[which[..., None, None], picks] * scale
        elif spread == "draws_data":
            which = rng.integers(0, seeds, size=(runs, n, k))
            picks = rng.integers(0, self.residuals.shape[1], size=(runs, n, k, m))
            chaos = self.residuals[which[..., None], picks] * scale
        else:
            raise ValueError(f"unknown spread {spread!r}: one of {', '.join(SPREADS)}")
        return rng.standard_normal((runs, n, k, 1)) * levels.choice_std_cm + chaos


def boundaries(rule: DecisionRule, cell: Cell, measured: Levels) -> list[Levels]:
    """The null's boundary points for ``cell``: for each condition of its head's criteria that the
    simulation models and that bounds the choice, the chaos or the chaos share, the levels at which
    the true value sits exactly at the condition's threshold, the other level kept as measured (the
    module docstring). Empty where no such condition exists."""
    total = measured.choice_std_cm**2 + measured.chaos_std_cm**2
    found: list[Levels] = []
    for condition in rule.conditions_for(cell.head):
        if not simulated(condition):
            continue
        name, relative, threshold = condition.ref.name, condition.threshold_read, condition.threshold
        if relative is not None and name in _CHOICE_READS and relative.name in _CHAOS_READS:
            found.append(Levels(condition.scale * measured.chaos_std_cm, measured.chaos_std_cm))
        elif threshold is None:
            continue
        elif (point := _share_point(condition, total)) is not None:
            found.append(point)
        elif name in _CHOICE_READS and condition.op in (">=", ">") and threshold > 0.0:
            found.append(Levels(threshold, measured.chaos_std_cm))
        elif name in _CHAOS_READS and condition.op in ("<=", "<") and threshold > 0.0:
            found.append(Levels(measured.choice_std_cm, threshold))
    return list(dict.fromkeys(found))


def share_boundary(rule: DecisionRule, cell: Cell, total_std_cm: float) -> Levels | None:
    """The levels, with total spread ``total_std_cm``, at which ``cell``'s true chaos share sits at the
    loosest bar of its head's share clauses (the others hold inside it); None where it has none."""
    points = [
        point
        for condition in rule.conditions_for(cell.head)
        if simulated(condition) and (point := _share_point(condition, total_std_cm**2)) is not None
    ]
    return max(points, key=lambda p: p.chaos_std_cm, default=None)


def _share_point(condition: Condition, total: float) -> Levels | None:
    """Where a share clause's true share sits at its bar t, with total variance ``total``: sigma_b^2 =
    (1 - t) total, sigma_w^2 = t total; None for any other clause."""
    t = condition.threshold
    if (
        condition.ref.name not in _SHARE_READS
        or condition.op not in ("<=", "<")
        or t is None
        or not 0.0 < t < 1.0
    ):
        return None
    return Levels(float(np.sqrt((1.0 - t) * total)), float(np.sqrt(t * total)))


def simulated(condition: Condition) -> bool:
    """Whether every read the condition compares is one the simulation recomputes."""
    return all(name in SIMULATED_READS for name in condition.read_names)
