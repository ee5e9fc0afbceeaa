"""decision.md's figures of every cell at once, embedded next to its outcome.

Each cell's group spread against the rule's signal bar (with the chaos floor where the design replays draws),
its sampled-minus-anchor progress against the competence tolerance, and each clause of the registered
rule across the cells. They draw the numbers decision.json holds (:class:`SpreadRow`,
:class:`CompetenceRow`, :class:`ClausePanel`), so the picture and the page cannot disagree. The
per-cell figures linked below the fold are :mod:`grpo_probe.analysis.page.cell_figures`.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.lines
import matplotlib.style
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from grpo_probe.analysis.page.figure_canvas import (
    ANCHOR,
    BAR,
    CHAOS,
    SAMPLED,
    BarLine,
    finite,
    new_figure,
    save_png,
    symlog_axis,
    symlog_note,
)

__all__ = [
    "ClausePanel",
    "ClauseRow",
    "CompetenceRow",
    "Interval",
    "SpreadRow",
    "plot_competence_by_cell",
    "plot_rule_clauses",
    "plot_spread_by_cell",
]


@dataclass(frozen=True)
class Interval:
    """An estimate over seeds with its bootstrap interval, as decision.json holds it (None: undefined)."""

    value: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class SpreadRow:
    """One cell's row of the spread figure: each seed's group std, their median, and, for a design that
    replays draws, each replayed seed's chaos std (the chaos floor) and the pooled choice std."""

    cell: str
    group_std_cm: tuple[float, ...]
    median: Interval
    replay_std_cm: tuple[float, ...] = ()
    choice: Interval | None = None
    bar: BarLine | None = None
    """The cell's own signal bar, for a rule whose bar differs from cell to cell (the cell's chaos floor),
    drawn on this row only; None where the rule's bar is one line for every cell, or the cell has none."""


@dataclass(frozen=True)
class CompetenceRow:
    """One cell's row of the competence figure: each seed's sampled mean minus its anchor, and the mean."""

    cell: str
    delta_cm: tuple[float, ...]
    mean: Interval


@dataclass(frozen=True)
class ClauseRow:
    """One cell in one clause of the rule: the read's estimate with its interval, the value the clause
    compares (an end of that interval, or the estimate), its threshold for this cell, and the verdict."""

    cell: str
    estimate: Interval
    compared: float | None
    threshold: float
    passed: bool
    needed: bool
    """Whether the cell's head needs this clause's criterion: a clause a cell need not pass is drawn
    hollow, so it does not read as deciding."""

    @classmethod
    def of(cls, cell: str, estimate: Interval, verdict: Mapping[str, Any], needed: bool) -> ClauseRow:
        """The row from the cell's recorded result of the clause (decision.json's verdict condition)."""
        return cls(cell, estimate, verdict["value"], verdict["threshold"], verdict["passed"], needed)


@dataclass(frozen=True)
class ClausePanel:
    """One clause of the registered rule (``choice_std_cm.lower >= 0.25``) across the cells."""

    title: str
    unit: str
    op: str
    rows: tuple[ClauseRow, ...]


def _seed_points(ax: Axes, values: Sequence[float], y: float, label: str | None) -> None:
    """One value per seed as hollow sampled-colour circles on the row at ``y``: the per-seed layer under
    each summary row's interval."""
    ax.scatter(
        values,
        np.full(len(values), y),
        s=16,
        facecolors="none",
        edgecolors=SAMPLED,
        linewidths=0.8,
        zorder=3,
        label=label,
    )


def _cell_rows_png(
    fig: Figure, ax: Axes, cells: Sequence[str], xlabel: str, title: str, path: str | os.PathLike[str]
) -> Path:
    """Finish a one-row-per-cell figure (cells top down in registered order, a light x grid, the legend
    below) and write it: the frame the spread and competence figures share."""
    ax.set_yticks(np.arange(len(cells)), list(cells), fontsize="small")
    ax.set_ylim(len(cells) - 0.5, -0.5)
    ax.set_xlabel(xlabel, fontsize="small")
    ax.set_title(title, fontsize="medium")
    ax.grid(axis="x", color="0.9", linewidth=0.6)
    fig.legend(loc="outside lower center", ncols=2, fontsize="x-small", frameon=False)
    return save_png(fig, path)


def _interval_row(
    ax: Axes, y: float, est: Interval | None, color: str, marker: str, label: str | None
) -> None:
    if est is None or est.value is None:
        return
    err = None
    if est.low is not None and est.high is not None:
        err = [[est.value - est.low], [est.high - est.value]]
    ax.errorbar(
        [est.value], [y], xerr=err, fmt=marker, color=color, markersize=7, capsize=3, zorder=4, label=label
    )


