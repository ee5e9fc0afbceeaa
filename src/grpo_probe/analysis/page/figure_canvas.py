"""What every figure of the package shares: a pyplot-free canvas, PNG bytes that depend only on the
numbers drawn, the palette, and the symmetric-log axis.

Why: an auditor's rerun must give byte-identical artifacts, figures included. So no pyplot (global state),
matplotlib's default style whatever the user's matplotlibrc says, a fixed size and dpi, no randomness (seeds
are placed by rank, not jitter), and PNG metadata without the matplotlib version stamp
(``metadata={"Software": None}``, by :mod:`grpo_probe.png_io`). Files are written atomically.
decision.md's figures (:mod:`grpo_probe.analysis.page.summary_figures`,
:mod:`grpo_probe.analysis.page.cell_figures`) and the validation study's draw on it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from grpo_probe.atomic_io import atomic_write_bytes
from grpo_probe.png_io import png_bytes as encode_png

__all__ = [
    "ANCHOR",
    "BAR",
    "CHAOS",
    "DPI",
    "DRAWS",
    "SAMPLED",
    "BarLine",
    "finite",
    "new_figure",
    "png_bytes",
    "save_png",
    "symlog_axis",
    "symlog_note",
]

DPI = 150
"""Pixels per inch: a 6.4-inch figure is 960 pixels wide, readable on a laptop without zooming."""
SAMPLED = "tab:blue"
ANCHOR = "0.25"
CHAOS = "tab:red"
BAR = "tab:red"
DRAWS = "tab10"
"""Qualitative colours for the K draws of a trajectory figure: neighbours stay distinguishable."""


@dataclass(frozen=True)
class BarLine:
    """A threshold a figure draws as a dashed line: where it lies and its legend label.

    Why a value with its words: the figure does not know which threshold it draws (the registered signal
    bar, a cell's chaos floor); the page works that out from the rule and hands the figure both.
    """

    value_cm: float
    label: str


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes at :data:`DPI`, with no software/version metadata (the package's one
    encoder, :func:`grpo_probe.png_io.png_bytes`, which phase 2's and the boat's figures share)."""
    return encode_png(fig, DPI)


def save_png(fig: Figure, path: str | os.PathLike[str]) -> Path:
    """Write the figure's PNG bytes atomically to ``path``."""
    atomic_write_bytes(path, png_bytes(fig))
    return Path(path)


def new_figure(width: float, height: float) -> Figure:
    """A pyplot-free figure of a fixed size in inches, laid out by matplotlib's constrained layout."""
    return Figure(figsize=(width, height), layout="constrained")


def finite(values: Sequence[float | None]) -> list[float]:
    """The values that are numbers and finite, as floats (what an axis range is taken over)."""
    return [float(v) for v in values if v is not None and np.isfinite(v)]


def symlog_axis(ax: Axes, linthresh: float, values: Sequence[float], axis: str = "x") -> None:
    """A symmetric-log axis, linear within ``linthresh`` of 0, ticked at 0 and at powers of ten.

    Why: a 0.25 cm bar and a 50 cm spread (or a -0.5 cm tolerance and a -50 cm loss) must both be
    readable in one row; a linear axis puts the threshold on top of zero. The axis label says so with
    :func:`symlog_note`: it is not a log axis (zero and negative values are on it).
    """
    x = axis == "x"
    set_scale, set_ticks, set_lim = (
        (ax.set_xscale, ax.set_xticks, ax.set_xlim) if x else (ax.set_yscale, ax.set_yticks, ax.set_ylim)
    )
    set_scale("symlog", linthresh=linthresh, linscale=0.6)
    low, high = min([0.0, *values]), max([0.0, *values])
    pad = 0.3 * max(abs(low), abs(high), linthresh)
    left, right = low - (pad if low < 0 else 0.0), high + pad
    decades = range(math.floor(math.log10(1.5 * linthresh)) + 1, math.ceil(math.log10(max(right, -left))) + 1)
    # Powers of ten, and on each side the 1-2-5 number at or past the farthest value (the axis reaching
    # it), so that a value past the last power (a -34 or -50 cm loss beyond the -10 tick) still sits
    # between two labelled ticks.
    ticks = [0.0]
    for side, extreme in ((1.0, high), (-1.0, -low)):
        reach = right if side > 0 else -left
        ticks += [side * 10.0**k for k in decades if 10.0**k <= reach]
        if extreme > 1.5 * linthresh:
            end = _nice_ceiling(extreme)
            ticks.append(side * end)
            if side > 0:
                right = max(right, 1.1 * end)
            else:
                left = min(left, -1.1 * end)
    ticks = sorted(set(ticks))
    target = ax.xaxis if x else ax.yaxis
    set_ticks(sorted(ticks))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_locator(NullLocator())
    set_lim(left, right)


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2 and 5 times a power of ten that is at least ``value`` (> 0)."""
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value * (1 - 1e-12))


def symlog_note(linthresh: float) -> str:
    """How an axis label names a symmetric-log scale: ``symmetric log, linear within ±0.25``."""
    return f"symmetric log, linear within \u00b1{linthresh:g}"
