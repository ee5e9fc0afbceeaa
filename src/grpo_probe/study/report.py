"""validation.md, validation.json, its per-arm table and the figure "probe read against pilot gain".

Why from the members' pages and nothing else: decision.json holds each cell's reads as the probe wrote
them, and phase2.json each arm's held-out change with its interval, so the study adds no new measurement,
only the comparison the memo's question asks for: does the ordering of the probe's reads match the
ordering of the gains? The page says it plainly, including when a handful of arms leaves the answer
underpowered, and whether each control behaved as a control must (a positive control whose gain is not
resolved cannot tell a probe that fails from a pilot that cannot learn).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from grpo_probe.analysis.figures import png_bytes
from grpo_probe.atomic_io import atomic_path, atomic_write_bytes, atomic_write_json, atomic_write_text
from grpo_probe.provenance.manifest import relative_to_root
from grpo_probe.study.design import Study
from grpo_probe.study.ranks import RankCorrelation, rank_correlation

__all__ = ["ArmRow", "arm_rows", "build_study_report", "study_markdown"]

_ROLE_TEXT = {
    "subject": "subject",
    "positive_control": "positive control",
    "negative_control": "negative control",
}
_MARKERS = {"subject": "o", "positive_control": "^", "negative_control": "v"}
_COLOURS = {"subject": "tab:blue", "positive_control": "tab:green", "negative_control": "tab:red"}


@dataclass(frozen=True)
class ArmRow:
    """One arm of one member: the probe's reads of the cell that stands for it, and what the pilot gained."""

    design: str
    role: str
    arm: str
    head: str
    cell: str
    reads: dict[str, float | None]
    qualifies: bool
    """Whether the probe's registered rule qualified the arm's cell (the probe's "yes")."""
    predicted: bool
    """Whether the member's decision named this arm for phase 2."""
    gain: float
    gain_ci_low: float
    gain_ci_high: float
    pilot_verdict: str
    """The stage's verdict on phase2.md: held, did not hold, not shown or not tested."""
    moved: bool


def _load(path: str | os.PathLike[str], what: str) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: {what} not found") from None
    except ValueError as exc:
        raise ValueError(f"{path}: not a readable {what} ({exc})") from None


def arm_rows(
    study: Study, decisions: Sequence[str | os.PathLike[str]], phase2s: Sequence[str | os.PathLike[str]]
) -> list[ArmRow]:
    """The study's rows, member by member in the registered order; ``decisions`` and ``phase2s`` are each
    member's decision.json and phase2.json, in the same order. A missing cell, stage or read is an error
    naming the file."""
    if not len(decisions) == len(phase2s) == len(study.members):
        raise ValueError(
            f"{study.path}: {len(study.members)} members, but {len(decisions)} decision and "
            f"{len(phase2s)} phase-2 records"
        )
    rows: list[ArmRow] = []
    for member, decision_path, phase2_path in zip(study.members, decisions, phase2s, strict=True):
        decision, phase2 = _load(decision_path, "decision record"), _load(phase2_path, "phase-2 record")
        recorded_shas = (
            (decision_path, decision.get("prereg", {}).get("sha256")),
            (phase2_path, phase2.get("design", {}).get("prereg_sha256")),
        )
        for path, recorded in recorded_shas:
            if recorded != member.design.sha256:
                raise ValueError(
                    f"{path}: written for prereg sha256 {recorded}, but {member.design.path} is "
                    f"{member.design.sha256}; rerun the member"
                )
        cells = {c["id"]: c for c in decision["cells"]}
        stages = {s["arm"]: s for s in phase2.get("stages", [])}
        for arm, cell_id in member.cells.items():
            if cell_id not in cells:
                raise ValueError(f"{decision_path}: no cell {cell_id!r} (the study's cell for arm {arm!r})")
            if arm not in stages:
                raise ValueError(
                    f"{phase2_path}: the pilot did not train arm {arm!r} "
                    f"(trained: {', '.join(stages) or 'none'})"
                )
            cell, stage = cells[cell_id], stages[arm]
            missing = [r for r in study.reads if r not in cell["reads"]]
            if missing:
                raise ValueError(f"{decision_path}: cell {cell_id!r} has no read {', '.join(missing)}")
            change = next((c for c in stage["eval"]["changes"] if c["read"] == study.gain), None)
            if change is None:
                raise ValueError(f"{phase2_path}: arm {arm!r} has no held-out change in {study.gain!r}")
            rows.append(
                ArmRow(
                    design=member.design.name,
                    role=member.role,
                    arm=arm,
                    head=stage["head"],
                    cell=cell_id,
                    reads={r: cell["reads"][r] for r in study.reads},
                    qualifies=bool(cell["verdict"]["qualifies"]),
                    predicted=bool(stage.get("predicted", False)),
                    gain=float(change["delta"]),
                    gain_ci_low=float(change["ci_low"]),
                    gain_ci_high=float(change["ci_high"]),
                    pilot_verdict=str(stage["verdict"]),
                    moved=bool(stage["movement"]["moved"]),
                )
            )
    return rows


