"""The symmetric-log axis of the rule and spread figures labels the range its values reach."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from grpo_probe.analysis.page.figure_canvas import symlog_axis


@pytest.mark.parametrize(
    ("values", "far_tick"),
    [([-34.0, -0.2], -50.0), ([-50.0, 3.0], -50.0), ([12.0], 20.0), ([-120.0], -200.0), ([0.7], None)],
)
def test_every_value_lies_between_labelled_ticks(values: list[float], far_tick: float | None) -> None:
    fig, ax = plt.subplots()
    try:
        symlog_axis(ax, 0.5, values)
        ticks = list(ax.get_xticks())
        low, high = ax.get_xlim()
    finally:
        plt.close(fig)
    assert 0.0 in ticks and ticks == sorted(ticks)
    assert low <= min(ticks) and max(ticks) <= high  # every tick is on the axis
    if far_tick is not None:
        assert far_tick in ticks  # the 1-2-5 number at or past the farthest value on its side
        assert far_tick <= min(values) if far_tick < 0 else far_tick >= max(values)