def plot_spread_by_cell(
    path: str | os.PathLike[str],
    rows: Sequence[SpreadRow],
    bar: BarLine | None,
    linthresh_cm: float,
    confidence: float,
    bar_name: str | None = "signal bar",
) -> Path:
    """Every cell's group spread against the rule's signal bar: one row per cell (registered order, top
    down), each seed's group std, the median over seeds with its interval and, where draws were replayed,
    each replayed seed's chaos std (the chaos floor) and the pooled choice std the signal criterion reads,
    with its interval (the criterion reads its lower end).

    ``bar`` is a bar the same for every cell, a line across the figure; a rule whose bar is each cell's
    own (its chaos floor) draws it on the cell's row (:attr:`SpreadRow.bar`). ``bar_name`` is what the
    title says the spread is set against (None: the rule has no bar, and the title names none)."""
    replay = any(r.replay_std_cm for r in rows)
    with matplotlib.style.context("default"):
        fig = new_figure(6.4, 1.6 + 0.42 * len(rows) + (0.25 if replay else 0.0))
        ax = fig.add_subplot()
        values: list[float] = []
        pct = f"{100 * confidence:.4g}%"
        own_bar_labelled = False
        for i, row in enumerate(rows):
            first = i == 0
            lift = -0.18 if replay else 0.0
            _seed_points(ax, row.group_std_cm, i + lift, "group std, one seed" if first else None)
            _interval_row(
                ax,
                i + lift,
                row.median,
                SAMPLED,
                "o",
                f"median over seeds [{pct} interval]" if first else None,
            )
            if row.replay_std_cm:
                ax.scatter(
                    row.replay_std_cm,
                    np.full(len(row.replay_std_cm), i + 0.18),
                    marker="x",
                    s=18,
                    color=CHAOS,
                    linewidths=0.9,
                    zorder=3,
                    label="chaos std (the chaos floor), one replayed seed" if first else None,
                )
            _interval_row(
                ax,
                i + 0.18,
                row.choice,
                "black",
                "D",
                f"choice std, pooled [{pct} interval]" if first else None,
            )
            values += [*row.group_std_cm, *row.replay_std_cm]
            for est in (row.median, row.choice):
                if est is not None:
                    values += finite([est.value, est.low, est.high])
            if row.bar is not None:
                ax.plot(
                    [row.bar.value_cm, row.bar.value_cm],
                    [i - 0.42, i + 0.42],
                    color=BAR,
                    linestyle="--",
                    linewidth=1.2,
                    label=None if own_bar_labelled else row.bar.label,
                )
                own_bar_labelled = True
                values.append(row.bar.value_cm)
        lines = []
        if bar is not None:
            ax.axvline(bar.value_cm, color=BAR, linestyle="--", linewidth=1.2, label=bar.label)
            lines.append(bar.value_cm)
        symlog_axis(ax, linthresh_cm, [*values, *lines])
        xlabel = f"std of progress over the K draws (cm, {symlog_note(linthresh_cm)})"
        title = "Group spread per cell" + ("" if bar_name is None else f" against the {bar_name}")
        return _cell_rows_png(fig, ax, [r.cell for r in rows], xlabel, title, path)


def plot_competence_by_cell(
    path: str | os.PathLike[str], rows: Sequence[CompetenceRow], competence_tol_cm: float, confidence: float
) -> Path:
    """Every cell's competence against its anchor: one row per cell (registered order, top down), each
    seed's sampled mean minus the anchor's progress, the mean over seeds with its interval, and the
    registered tolerance below zero."""
    with matplotlib.style.context("default"):
        fig = new_figure(6.4, 1.6 + 0.42 * len(rows))
        ax = fig.add_subplot()
        values: list[float] = []
        pct = f"{100 * confidence:.4g}%"
        for i, row in enumerate(rows):
            first = i == 0
            _seed_points(ax, row.delta_cm, float(i), "sampled mean minus anchor, one seed" if first else None)
            _interval_row(
                ax, float(i), row.mean, SAMPLED, "o", f"mean over seeds [{pct} interval]" if first else None
            )
            values += [*row.delta_cm, *finite([row.mean.value, row.mean.low, row.mean.high])]
        ax.axvline(0.0, color=ANCHOR, linewidth=1.0, label="anchor's progress (0)")
        ax.axvline(
            -competence_tol_cm,
            color=BAR,
            linestyle="--",
            linewidth=1.2,
            label=f"tolerance {-competence_tol_cm:g} cm",
        )
        linthresh = competence_tol_cm if competence_tol_cm > 0 else 1.0
        symlog_axis(ax, linthresh, [*values, -competence_tol_cm])
        xlabel = f"sampled mean minus anchor progress (cm, {symlog_note(linthresh)})"
        return _cell_rows_png(
            fig, ax, [r.cell for r in rows], xlabel, "Competence per cell against the anchor", path
        )


_PASS = "tab:green"
_FAIL = "tab:red"


