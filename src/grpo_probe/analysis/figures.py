"""decision.md's figures: matplotlib Agg PNGs whose bytes depend only on the numbers drawn.

Why: an auditor's rerun must give byte-identical artifacts, figures included. So no pyplot (global
state), matplotlib's default style whatever the user's matplotlibrc says, a fixed size and dpi, no
randomness (seeds are placed by rank, not jitter), and PNG metadata without the matplotlib version
stamp (``metadata={"Software": None}``). Files are written atomically.

Two figures show every cell at once and are the ones decision.md embeds next to its outcome: each cell's
group spread against the signal bar (with the chaos floor where the design replays draws), and its
sampled-minus-anchor progress against the competence tolerance. They draw the numbers decision.json holds
(:class:`SpreadRow`, :class:`CompetenceRow`), so the picture and the page cannot disagree. The others are
per cell and linked below the fold.
"""

from __future__ import annotations

import io
import math
import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import matplotlib.lines
import matplotlib.style
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Circle, Rectangle
from matplotlib.ticker import FuncFormatter, NullLocator

from grpo_probe.analysis.anchor_join import SeedJoin
from grpo_probe.analysis.chaos import SeedChaos
from grpo_probe.analysis.entropy import EntropySummary
from grpo_probe.analysis.group_stats import SeedGroup
from grpo_probe.analysis.guards import GuardRate
from grpo_probe.analysis.tables import RolloutTable
from grpo_probe.atomic_io import atomic_write_bytes

__all__ = [
    "ClausePanel",
    "ClauseRow",
    "CompetenceRow",
    "Interval",
    "SpreadRow",
    "plot_chaos",
    "plot_competence",
    "plot_competence_by_cell",
    "plot_entropy",
    "plot_group_std",
    "plot_guard_rates",
    "plot_rule_clauses",
    "plot_spread_by_cell",
    "plot_trajectories",
    "png_bytes",
    "symlog_axis",
    "symlog_note",
]

_DPI = 150
"""Pixels per inch: a 6.4-inch figure is 960 pixels wide, readable on a laptop without zooming."""
_SAMPLED = "tab:blue"
_ANCHOR = "0.25"
_CHAOS = "tab:red"
_BAR = "tab:red"
_DRAWS = "tab10"
"""Qualitative colours for the K draws of a trajectory figure: neighbours stay distinguishable."""


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


@dataclass(frozen=True)
class ClausePanel:
    """One clause of the registered rule (``choice_std_cm.lower >= 0.25``) across the cells."""

    title: str
    unit: str
    op: str
    rows: tuple[ClauseRow, ...]


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes with no software/version metadata."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return buf.getvalue()


def _save(fig: Figure, path: str | os.PathLike[str]) -> Path:
    atomic_write_bytes(path, png_bytes(fig))
    return Path(path)


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def plot_group_std(
    path: str | os.PathLike[str],
    cell: str,
    groups: Sequence[SeedGroup],
    signal_bar_cm: float,
    degenerate_tol_cm: float,
) -> Path:
    """Per seed, the within-group std of progress and best point, sorted, against the bar and tolerance."""
    with matplotlib.style.context("default"):
        fig = _figure(6.4, 4.2)
        ax = fig.add_subplot()
        ordered = sorted(groups, key=lambda g: (g.std_progress_cm, g.seed))
        y = np.arange(len(ordered))
        ax.scatter(
            [g.std_progress_cm for g in ordered], y, color=_SAMPLED, label="progress_final_cm", zorder=3
        )
        ax.scatter(
            [g.std_best_point_cm for g in ordered],
            y,
            marker="x",
            color="tab:orange",
            label="best_point_cm",
            zorder=3,
        )
        median = float(np.median([g.std_progress_cm for g in ordered]))
        ax.axvline(signal_bar_cm, color="tab:red", linestyle="--", label=f"signal bar {signal_bar_cm:g} cm")
        ax.axvline(
            degenerate_tol_cm, color="0.5", linestyle=":", label=f"degenerate tol {degenerate_tol_cm:g} cm"
        )
        ax.axvline(median, color=_SAMPLED, linewidth=1.0, alpha=0.6, label="median (progress)")
        linthresh = degenerate_tol_cm if degenerate_tol_cm > 0 else signal_bar_cm
        values = [v for g in ordered for v in (g.std_progress_cm, g.std_best_point_cm) if math.isfinite(v)]
        symlog_axis(ax, linthresh, [*values, signal_bar_cm, degenerate_tol_cm])
        ax.set_yticks(y, [str(g.seed) for g in ordered])
        ax.set_ylabel("seed (sorted by progress std)")
        ax.set_xlabel(f"within-group std over K draws (cm, {symlog_note(linthresh)})")
        ax.set_title(f"cell {cell}: group spread per seed")
        fig.legend(loc="outside lower center", ncols=3, fontsize="x-small", frameon=False)
        return _save(fig, path)