def _correlations(study: Study, rows: Sequence[ArmRow]) -> list[RankCorrelation]:
    """One rank correlation per read, over the arms whose pilot moved the policy.

    Why only those: the held-out change of a policy the pilot did not move measures the held-out draws'
    luck, not learning (on a chaotic scene a change below the movement floor still reshuffles outcomes),
    so an unmoved arm has no gain to rank; the page counts the arms left out.
    """
    out = []
    for read in study.reads:
        usable = [r for r in rows if r.reads[read] is not None and r.moved]
        out.append(
            rank_correlation(
                read,
                [float(r.reads[read]) for r in usable],  # type: ignore[arg-type]
                [r.gain for r in usable],
                seed=study.seed,
                resamples=study.resamples,
                confidence=study.confidence,
            )
        )
    return out


def _controls(rows: Sequence[ArmRow]) -> list[str]:
    """One sentence per control member: did it behave as a control must?"""
    lines = []
    for design in dict.fromkeys(r.design for r in rows if r.role != "subject"):
        arms = [r for r in rows if r.design == design]
        role = arms[0].role
        gained = [r.arm for r in arms if r.pilot_verdict == "held"]
        unmoved = [r.arm for r in arms if not r.moved]
        if role == "positive_control":
            lines.append(
                f"Positive control {design}: "
                + (
                    f"the pilot resolved a gain above zero on {', '.join(gained)}, so the pilot can learn at "
                    "this compute."
                    if gained
                    else "the pilot resolved no gain above zero on any arm, so at this compute the study "
                    "cannot tell a probe that fails from a pilot that cannot learn."
                )
            )
        else:
            said_yes = [r.arm for r in arms if r.qualifies]
            probe = (
                f"the probe qualified {', '.join(said_yes)} (it must not)"
                if said_yes
                else "the probe qualified no arm, as it must"
            )
            pilot = (
                f"the pilot resolved a gain on {', '.join(gained)} (it must not)"
                if gained
                else "the pilot resolved no gain, as it must not"
            )
            lines.append(f"Negative control {design}: {probe}; {pilot}.")
        if unmoved:
            lines[-1] += (
                f" The pilot did not move {', '.join(unmoved)}, so the held-out change there is the draws' "
                'luck, not learning ("not tested"; left out of the rank correlation).'
            )
    return lines


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}g}"


def _answer(study: Study, primary: RankCorrelation) -> str:
    if primary.rho is None:
        return (
            f"Not answered: {primary.n} arm(s) whose pilot moved the policy, with a {study.predictor} read, "
            "leave no ordering to compare (it needs three arms and neither column constant)."
        )
    interval = (
        f"{primary.confidence:.0%} interval {_fmt(primary.ci_low)} to {_fmt(primary.ci_high)}"
        if primary.ci_low is not None
        else "no interval"
    )
    head = (
        f"Spearman's rho of {study.predictor} against the held-out gain is {primary.rho:+.2f} over "
        f"{primary.n} arms ({interval})"
    )
    if primary.ci_low is not None and primary.ci_low > 0:
        return f"Yes, the probe's ordering matches the gains': {head}, above zero."
    if primary.ci_high is not None and primary.ci_high < 0:
        return f"No, the probe's ordering runs against the gains': {head}, below zero."
    return (
        f"Not shown: {head}, which holds zero; with {primary.n} arms the study is underpowered for anything "
        "but a strong ordering."
    )