def _failing_side(ax: Axes, op: str, threshold: float) -> None:
    """Shade the side of a threshold the clause fails on, so a failing value sits in the red."""
    left, right = ax.get_xlim()
    if op in (">=", ">"):
        ax.axvspan(left, threshold, color=_FAIL, alpha=0.07, linewidth=0)
    else:
        ax.axvspan(threshold, right, color=_FAIL, alpha=0.07, linewidth=0)
    ax.set_xlim(left, right)


def plot_rule_clauses(
    path: str | os.PathLike[str],
    panels: Sequence[ClausePanel],
    cells: Sequence[tuple[str, bool | None]],
    confidence: float,
) -> Path:
    """Every clause the registered rule reads, one panel each, every cell a row: the read's estimate with
    its interval, the value the clause compares (filled green where it passes, red where it fails, hollow
    where the cell's head does not need the clause), and the threshold with its failing side shaded.

    Why this is decision.md's first figure: the outcome is the rule's clauses, so the picture shows
    exactly those, a failing cell looks failing (the chaos share's upper end past one half beside the
    signal bar, not only the spread that clears the bar), and ``cells`` labels each row with its verdict.
    """
    with matplotlib.style.context("default"):
        width = 1.6 + 2.7 * max(len(panels), 1)
        fig = new_figure(max(width, 6.4), 1.9 + 0.4 * len(cells))
        axes = fig.subplots(1, max(len(panels), 1), sharey=True, squeeze=False)[0]
        labels = [
            f"{cell}  {'qualifies' if ok else 'does not' if ok is False else 'not routed'}"
            for cell, ok in cells
        ]
        for ax, panel in zip(axes, panels, strict=False):
            values: list[float] = []
            for i, row in enumerate(panel.rows):
                est = row.estimate
                if est.low is not None and est.high is not None:
                    ax.plot(
                        [est.low, est.high],
                        [i, i],
                        color="0.55",
                        linewidth=2.2,
                        solid_capstyle="butt",
                        zorder=2,
                    )
                if est.value is not None:
                    ax.plot([est.value], [i], marker="|", color="0.3", markersize=9, zorder=3)
                if row.compared is not None:
                    color = _PASS if row.passed else _FAIL
                    ax.plot(
                        [row.compared],
                        [i],
                        marker="o",
                        markersize=7,
                        markeredgecolor=color if row.needed else "0.5",
                        markerfacecolor=color if row.needed else "none",
                        zorder=4,
                    )
                values += finite([est.value, est.low, est.high, row.compared, row.threshold])
            thresholds = sorted({r.threshold for r in panel.rows})
            if panel.unit == "cm":
                linthresh = min((abs(t) for t in thresholds if t != 0), default=1.0)
                symlog_axis(ax, linthresh, values)
                ax.set_xlabel(f"cm, {symlog_note(linthresh)}", fontsize="x-small")
            else:
                low, high = min([0.0, *values]), max([1.0 if max(values, default=0) <= 1 else 0.0, *values])
                pad = 0.05 * (high - low or 1.0)
                ax.set_xlim(low - pad, high + pad)
                if panel.unit:
                    ax.set_xlabel(panel.unit, fontsize="x-small")
            if len(thresholds) == 1:
                ax.axvline(thresholds[0], color="black", linestyle="--", linewidth=1.1, zorder=1)
                _failing_side(ax, panel.op, thresholds[0])
            else:  # a bar relative to another read: each cell's own threshold
                for i, row in enumerate(panel.rows):
                    ax.plot(
                        [row.threshold] * 2,
                        [i - 0.35, i + 0.35],
                        color="black",
                        linestyle="--",
                        linewidth=1.1,
                    )
            ax.set_title(textwrap.fill(panel.title, 42), fontsize="small")
            ax.tick_params(axis="x", labelsize="x-small")
            ax.grid(axis="x", color="0.92", linewidth=0.6)
        for ax in axes[len(panels) :]:
            ax.set_axis_off()
        axes[0].set_yticks(np.arange(len(cells)), labels, fontsize="small")
        axes[0].set_ylim(len(cells) - 0.5, -0.5)
        pct = f"{100 * confidence:.4g}%"
        handles = [
            matplotlib.lines.Line2D([], [], color="0.55", linewidth=2.2, label=f"{pct} interval over seeds"),
            matplotlib.lines.Line2D(
                [], [], color="0.3", marker="|", linestyle="none", markersize=9, label="estimate"
            ),
            matplotlib.lines.Line2D(
                [], [], color=_PASS, marker="o", linestyle="none", label="compared: passes"
            ),
            matplotlib.lines.Line2D(
                [], [], color=_FAIL, marker="o", linestyle="none", label="compared: fails"
            ),
            matplotlib.lines.Line2D(
                [],
                [],
                color="0.5",
                marker="o",
                markerfacecolor="none",
                linestyle="none",
                label="not needed by its head",
            ),
            matplotlib.lines.Line2D([], [], color="black", linestyle="--", label="threshold"),
        ]
        fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize="x-small", frameon=False)
        fig.suptitle("Each clause of the decision rule, per cell", fontsize="medium")
        return save_png(fig, path)