def plot_chaos(
    path: str | os.PathLike[str], cell: str, seeds: Sequence[SeedChaos], signal_bar_cm: float
) -> Path:
    """Per replayed seed, the group std against the replay std (the chaos floor), with the signal bar.

    A seed on the diagonal has all its spread from chaos; one far below it, from the draws' choices. A
    seed above the horizontal bar line clears the bar by chaos alone.
    """
    with matplotlib.style.context("default"):
        fig = _figure(6.0, 5.0)
        ax = fig.add_subplot()
        group = np.array([s.group_std_cm for s in seeds])
        replay = np.array([s.replay_std_cm for s in seeds])
        top = float(max(group.max(initial=0.0), replay.max(initial=0.0), signal_bar_cm)) * 1.1 or 1.0
        diagonal = np.concatenate([[0.0], np.geomspace(signal_bar_cm / 10, top, 64)])
        ax.plot(diagonal, diagonal, color="0.5", linestyle=":", label="all chaos (replay = group std)")
        ax.axhline(signal_bar_cm, color="tab:red", linestyle="--", label=f"signal bar {signal_bar_cm:g} cm")
        ax.axvline(signal_bar_cm, color="tab:red", linestyle="--", linewidth=0.8)
        ax.scatter(group, replay, color=_SAMPLED, zorder=3, label=f"replayed seed (n = {len(seeds)})")
        for s, x, y in zip(seeds, group, replay, strict=True):
            ax.annotate(str(s.seed), (x, y), textcoords="offset points", xytext=(3, 3), fontsize="x-small")
        # Symmetric log on both axes: the bar (a quarter centimetre) and spreads of tens of centimetres are
        # both visible, and the diagonal stays the diagonal.
        symlog_axis(ax, signal_bar_cm, [top], "x")
        symlog_axis(ax, signal_bar_cm, [top], "y")
        ax.set_xlabel("group std of progress over K draws (cm)")
        ax.set_ylabel("replay std of the same draw (cm)")
        ax.set_title(
            f"cell {cell}: signal or chaos\n(both axes {symlog_note(signal_bar_cm)} cm)", fontsize="medium"
        )
        ax.legend(fontsize="small", loc="upper left")
        return _save(fig, path)


