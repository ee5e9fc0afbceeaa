"""probe_vs_gain.png: each arm's predictor against its pilot gain, and the same arms as ranks.

Why two panels: the left one shows the numbers a lab reads (the read in cm on a symmetric-log axis, since
the subject scenes' reads span three decades and several sit at zero; the gain with its interval), the
right one shows what Spearman's rho compares, the counted arms' ranks, where an ordering or its absence is
seen at a glance. Subjects are coloured by design, so an ordering that is only between scenes shows as
clusters; arms left out of the correlation (not engaging, or not moved by the pilot) are drawn hollow.
Controls keep their own markers and are labelled; subjects are labelled only while few enough to read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy.stats import rankdata

from grpo_probe.analysis.page.figure_canvas import png_bytes, symlog_axis, symlog_note
from grpo_probe.study.design import Study
from grpo_probe.study.inference import StudyInference, counted
from grpo_probe.study.rows import ArmRow

__all__ = ["LABEL_GAP_PT", "label_offsets", "study_figure"]

LABEL_GAP_PT = 9.0
"""Least vertical distance, in points, between two arm labels of one column (7 pt text, one line)."""

_MAX_SUBJECT_LABELS = 12
"""More subject arms than this are identified by colour and the per-arm table, not by labels."""

_CONTROL_MARKERS = {"positive_control": ("^", "0.15"), "negative_control": ("v", "0.55")}
"""Controls in greys, so that no control shares a colour with a subject design (the tab10 cycle)."""
_CONTROL_TEXT = {"positive_control": "positive control", "negative_control": "negative control"}
_DESIGN_MARKERS = ("o", "s", "D", "P", "X", "h", "*", "p")


def label_offsets(points_pt: Sequence[tuple[float, float]], column_pt: float) -> list[float]:
    """Vertical offsets (points) that keep arm labels at least :data:`LABEL_GAP_PT` apart.

    Why: arms often share a read (several sit at a choice std of 0), and labels drawn at their points
    then print over each other. Points whose x lie within ``column_pt`` of each other form a column;
    each column's labels are stacked upwards in the order of their points, each as close to its point
    as the gap allows, then the stack is shifted down by half its mean displacement so that it stays
    centred on its points. Returns, per point (in the order given), its label's offset from the point.
    """
    order = sorted(range(len(points_pt)), key=lambda i: (points_pt[i][0], points_pt[i][1]))
    columns: list[list[int]] = []
    for i in order:
        if columns and abs(points_pt[i][0] - points_pt[columns[-1][0]][0]) <= column_pt:
            columns[-1].append(i)
        else:
            columns.append([i])
    offsets = [0.0] * len(points_pt)
    for column in columns:
        column.sort(key=lambda i: points_pt[i][1])
        placed: list[float] = []
        for i in column:
            y = points_pt[i][1]
            placed.append(y if not placed else max(y, placed[-1] + LABEL_GAP_PT))
        shift = float(np.mean([p - points_pt[i][1] for p, i in zip(placed, column, strict=True)])) / 2.0
        for p, i in zip(placed, column, strict=True):
            offsets[i] = p - shift - points_pt[i][1]
    return offsets


def _label(ax: Axes, fig: Figure, labelled: Sequence[tuple[float, float, str]]) -> None:
    fig.canvas.draw()  # fixes the limits and the layout, so that label spacing is measured in points
    points_pt = [tuple(ax.transData.transform((xi, yi)) * 72.0 / fig.dpi) for xi, yi, _ in labelled]
    offsets = label_offsets(points_pt, column_pt=4.0 * LABEL_GAP_PT)
    ends = [float(ax.transData.transform((x, 0.0))[0]) for x in ax.get_xlim()]
    middle = (ends[0] + ends[1]) / 2.0
    for (xi, yi, text), dy in zip(labelled, offsets, strict=True):
        moved = abs(dy) > 2.0  # a label pushed off its point is tied to it by a thin line
        px = float(ax.transData.transform((xi, yi))[0])
        side = 1.0 if px <= middle else -1.0  # labels point inwards, so none runs off
        label = ax.annotate(
            text,
            (xi, yi),
            textcoords="offset points",
            xytext=(side * (14.0 if moved else 6.0), dy),
            fontsize=7,
            ha="left" if side > 0 else "right",
            va="center",
            arrowprops={"arrowstyle": "-", "color": "0.5", "linewidth": 0.5} if moved else None,
        )
        label.set_in_layout(False)  # the layout was fixed above; a label may not move the axes


def _values_panel(
    ax: Axes, study: Study, rows: Sequence[ArmRow], kept: set[int]
) -> list[tuple[float, float, str]]:
    designs = list(dict.fromkeys(r.design for r in rows if r.role == "subject"))
    colours = {d: f"C{i % 10}" for i, d in enumerate(designs)}
    markers = {d: _DESIGN_MARKERS[i % len(_DESIGN_MARKERS)] for i, d in enumerate(designs)}
    labelled: list[tuple[float, float, str]] = []
    subjects = [r for r in rows if r.role == "subject"]
    label_subjects = len(subjects) <= _MAX_SUBJECT_LABELS
    groups: list[tuple[str, list[ArmRow], str, str]] = [
        (d, [r for r in subjects if r.design == d], markers[d], colours[d]) for d in designs
    ]
    groups += [
        (_CONTROL_TEXT[role], [r for r in rows if r.role == role], *_CONTROL_MARKERS[role])
        for role in ("positive_control", "negative_control")
    ]
    values: list[float] = []
    for name, group, marker, colour in groups:
        group = [r for r in group if r.reads[study.predictor] is not None]
        if not group:
            continue
        x = np.asarray([float(r.reads[study.predictor]) for r in group])  # type: ignore[arg-type]
        y = np.asarray([r.gain for r in group])
        values += x.tolist()
        err = np.vstack([y - [r.gain_ci_low for r in group], [r.gain_ci_high for r in group] - y])
        filled = np.asarray([id(r) in kept for r in group])
        legend = f"{name} (n = {len(group)})"
        for mask, face in ((filled, colour), (~filled, "none")):
            if not mask.any():
                continue
            ax.errorbar(
                x[mask],
                y[mask],
                yerr=err[:, mask],
                fmt=marker,
                color=colour,
                markerfacecolor=face,
                capsize=2,
                elinewidth=0.8,
                markersize=5,
                label=legend,
            )
            legend = None
        if group[0].role != "subject" or label_subjects:
            labelled += [
                (float(xi), float(yi), f"{r.design}/{r.arm}") for r, xi, yi in zip(group, x, y, strict=True)
            ]
    linthresh = _linthresh(values)
    symlog_axis(ax, linthresh, values)
    ax.axhline(0.0, color="0.4", linewidth=0.8)
    ax.set_xlabel(f"probe read: {study.predictor} ({symlog_note(linthresh)})", fontsize="small")
    ax.set_ylabel(f"pilot gain in {study.gain} [{study.confidence:.0%} CI]", fontsize="small")
    ax.legend(fontsize="x-small", loc="best")
    return labelled


def _linthresh(values: Sequence[float]) -> float:
    """The symmetric-log axis' linear range: a tenth of the largest read, rounded down to a power of ten
    (the label then reads "linear within +-1", not +-2.71619), at least 0.01."""
    top = max([abs(v) for v in values], default=1.0)
    return max(0.01, 10.0 ** math.floor(math.log10(max(0.1 * top, 1e-12))))


def _ranks_panel(ax: Axes, study: Study, arms: Sequence[ArmRow], inference: StudyInference) -> None:
    ranked = [r for r in arms if r.reads[study.predictor] is not None]
    primary = inference.primary
    if len(ranked) >= 2:
        x = rankdata([float(r.reads[study.predictor]) for r in ranked])  # type: ignore[arg-type]
        y = rankdata([r.gain for r in ranked])
        designs = list(dict.fromkeys(r.design for r in ranked))
        for i, d in enumerate(designs):
            mask = np.asarray([r.design == d for r in ranked])
            ax.scatter(x[mask], y[mask], s=22, color=f"C{i % 10}", marker=_DESIGN_MARKERS[i % 8], label=d)
        n = len(ranked)
        ax.plot([1, n], [1, n], color="0.6", linewidth=0.8, linestyle="--")
        ax.set_xlim(0, n + 1)
        ax.set_ylim(0, n + 1)
    rho = "n/a" if primary.rho is None else f"{primary.rho:+.2f}"
    interval = "" if primary.ci_low is None else f" [{primary.ci_low:+.2f}, {primary.ci_high:+.2f}]"
    pooled = "pooled (secondary) " if study.answer == "within_designs" else ""
    ax.set_title(f"counted subject arms as ranks: {pooled}rho {rho}{interval}", fontsize="small")
    ax.set_xlabel(f"rank of {study.predictor}", fontsize="small")
    ax.set_ylabel("rank of the pilot gain", fontsize="small")


def study_figure(study: Study, rows: Sequence[ArmRow], inference: StudyInference) -> bytes:
    """The PNG: values with intervals (left), the counted subject arms' ranks (right)."""
    fig = Figure(figsize=(11.0, 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2, width_ratios=[1.4, 1.0])
    arms = counted(rows)
    labelled = _values_panel(left, study, rows, {id(r) for r in arms})
    rho = "n/a" if inference.primary.rho is None else f"{inference.primary.rho:+.2f}"
    summary = f"rho {rho}"
    within = inference.within
    if within is not None:  # the registered answer is within designs: name it first, the pooled rho after
        mean = "n/a" if within.test.mean is None else f"{within.test.mean:+.2f}"
        summary = f"within designs {within.verdict or 'not answered'}, mean rho {mean}; pooled rho {rho}"
    left.set_title(
        f"Probe read against pilot gain ({summary} over {inference.counted} counted subject arms; "
        "hollow: not counted)",
        fontsize="small",
    )
    _ranks_panel(right, study, arms, inference)
    _label(left, fig, labelled)
    return png_bytes(fig)