_LABEL_GAP_PT = 9.0
"""Least vertical distance, in points, between two arm labels of one column (7 pt text, one line)."""


def _label_offsets(points_pt: Sequence[tuple[float, float]], column_pt: float) -> list[float]:
    """Vertical offsets (points) that keep arm labels at least ``_LABEL_GAP_PT`` apart.

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
            placed.append(y if not placed else max(y, placed[-1] + _LABEL_GAP_PT))
        shift = float(np.mean([p - points_pt[i][1] for p, i in zip(placed, column, strict=True)])) / 2.0
        for p, i in zip(placed, column, strict=True):
            offsets[i] = p - shift - points_pt[i][1]
    return offsets


def _figure(study: Study, rows: Sequence[ArmRow], primary: RankCorrelation) -> bytes:
    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    labelled: list[tuple[float, float, str]] = []
    for role in ("subject", "positive_control", "negative_control"):
        group = [r for r in rows if r.role == role and r.reads[study.predictor] is not None]
        if not group:
            continue
        x = np.asarray([float(r.reads[study.predictor]) for r in group])  # type: ignore[arg-type]
        y = np.asarray([r.gain for r in group])
        err = np.vstack([y - [r.gain_ci_low for r in group], [r.gain_ci_high for r in group] - y])
        ax.errorbar(
            x,
            y,
            yerr=err,
            fmt=_MARKERS[role],
            color=_COLOURS[role],
            capsize=3,
            label=f"{_ROLE_TEXT[role]} (n = {len(group)})",
        )
        labelled += [
            (float(xi), float(yi), f"{r.design}/{r.arm}") for r, xi, yi in zip(group, x, y, strict=True)
        ]
    ax.axhline(0.0, color="0.4", linewidth=0.8)
    ax.set_xlabel(f"probe read: {study.predictor}")
    ax.set_ylabel(f"pilot gain: held-out change in {study.gain} [{study.confidence:.0%} CI]")
    rho = "n/a" if primary.rho is None else f"{primary.rho:+.2f}"
    ax.set_title(f"Probe read against pilot gain (Spearman rho {rho}, {primary.n} arms)", fontsize="medium")
    ax.legend(fontsize="small", loc="best")
    fig.canvas.draw()  # fixes the limits and the layout, so that label spacing is measured in points
    points_pt = [tuple(ax.transData.transform((xi, yi)) * 72.0 / fig.dpi) for xi, yi, _ in labelled]
    offsets = _label_offsets(points_pt, column_pt=4.0 * _LABEL_GAP_PT)
    middle = float(np.mean(ax.get_xlim()))
    for (xi, yi, text), dy in zip(labelled, offsets, strict=True):
        moved = abs(dy) > 2.0  # a label pushed off its point is tied to it by a thin line
        side = 1.0 if xi <= middle else -1.0  # labels point inwards, so none runs off the axes
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
    return png_bytes(fig)


def _table(study: Study, rows: Sequence[ArmRow]) -> pa.Table:
    """One row per arm: its identity, each registered read, the probe's and the pilot's verdicts."""
    schema = pa.schema(
        [
            *(pa.field(n, pa.string(), nullable=False) for n in ("design", "role", "arm", "head", "cell")),
            *(pa.field(read, pa.float64()) for read in study.reads),
            pa.field("qualifies", pa.bool_(), nullable=False),
            pa.field("predicted", pa.bool_(), nullable=False),
            *(pa.field(n, pa.float64(), nullable=False) for n in ("gain", "gain_ci_low", "gain_ci_high")),
            pa.field("pilot_verdict", pa.string(), nullable=False),
            pa.field("moved", pa.bool_(), nullable=False),
        ]
    )
    columns = {
        name: [r.reads[name] if name in study.reads else getattr(r, name) for r in rows]
        for name in schema.names
    }
    return pa.Table.from_pydict(columns, schema=schema)


def study_markdown(record: Mapping[str, Any]) -> str:
    """validation.md from validation.json alone (links relative to the study's folder)."""
    study = record["study"]
    reads = study["reads"]
    lines = [
        f"# Does the probe predict? Study {study['name']}",
        "",
        f"**{record['answer']}**",
        "",
        *record["controls"],
        "",
        f"![probe read against pilot gain]({record['figure']})",
        "",
        "## Per arm",
        "",
        "| design | role | arm | cell | "
        + " | ".join(reads)
        + f" | probe | pilot gain in {study['gain']} [CI] | pilot |",
        "|---|---|---|---|" + "---|" * len(reads) + "---|---|---|",
    ]
    for r in record["rows"]:
        values = " | ".join(_fmt(r["reads"][read]) for read in reads)
        probe = "qualifies" if r["qualifies"] else "does not qualify"
        lines.append(
            f"| {r['design']} | {_ROLE_TEXT[r['role']]} | {r['arm']}{' (named)' if r['predicted'] else ''} | "
            f"{r['cell']} | {values} | {probe} | {r['gain']:+.3g} [{r['gain_ci_low']:+.3g}, "
            f"{r['gain_ci_high']:+.3g}] | {r['pilot_verdict']} |"
        )
    lines += [
        "",
        "## Rank correlation of each read with the gain",
        "",
        f"Spearman's rho over arms, {study['confidence']:.0%} percentile bootstrap over arms "
        f"({study['resamples']} resamples, seed {study['seed']}), over the arms whose pilot moved the policy "
        "(an unmoved arm's held-out change is luck, not a gain); resamples with a constant column have no "
        "rank correlation and are left out (counted).",
        "",
        "| read | arms | rho | interval | resamples left out |",
        "|---|---|---|---|---|",
    ]
    for c in record["correlations"]:
        mark = " (the registered predictor)" if c["read"] == study["predictor"] else ""
        interval = "n/a" if c["ci_low"] is None else f"{c['ci_low']:+.2f} to {c['ci_high']:+.2f}"
        rho = "n/a" if c["rho"] is None else f"{c['rho']:+.2f}"
        lines.append(f"| {c['read']}{mark} | {c['n']} | {rho} | {interval} | {c['degenerate_resamples']} |")
    lines += [
        "",
        "## Provenance",
        "",
        f"Study `{study['path']}` sha256 `{study['sha256']}`, locked {study['lock_date']}.",
        "",
        "| member | design sha256 |",
        "|---|---|",
        *[f"| {m['path']} | `{m['sha256']}` |" for m in record["members"]],
        "",
    ]
    return "\n".join(lines)


def build_study_report(
    study: Study,
    decisions: Sequence[str | os.PathLike[str]],
    phase2s: Sequence[str | os.PathLike[str]],
    out_md: str | os.PathLike[str],
    out_json: str | os.PathLike[str],
    out_table: str | os.PathLike[str],
    out_figure: str | os.PathLike[str],
) -> dict[str, Any]:
    """Write the study's page, record, table and figure (each atomically); returns the record."""
    rows = arm_rows(study, decisions, phase2s)
    correlations = _correlations(study, rows)
    primary = next(c for c in correlations if c.read == study.predictor)
    atomic_write_bytes(out_figure, _figure(study, rows, primary))
    with atomic_path(out_table) as tmp:
        pq.write_table(_table(study, rows), tmp, compression="zstd", write_statistics=False)
    page_dir = Path(out_md).parent
    record = {
        "study": {
            "name": study.name,
            "path": relative_to_root(study.path),
            "sha256": study.sha256,
            "lock_date": study.lock_date,
            "description": study.description,
            "predictor": study.predictor,
            "reads": list(study.reads),
            "gain": study.gain,
            "resamples": study.resamples,
            "confidence": study.confidence,
            "seed": study.seed,
        },
        "members": [
            {
                "path": relative_to_root(m.design.path),
                "name": m.design.name,
                "sha256": m.design.sha256,
                "role": m.role,
            }
            for m in study.members
        ],
        "answer": _answer(study, primary),
        "controls": _controls(rows),
        "rows": [asdict(r) for r in rows],
        "correlations": [asdict(c) for c in correlations],
        "figure": Path(os.path.relpath(out_figure, page_dir)).as_posix(),
        "table": Path(os.path.relpath(out_table, page_dir)).as_posix(),
    }
    atomic_write_json(out_json, record)
    atomic_write_text(out_md, study_markdown(record))
    return record