def plot_competence(
    path: str | os.PathLike[str], cell: str, probe: RolloutTable, joins: Sequence[SeedJoin]
) -> Path:
    """Per seed: the K sampled progresses, their mean, and the anchor's progress."""
    target = probe.env.view.names[2]
    with matplotlib.style.context("default"):
        fig = _figure(6.4, 3.6)
        ax = fig.add_subplot()
        x = np.arange(len(joins))
        for i, join in enumerate(joins):
            draws = probe.progress_final_cm[probe.rows_of(join.seed)]
            ax.scatter(
                np.full(draws.size, i),
                draws,
                s=14,
                color=_SAMPLED,
                alpha=0.45,
                linewidths=0,
                label=f"one sampled draw (K = {draws.size} per seed)" if i == 0 else None,
            )
        ax.scatter(
            x,
            [j.sampled_mean_progress_cm for j in joins],
            marker="_",
            s=200,
            color=_SAMPLED,
            label="mean of the sampled draws",
        )
        ax.scatter(
            x,
            [j.anchor_progress_cm for j in joins],
            marker="x",
            color=_ANCHOR,
            label="anchor (deterministic)",
        )
        ax.axhline(0.0, color="0.7", linewidth=0.8)
        ax.set_xticks(x, [str(j.seed) for j in joins])
        ax.set_xlabel("seed")
        ax.set_ylabel(f"final progress toward the {target} (cm)")
        ax.set_title(f"cell {cell}: sampled draws against the anchor")
        ax.legend(fontsize="small")
        return _save(fig, path)


