"""decision.md's per-cell figures, linked below the fold: one cell's group spread, chaos, competence,
guard rates, AR entropy and trajectories."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib.style
import numpy as np
from matplotlib.patches import Circle, Rectangle

from grpo_probe.analysis.cells.anchor_join import SeedJoin
from grpo_probe.analysis.cells.chaos import SeedChaos
from grpo_probe.analysis.cells.entropy import EntropySummary
from grpo_probe.analysis.cells.group_stats import SeedGroup
from grpo_probe.analysis.cells.guards import GuardRate
from grpo_probe.analysis.cells.tables import RolloutTable
from grpo_probe.analysis.page.figure_canvas import (
    ANCHOR,
    DRAWS,
    SAMPLED,
    BarLine,
    new_figure,
    save_png,
    symlog_axis,
    symlog_note,
)

__all__ = [
    "plot_chaos",
    "plot_competence",
    "plot_entropy",
    "plot_group_std",
    "plot_guard_rates",
    "plot_trajectories",
]


def plot_group_std(
    path: str | os.PathLike[str],
    cell: str,
    groups: Sequence[SeedGroup],
    bar: BarLine | None,
    degenerate_tol_cm: float,
    linthresh_cm: float,
) -> Path:
    """Per seed, the within-group std of progress and best point, sorted, against the rule's signal bar
    (``bar``; None where the rule has none for this cell) and the degenerate tolerance, on a symmetric-log
    axis linear within ``linthresh_cm``."""
    with matplotlib.style.context("default"):
        fig = new_figure(6.4, 4.2)
        ax = fig.add_subplot()
        ordered = sorted(groups, key=lambda g: (g.std_progress_cm, g.seed))
        y = np.arange(len(ordered))
        ax.scatter(
            [g.std_progress_cm for g in ordered], y, color=SAMPLED, label="progress_final_cm", zorder=3
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
        if bar is not None:
            ax.axvline(bar.value_cm, color="tab:red", linestyle="--", label=bar.label)
        ax.axvline(
            degenerate_tol_cm, color="0.5", linestyle=":", label=f"degenerate tol {degenerate_tol_cm:g} cm"
        )
        ax.axvline(median, color=SAMPLED, linewidth=1.0, alpha=0.6, label="median (progress)")
        values = [v for g in ordered for v in (g.std_progress_cm, g.std_best_point_cm) if math.isfinite(v)]
        lines = [] if bar is None else [bar.value_cm]
        symlog_axis(ax, linthresh_cm, [*values, *lines, degenerate_tol_cm])
        ax.set_yticks(y, [str(g.seed) for g in ordered])
        ax.set_ylabel("seed (sorted by progress std)")
        ax.set_xlabel(f"within-group std over K draws (cm, {symlog_note(linthresh_cm)})")
        ax.set_title(f"cell {cell}: group spread per seed")
        fig.legend(loc="outside lower center", ncols=3, fontsize="x-small", frameon=False)
        return save_png(fig, path)


def plot_chaos(
    path: str | os.PathLike[str],
    cell: str,
    seeds: Sequence[SeedChaos],
    bar: BarLine | None,
    linthresh_cm: float,
) -> Path:
    """Per replayed seed, the group std against the replay std (the chaos floor), with the rule's signal
    bar (``bar``: the registered bar, or the cell's pooled chaos floor where the rule compares with that;
    None: no line), both axes symmetric-log, linear within ``linthresh_cm``.

    A seed on the diagonal has all its spread from chaos; one far below it, from the draws' choices. A
    seed above the horizontal bar line clears the bar by chaos alone.
    """
    with matplotlib.style.context("default"):
        fig = new_figure(6.0, 5.0)
        ax = fig.add_subplot()
        group = np.array([s.group_std_cm for s in seeds])
        replay = np.array([s.replay_std_cm for s in seeds])
        reach = linthresh_cm if bar is None else bar.value_cm
        top = float(max(group.max(initial=0.0), replay.max(initial=0.0), reach)) * 1.1 or 1.0
        diagonal = np.concatenate([[0.0], np.geomspace(linthresh_cm / 10, top, 64)])
        ax.plot(diagonal, diagonal, color="0.5", linestyle=":", label="all chaos (replay = group std)")
        if bar is not None:
            ax.axhline(bar.value_cm, color="tab:red", linestyle="--", label=bar.label)
            ax.axvline(bar.value_cm, color="tab:red", linestyle="--", linewidth=0.8)
        ax.scatter(group, replay, color=SAMPLED, zorder=3, label=f"replayed seed (n = {len(seeds)})")
        for s, x, y in zip(seeds, group, replay, strict=True):
            ax.annotate(str(s.seed), (x, y), textcoords="offset points", xytext=(3, 3), fontsize="x-small")
        # Symmetric log on both axes: the bar (a quarter centimetre) and spreads of tens of centimetres are
        # both visible, and the diagonal stays the diagonal.
        symlog_axis(ax, linthresh_cm, [top], "x")
        symlog_axis(ax, linthresh_cm, [top], "y")
        ax.set_xlabel("group std of progress over K draws (cm)")
        ax.set_ylabel("replay std of the same draw (cm)")
        ax.set_title(
            f"cell {cell}: signal or chaos\n(both axes {symlog_note(linthresh_cm)} cm)", fontsize="medium"
        )
        ax.legend(fontsize="small", loc="upper left")
        return save_png(fig, path)


def plot_competence(
    path: str | os.PathLike[str], cell: str, probe: RolloutTable, joins: Sequence[SeedJoin]
) -> Path:
    """Per seed: the K sampled progresses, their mean, and the anchor's progress."""
    target = probe.env.view.names[2]
    with matplotlib.style.context("default"):
        fig = new_figure(6.4, 3.6)
        ax = fig.add_subplot()
        x = np.arange(len(joins))
        for i, join in enumerate(joins):
            draws = probe.progress_final_cm[probe.rows_of(join.seed)]
            ax.scatter(
                np.full(draws.size, i),
                draws,
                s=14,
                color=SAMPLED,
                alpha=0.45,
                linewidths=0,
                label=f"one sampled draw (K = {draws.size} per seed)" if i == 0 else None,
            )
        ax.scatter(
            x,
            [j.sampled_mean_progress_cm for j in joins],
            marker="_",
            s=200,
            color=SAMPLED,
            label="mean of the sampled draws",
        )
        ax.scatter(
            x,
            [j.anchor_progress_cm for j in joins],
            marker="x",
            color=ANCHOR,
            label="anchor (deterministic)",
        )
        ax.axhline(0.0, color="0.7", linewidth=0.8)
        ax.set_xticks(x, [str(j.seed) for j in joins])
        ax.set_xlabel("seed")
        ax.set_ylabel(f"final progress toward the {target} (cm)")
        ax.set_title(f"cell {cell}: sampled draws against the anchor")
        ax.legend(fontsize="small")
        return save_png(fig, path)


