"""Too few seeds to resample: the page says so instead of counting a handful of distinct resamples.

Why: n seeds have C(2n - 1, n) distinct resamples, 3 for the smoke design's 2 seeds, so "holds in 200 of
200 resamples of the 2 seeds" reads as a firm result where it is three resamples counted many times.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from grpo_probe.analysis.page.report import build_decision
from grpo_probe.analysis.rule.stability import MIN_RESAMPLED_SEEDS, too_few_seeds

from . import versions_case
from .versions_case import versioned_design, write_tables


def _decision(tmp_path: Path, seeds: tuple[int, ...], monkeypatch: pytest.MonkeyPatch) -> tuple[dict, str]:
    """The versions case's decision on ``seeds`` (its tables and its design both on those seeds)."""
    monkeypatch.setattr(versions_case, "SEEDS", seeds)
    prereg = versioned_design()
    probes, anchors = write_tables(tmp_path / "tables", short_strike_seeds=seeds)
    out = tmp_path / "out"
    decision = build_decision(
        probes,
        anchors,
        prereg,
        out / "decision.md",
        out / "decision.json",
        out / "figures",
        [(str(p), "0" * 64) for p in (*probes.values(), *anchors.values())],
    )
    return decision, (out / "decision.md").read_text()


@pytest.mark.parametrize("n", range(MIN_RESAMPLED_SEEDS))
def test_below_the_minimum_the_reason_counts_the_distinct_resamples(n: int) -> None:
    reason = too_few_seeds(n)
    assert reason is not None and reason.startswith("too few seeds to resample")
    if n:
        assert f" {math.comb(2 * n - 1, n)} distinct resample" in reason


def test_from_the_minimum_on_the_seeds_are_resampled() -> None:
    assert too_few_seeds(MIN_RESAMPLED_SEEDS) is None and too_few_seeds(15) is None


def test_a_two_seed_decision_says_it_was_not_resampled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decision, md = _decision(tmp_path, (1000, 1001), monkeypatch)
    for version in decision["versions"]:
        assert version["stability"]["not_resampled"] == too_few_seeds(2)
        assert version["stability"]["same_outcome"] == 0 and version["stability"]["outcomes"] == []
    text = " ".join(md.split())
    assert "The outcome is not resampled: too few seeds to resample (2 seeds have 3 distinct" in text
    assert "resamples of the 2 seeds" not in text


def test_a_decision_on_the_minimum_number_of_seeds_is_resampled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeds = tuple(range(1000, 1000 + MIN_RESAMPLED_SEEDS))
    decision, md = _decision(tmp_path, seeds, monkeypatch)
    current = decision["versions"][-1]["stability"]
    assert current["not_resampled"] is None
    assert sum(o["count"] for o in current["outcomes"]) == current["resamples"]
    assert f"resamples of the {MIN_RESAMPLED_SEEDS} seeds" in " ".join(md.split())