def _finite(values: Sequence[float | None]) -> list[float]:
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
    signal_bar_cm: float,
    linthresh_cm: float,
    confidence: float,
) -> Path:
    """Every cell's group spread against the signal bar: one row per cell (registered order, top down),
    each seed's group std, the median over seeds with its interval and, where draws were replayed, each
    replayed seed's chaos std (the chaos floor) and the pooled choice std the signal criterion reads, with
    its interval (the criterion reads its lower end)."""
    replay = any(r.replay_std_cm for r in rows)
    with matplotlib.style.context("default"):
        fig = _figure(6.4, 1.6 + 0.42 * len(rows) + (0.25 if replay else 0.0))
        ax = fig.add_subplot()
        values: list[float] = []
        pct = f"{100 * confidence:.4g}%"
        for i, row in enumerate(rows):
            first = i == 0
            lift = -0.18 if replay else 0.0
            ax.scatter(
                row.group_std_cm,
                np.full(len(row.group_std_cm), i + lift),
                s=16,
                facecolors="none",
                edgecolors=_SAMPLED,
                linewidths=0.8,
                zorder=3,
                label="group std, one seed" if first else None,
            )
            _interval_row(
                ax,
                i + lift,
                row.median,
                _SAMPLED,
                "o",
                f"median over seeds [{pct} interval]" if first else None,
            )
            if row.replay_std_cm:
                ax.scatter(
                    row.replay_std_cm,
                    np.full(len(row.replay_std_cm), i + 0.18),
                    marker="x",
                    s=18,
                    color=_CHAOS,
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
                    values += _finite([est.value, est.low, est.high])
        ax.axvline(
            signal_bar_cm, color=_BAR, linestyle="--", linewidth=1.2, label=f"signal bar {signal_bar_cm:g} cm"
        )
        symlog_axis(ax, linthresh_cm, [*values, signal_bar_cm])
        ax.set_yticks(np.arange(len(rows)), [r.cell for r in rows], fontsize="small")
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_xlabel(f"std of progress over the K draws (cm, {symlog_note(linthresh_cm)})", fontsize="small")
        ax.set_title("Group spread per cell against the signal bar", fontsize="medium")
        ax.grid(axis="x", color="0.9", linewidth=0.6)
        fig.legend(loc="outside lower center", ncols=2, fontsize="x-small", frameon=False)
        return _save(fig, path)


def plot_competence_by_cell(
    path: str | os.PathLike[str], rows: Sequence[CompetenceRow], competence_tol_cm: float, confidence: float
) -> Path:
    """Every cell's competence against its anchor: one row per cell (registered order, top down), each
    seed's sampled mean minus the anchor's progress, the mean over seeds with its interval, and the
    registered tolerance below zero."""
    with matplotlib.style.context("default"):
        fig = _figure(6.4, 1.6 + 0.42 * len(rows))
        ax = fig.add_subplot()
        values: list[float] = []
        pct = f"{100 * confidence:.4g}%"
        for i, row in enumerate(rows):
            first = i == 0
            ax.scatter(
                row.delta_cm,
                np.full(len(row.delta_cm), float(i)),
                s=16,
                facecolors="none",
                edgecolors=_SAMPLED,
                linewidths=0.8,
                zorder=3,
                label="sampled mean minus anchor, one seed" if first else None,
            )
            _interval_row(
                ax, float(i), row.mean, _SAMPLED, "o", f"mean over seeds [{pct} interval]" if first else None
            )
            values += [*row.delta_cm, *_finite([row.mean.value, row.mean.low, row.mean.high])]
        ax.axvline(0.0, color=_ANCHOR, linewidth=1.0, label="anchor's progress (0)")
        ax.axvline(
            -competence_tol_cm,
            color=_BAR,
            linestyle="--",
            linewidth=1.2,
            label=f"tolerance {-competence_tol_cm:g} cm",
        )
        linthresh = competence_tol_cm if competence_tol_cm > 0 else 1.0
        symlog_axis(ax, linthresh, [*values, -competence_tol_cm])
        ax.set_yticks(np.arange(len(rows)), [r.cell for r in rows], fontsize="small")
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_xlabel(f"sampled mean minus anchor progress (cm, {symlog_note(linthresh)})", fontsize="small")
        ax.set_title("Competence per cell against the anchor", fontsize="medium")
        ax.grid(axis="x", color="0.9", linewidth=0.6)
        fig.legend(loc="outside lower center", ncols=2, fontsize="x-small", frameon=False)
        return _save(fig, path)


def plot_guard_rates(
    path: str | os.PathLike[str], cells: Sequence[str], rates: Sequence[Sequence[GuardRate]]
) -> Path:
    """One panel per guard (the environment's, in its order): sampled and anchor trip rates per cell, each
    bar labelled with its count of episodes (tripped/episodes), so a rate of 0 and the n behind a rate
    are both on the figure."""
    guards = [r.guard for r in rates[0]]
    with matplotlib.style.context("default"):
        fig = _figure(2.2 * len(guards), 3.6)
        axes = fig.subplots(1, len(guards), sharey=True, squeeze=False)[0]  # one guard: still a row
        x = np.arange(len(cells))
        for g, (ax, guard) in enumerate(zip(axes, guards, strict=True)):
            for offset, color, label, which in (
                (-0.2, _SAMPLED, "sampled", "sampled"),
                (0.2, _ANCHOR, "anchor", "anchor"),
            ):
                heights = [getattr(r[g], f"{which}_rate") for r in rates]
                ax.bar(x + offset, heights, width=0.4, color=color, label=label)
                for xi, h, r in zip(x, heights, rates, strict=True):
                    count, n = getattr(r[g], f"{which}_count"), getattr(r[g], f"{which}_n")
                    ax.annotate(
                        f"{count}/{n}",
                        (xi + offset, h),
                        textcoords="offset points",
                        xytext=(0, 2),
                        rotation=90,
                        ha="center",
                        va="bottom",
                        fontsize="xx-small",
                    )
            ax.set_xticks(x, list(cells), rotation=45, ha="right", fontsize="small")
            ax.set_title(guard.replace("_", " "), fontsize="medium")
            ax.set_ylim(0.0, 1.35)
            ax.set_yticks(np.linspace(0.0, 1.0, 6))
        axes[0].set_ylabel("share of episodes tripped")
        axes[0].legend(fontsize="small", loc="upper left")
        fig.suptitle(
            "Guard trips per cell, sampled against anchor (bars labelled tripped/episodes)", fontsize="medium"
        )
        return _save(fig, path)


def plot_entropy(
    path: str | os.PathLike[str], cell: str, probe: RolloutTable, summary: EntropySummary
) -> Path:
    """Per replan index: the distribution of the chunk's mean action-token entropy, and its mean."""
    if probe.replan_entropy_mean is None:
        raise ValueError(
            f"{probe.path}: column replan_entropy_mean is null; entropy is plotted for AR cells only"
        )
    with matplotlib.style.context("default"):
        fig = _figure(6.4, 3.4)
        ax = fig.add_subplot()
        per_index = [
            np.array([e[i] for e in probe.replan_entropy_mean if len(e) > i])
            for i in range(len(summary.per_replan_index_mean))
        ]
        ax.boxplot(per_index, positions=np.arange(len(per_index)), widths=0.6, showfliers=False)
        ax.plot(
            np.arange(len(per_index)), summary.per_replan_index_mean, color=_SAMPLED, marker="o", label="mean"
        )
        ax.set_xlabel("replan")
        ax.set_ylabel("mean action-token entropy (nats)")
        ax.set_title(f"cell {cell}: token entropy per replan")
        ax.legend(fontsize="small")
        return _save(fig, path)


def plot_trajectories(
    path: str | os.PathLike[str],
    cell: str,
    seed: int,
    probe: RolloutTable,
    anchor: RolloutTable,
    target_radius_m: float | None = None,
    table_xy_m: tuple[float, float, float, float] | None = None,
) -> Path:
    """Top-down view of one seed: the object's (and the effector's) traces of its K draws, the anchor's
    object, the goal (the boat, the pusher and the disk in the boat scene; names from the env's view).

    Each draw has its own colour from a qualitative palette, so neighbouring draws stay apart;
    ``table_xy_m`` (x0, y0, x1, y1), where the scene has a table, is drawn as its outline so a reader sees
    how far the object went and how close it came to the edge.
    """
    view = probe.env.view
    radius = view.target_radius_m if target_radius_m is None else target_radius_m
    moved, effector, target = view.names
    (ox, oy), (tx, ty) = view.object_xy, view.target_xy
    with matplotlib.style.context("default"):
        fig = _figure(5.2, 5.2)
        ax = fig.add_subplot()
        if table_xy_m is not None:
            x0, y0, x1, y1 = table_xy_m
            ax.add_patch(
                Rectangle(
                    (x0, y0),
                    x1 - x0,
                    y1 - y0,
                    facecolor="#f4efe6",
                    edgecolor="#8a7a60",
                    linewidth=1.2,
                    zorder=0,
                    label="table",
                )
            )
        rows = probe.rows_of(seed)
        palette = matplotlib.colormaps[_DRAWS]
        colors = [palette(i % palette.N) for i in range(rows.size)]
        for color, row in zip(colors, rows, strict=True):
            t = probe.traces
            if view.effector_xy is not None:
                ex, ey = view.effector_xy
                ax.plot(t[ex][row], t[ey][row], color=color, linewidth=0.6, alpha=0.4)
            ax.plot(
                t[ox][row],
                t[oy][row],
                color=color,
                linewidth=1.8,
                label=f"draw {probe.draw[row]}",
            )
        (a,) = anchor.rows_of(seed)
        ax.plot(
            anchor.traces[ox][a],
            anchor.traces[oy][a],
            color="black",
            linestyle="--",
            linewidth=1.5,
            label=f"anchor {moved}",
        )
        start = (probe.traces[ox][rows[0]][0], probe.traces[oy][rows[0]][0])
        ax.plot(*start, marker="s", color="black", linestyle="none", label=f"{moved} spawn")
        goal = (float(probe.columns[tx][rows[0]]), float(probe.columns[ty][rows[0]]))
        ax.add_patch(Circle(goal, radius, facecolor="tab:red", alpha=0.25, edgecolor="tab:red"))
        ax.plot(*goal, marker="+", color="tab:red", linestyle="none", label=target)
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        thin = f", {effector} (thin)" if view.effector_xy is not None else ""
        ax.set_title(f"cell {cell}, seed {seed}: {moved} (thick){thin}", fontsize="medium")
        ax.legend(fontsize="x-small", loc="best", ncols=2)
        return _save(fig, path)


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
        fig = _figure(max(width, 6.4), 1.9 + 0.4 * len(cells))
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
                values += _finite([est.value, est.low, est.high, row.compared, row.threshold])
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
        return _save(fig, path)
