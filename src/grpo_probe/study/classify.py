"""Did the probe's go / no-go call agree with what the pilot found? The 2 x 2 table and its shares.

Why: the probe's practical output is a call per arm (go: GRPO should gain here; no: it should not), and
the pilot resolves, per arm, whether it gained. A rank correlation says whether the read orders the arms;
this says how often a call was right, in the two ways a lab cares about separately: when the probe said
go, how often the pilot gained (a go that wastes a training run is the costly error), and when it said
no, how often the pilot did not gain (a no that hides a gain is the other). With a study's few arms these
shares are rough, so each carries its Wilson score interval (Wilson 1927, "Probable inference, the law of
succession, and statistical inference", JASA 22), which stays inside [0, 1] and behaves at counts of 0 or
n where the normal (Wald) interval does not (Agresti & Coull 1998). Whether go arms gained more often
than no arms at all is Fisher's exact test on the 2 x 2 table (Fisher 1922; the one-sided p-value, the
hypergeometric probability of a table with at least as many go arms that gained, given the margins):
0 of 14 go arms against 3 of 14 no arms gained is p = 1, no evidence that go predicts a gain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import fisher_exact

from grpo_probe.analysis.error_rates.operating import wilson_interval

__all__ = ["Classification", "classification"]


@dataclass(frozen=True)
class Classification:
    """The probe's calls against the pilot's outcomes over arms, with Wilson intervals of the shares."""

    go_gained: int
    """The probe said go and the pilot gained."""
    go_not: int
    """The probe said go and the pilot did not gain."""
    no_gained: int
    """The probe said no and the pilot gained."""
    no_not: int
    """The probe said no and the pilot did not gain."""
    go_gained_share: float | None
    """P(gained | go) = go_gained / (go_gained + go_not); None with no go."""
    go_gained_ci_low: float | None
    go_gained_ci_high: float | None
    no_not_share: float | None
    """P(not gained | no) = no_not / (no_gained + no_not); None with no "no"."""
    no_not_ci_low: float | None
    no_not_ci_high: float | None
    accuracy: float | None
    """(go_gained + no_not) / arms; None with no arms."""
    accuracy_ci_low: float | None
    accuracy_ci_high: float | None
    confidence: float
    fisher_p: float | None = None
    """Fisher's exact test, one-sided: P(a table with at least ``go_gained`` go arms that gained | the
    margins), under no association between the call and the gain; None when a margin is empty."""


def _flags(name: str, values: Sequence[bool]) -> list[bool]:
    out = []
    for v in values:
        if not isinstance(v, (bool, np.bool_)):
            raise ValueError(f"{name} must hold booleans, got {v!r}")
        out.append(bool(v))
    return out


def _share(count: int, total: int, confidence: float) -> tuple[float | None, float | None, float | None]:
    """count / total with its Wilson score interval (Wilson 1927); three Nones when total is 0."""
    if total == 0:
        return None, None, None
    low, high = wilson_interval(count, total, confidence)
    return count / total, low, high


def classification(calls: Sequence[bool], gained: Sequence[bool], confidence: float) -> Classification:
    """Cross ``calls`` (the probe said go, per arm) with ``gained`` (the pilot resolved a gain, per arm)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    c, g = _flags("calls", calls), _flags("gained", gained)
    if len(c) != len(g):
        raise ValueError(f"calls and gained need one entry per arm, got {len(c)} and {len(g)}")
    go_gained = sum(1 for a, b in zip(c, g, strict=True) if a and b)
    go_not = sum(1 for a, b in zip(c, g, strict=True) if a and not b)
    no_gained = sum(1 for a, b in zip(c, g, strict=True) if not a and b)
    no_not = sum(1 for a, b in zip(c, g, strict=True) if not a and not b)
    go_share, go_low, go_high = _share(go_gained, go_gained + go_not, confidence)
    no_share, no_low, no_high = _share(no_not, no_gained + no_not, confidence)
    acc, acc_low, acc_high = _share(go_gained + no_not, len(c), confidence)
    return Classification(
        go_gained,
        go_not,
        no_gained,
        no_not,
        go_share,
        go_low,
        go_high,
        no_share,
        no_low,
        no_high,
        acc,
        acc_low,
        acc_high,
        confidence,
        _fisher_p(go_gained, go_not, no_gained, no_not),
    )


def _fisher_p(go_gained: int, go_not: int, no_gained: int, no_not: int) -> float | None:
    """One-sided Fisher's exact p-value that go arms gain more often than no arms (scipy's
    ``fisher_exact(..., alternative="greater")`` on [[go_gained, go_not], [no_gained, no_not]]); None when
    there is no go arm, no "no" arm, or no arm on one side of the gain (the test has nothing to compare)."""
    table = [[go_gained, go_not], [no_gained, no_not]]
    if 0 in (go_gained + go_not, no_gained + no_not, go_gained + no_gained, go_not + no_not):
        return None
    return float(fisher_exact(table, alternative="greater").pvalue)