def plot_guard_rates(
    path: str | os.PathLike[str], cells: Sequence[str], rates: Sequence[Sequence[GuardRate]]
) -> Path:
    """One panel per guard (the environment's, in its order): sampled and anchor trip rates per cell, each
    bar labelled with its count of episodes (tripped/episodes), so a rate of 0 and the n behind a rate
    are both on the figure."""
    guards = [r.guard for r in rates[0]]
    with matplotlib.style.context("default"):
        fig = new_figure(2.2 * len(guards), 3.6)
        axes = fig.subplots(1, len(guards), sharey=True, squeeze=False)[0]  # one guard: still a row
        x = np.arange(len(cells))
        for g, (ax, guard) in enumerate(zip(axes, guards, strict=True)):
            for offset, color, label, which in (
                (-0.2, SAMPLED, "sampled", "sampled"),
                (0.2, ANCHOR, "anchor", "anchor"),
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
        return save_png(fig, path)


def plot_entropy(
    path: str | os.PathLike[str], cell: str, probe: RolloutTable, summary: EntropySummary
) -> Path:
    """Per replan index: the distribution of the chunk's mean action-token entropy, and its mean."""
    if probe.replan_entropy_mean is None:
        raise ValueError(
            f"{probe.path}: column replan_entropy_mean is null; entropy is plotted for AR cells only"
        )
    with matplotlib.style.context("default"):
        fig = new_figure(6.4, 3.4)
        ax = fig.add_subplot()
        per_index = [
            np.array([e[i] for e in probe.replan_entropy_mean if len(e) > i])
            for i in range(len(summary.per_replan_index_mean))
        ]
        ax.boxplot(per_index, positions=np.arange(len(per_index)), widths=0.6, showfliers=False)
        ax.plot(
            np.arange(len(per_index)), summary.per_replan_index_mean, color=SAMPLED, marker="o", label="mean"
        )
        ax.set_xlabel("replan")
        ax.set_ylabel("mean action-token entropy (nats)")
        ax.set_title(f"cell {cell}: token entropy per replan")
        ax.legend(fontsize="small")
        return save_png(fig, path)


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
        fig = new_figure(5.2, 5.2)
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
        palette = matplotlib.colormaps[DRAWS]
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
        return save_png(fig, path)
