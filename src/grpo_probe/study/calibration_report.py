"""calibration.md, calibration.json, the learning curves and two parquet tables, from the candidates' records.

The page opens with the answer the rule gives (:mod:`grpo_probe.study.calibration_rule`): per head the
chosen learning rate, or that none passed and gained; when no candidate of any head gained, it says in
one sentence that at this compute there is no benefit for the probe to predict. Then one row per
candidate: its curve's slope with its interval, its largest update KL, its entropy change, both held-out
gains with their intervals, and which criteria it failed. ``calibration_iterations.parquet`` holds one row
per candidate and iteration, ``calibration_candidates.parquet`` one per candidate (pandas and DuckDB read
both); ``learning_curves.png`` draws reward, update KL and entropy per iteration, one panel column per
design and head, one line per learning rate. A calibration that reads the reward's rise on its monitor
seeds (``selection.rises``) adds the monitor's read to each row and the table, and a top row of panels:
the monitored policies' mean reward on the monitor seeds, the same draws at every point; one without a
monitor writes exactly what it wrote before the monitor existed. Every artifact is a function of the
records and the calibration alone, so a rerun writes the same bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from matplotlib.figure import Figure

from grpo_probe.analysis.page.figure_canvas import png_bytes
from grpo_probe.atomic_io import atomic_path, atomic_write_bytes, atomic_write_json, atomic_write_text
from grpo_probe.study.calibration import Calibration
from grpo_probe.study.calibration_rule import CandidateVerdict, HeadChoice, choose, judge

__all__ = ["NO_BENEFIT", "build_calibration_report", "curves_figure", "read_records"]

NO_BENEFIT = "no recipe gains at this compute: there is no benefit for the probe to predict"
"""What the page says when no candidate of any head gained (the rank_by policy's interval above 0)."""

_CURVES = (
    ("mean_reward", "training reward under the sampler"),
    ("update_kl", "update KL(pi_i || pi_i+1)"),
    ("entropy", "entropy (nats)"),
)
_MONITOR = ("monitor", "reward on the monitor seeds\n(same draws at every point)")

_RISES = {
    "monitor_slope": (
        "per monitor seed, the slope of its reward on the iteration (same draws at every monitored "
        "policy); their mean over seeds has its {c} t interval above 0",
        "monitor slope / it [CI]",
    ),
    "monitor_difference": (
        "per monitor seed, the final policy's reward minus the initial one's (same draws); their mean "
        "over seeds has its {c} t interval above 0",
        "monitor final - initial [CI]",
    ),
}
"""Per monitor read of ``selection.rises``: how the page states it, and its table column."""


def read_records(paths: Sequence[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """The candidates' JSON records, in the order given."""
    return [json.loads(Path(p).read_text(encoding="utf-8")) for p in paths]


def curves_figure(calibration: Calibration, records: Sequence[Mapping[str, Any]]) -> bytes:
    """Reward, update KL and entropy per iteration; a column per (design, head), a line per lr."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault((str(r["design"]), str(r["arm"])), []).append(r)
    curves = (_MONITOR, *_CURVES) if calibration.selection.rises != "training_slope" else _CURVES
    fig = Figure(figsize=(3.2 * max(1, len(groups)), 2.4 * len(curves)), layout="constrained")
    axes = fig.subplots(len(curves), max(1, len(groups)), squeeze=False)
    for col, ((design, arm), rs) in enumerate(groups.items()):
        for row, (key, label) in enumerate(curves):
            ax = axes[row][col]
            for r in rs:
                points = r["monitor"]["points"] if key == "monitor" else r["iterations"]
                x = [it["iteration"] for it in points]
                y = [it["mean_reward" if key == "monitor" else key] for it in points]
                ax.plot(x, y, marker=".", lw=1, label=f"lr {r['lr']:g}")
            if key == "update_kl":
                ax.axhline(calibration.selection.max_update_kl, color="0.4", ls="--", lw=0.8)
                ax.set_yscale("log")
            ax.set_ylabel(label, fontsize="small")
            ax.tick_params(labelsize="x-small")
            if row == 0:
                ax.set_title(f"{design}\n{arm}", fontsize="small")
                ax.legend(fontsize="x-small")
            if row == len(curves) - 1:
                ax.set_xlabel("iteration", fontsize="small")
    fig.suptitle(f"{calibration.name}: learning curves (dashed: the registered KL bound)", fontsize="medium")
    return png_bytes(fig)


def _fmt(gain: tuple[float, float, float]) -> str:
    return f"{gain[0]:+.3g} [{gain[1]:+.3g}, {gain[2]:+.3g}]"


def _verdict_row(v: CandidateVerdict, record: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "candidate": v.candidate,
        "design": str(record["design"]),
        "arm": str(record["arm"]),
        "head": v.head,
        "lr": v.lr,
        "reward_slope": None if v.slope is None else v.slope.slope,
        "reward_slope_low": None if v.slope is None else v.slope.low,
        "reward_slope_high": None if v.slope is None else v.slope.high,
        "max_update_kl": v.max_update_kl,
        "entropy_change": v.entropy_change,
        **{f"{p}_gain": v.gains[p][0] for p in sorted(v.gains)},
        **{f"{p}_gain_low": v.gains[p][1] for p in sorted(v.gains)},
        **{f"{p}_gain_high": v.gains[p][2] for p in sorted(v.gains)},
        **(
            {}
            if v.rise is None
            else {
                "monitor_rise": v.rise.estimate,
                "monitor_rise_low": v.rise.low,
                "monitor_rise_high": v.rise.high,
            }
        ),
        "rises": v.rises,
        "small_steps": v.small_steps,
        "entropy_kept": v.entropy_kept,
        "no_fall": v.no_fall,
        "passes": v.passes,
        "gained": v.gained,
    }


def _answer(
    choices: Mapping[str, HeadChoice], verdicts: Sequence[CandidateVerdict], rank_by: str
) -> list[str]:
    lines = []
    if not any(v.gained for v in verdicts):
        lines.append(f"**{NO_BENEFIT[0].upper()}{NO_BENEFIT[1:]}.**")
        lines.append("")
    failures: dict[str, int] = {}
    for v in verdicts:
        for name in v.failed:
            failures[name] = failures.get(name, 0) + 1
    gained = [v.candidate for v in verdicts if v.gained]
    lines.append(
        f"{sum(v.passes for v in verdicts)} of {len(verdicts)} candidates pass the rule; "
        f"{len(gained)} gain ({rank_by} interval above 0)"
        + (f": {', '.join(gained)}" if gained else "")
        + ". Criteria failed: "
        + ("; ".join(f"{name}, {n} of {len(verdicts)}" for name, n in failures.items()) or "none")
        + "."
    )
    lines.append("")
    for head, choice in choices.items():
        if choice.chosen is None:
            passing = [lr for lr, vs in choice.by_lr.items() if all(v.passes for v in vs)]
            why = (
                f"learning rates passing on every arm: {', '.join(f'{lr:g}' for lr in passing)}, "
                f"none of whose {rank_by} gains is resolved above zero"
                if passing
                else "no learning rate passes the rule on every arm"
            )
            lines.append(f"- **{head}**: no recipe chosen ({why}).")
        else:
            lines.append(
                f"- **{head}**: lr {choice.chosen:g} is chosen (it passes on every {head} arm; mean "
                f"{rank_by} gain {choice.mean_gain(choice.chosen, rank_by):+.3g} over them)."
            )
    return lines


def build_calibration_report(
    calibration: Calibration,
    records: Sequence[Mapping[str, Any]],
    out_md: str | os.PathLike[str],
    out_json: str | os.PathLike[str],
    out_iterations: str | os.PathLike[str],
    out_candidates: str | os.PathLike[str],
    out_figure: str | os.PathLike[str],
) -> dict[str, HeadChoice]:
    """Apply the registered rule to ``records`` and write the page, the record, the tables and the figure."""
    selection = calibration.selection
    stale = [r["candidate"] for r in records if r.get("calibration_sha256") != calibration.sha256]
    if stale:
        raise ValueError(
            f"{calibration.path}: records of {', '.join(stale)} were written under another version of the "
            "calibration (calibration_sha256 differs); run them again"
        )
    verdicts = [judge(r, selection) for r in records]
    choices = choose(verdicts, selection)
    rows = [_verdict_row(v, r) for v, r in zip(verdicts, records, strict=True)]
    iteration_rows = [
        {
            "candidate": r["candidate"],
            "design": r["design"],
            "arm": r["arm"],
            "head": r["head"],
            "lr": r["lr"],
            **it,
        }
        for r in records
        for it in r["iterations"]
    ]
    for path, table_rows in ((out_iterations, iteration_rows), (out_candidates, rows)):
        with atomic_path(path) as tmp:
            pq.write_table(pa.Table.from_pylist(table_rows), tmp, compression="zstd", write_statistics=False)
    atomic_write_bytes(out_figure, curves_figure(calibration, records))
    summary = {
        "calibration": {
            "name": calibration.name,
            "path": str(calibration.path),
            "sha256": calibration.sha256,
            "locked_at": calibration.lock_date,
        },
        "any_gain": any(v.gained for v in verdicts),
        "chosen": {head: c.chosen for head, c in choices.items()},
        "candidates": rows,
    }
    atomic_write_json(out_json, summary)
    first = records[0] if records else {}
    rises = f"the reward's OLS slope has its {selection.confidence:.0%} t interval above 0"
    monitored, column = "", ""
    if selection.rises != "training_slope":
        said, title = _RISES[selection.rises]
        monitor = calibration.monitor
        assert monitor is not None
        rises = "the training reward rises, read on the monitor: " + said.format(
            c=f"{selection.confidence:.0%}"
        )
        monitored = (
            f" The monitor: {len(monitor.seeds)} fixed seeds, {monitor.draws} sampler draws each, scored at "
            f"iterations {', '.join(map(str, monitor.iterations(calibration.iterations)))} (the policy each "
            "samples; the last is the final policy), the reward the registered one (progress minus the "
            "guards' penalties). The OLS slope of the iterations' means, each on fresh seeds, is shown "
            "beside it and not read."
        )
        column = f"{title} | "
    lines = [
        f"# Pilot calibration: {calibration.name}",
        "",
        calibration.description,
        "",
        f"Registered in `{calibration.path}` (sha256 {calibration.sha256[:12]}..., locked "
        f"{calibration.lock_date}). Each candidate trains {calibration.iterations} iterations of "
        f"{calibration.seeds_per_iteration} seeds x K = {calibration.rollouts_per_seed} and is scored on "
        f"{len(first.get('eval_seeds', []))} held-out seeds (sampled policy: {calibration.eval_draws} draws "
        f"a seed; anchor: one), the gain in `{calibration.gain}`, final minus initial, paired by seed.",
        "",
        "## The answer",
        "",
        *_answer(choices, verdicts, selection.rank_by),
        "",
        f"The rule: {rises}; every "
        f"update KL is at most {selection.max_update_kl:g}; the entropy's last-quarter minus first-quarter "
        f"mean is at most {selection.entropy_tolerance_nats:g} nats; both held-out gains' intervals lie "
        f"above -{selection.heldout_tolerance:g}. A candidate gains when its {selection.rank_by} gain's "
        "interval is above 0." + monitored,
        "",
        "## Candidates",
        "",
        f"| candidate | head | lr | reward slope / it [CI] | {column}max update KL | entropy change "
        "| sampled gain [CI] | anchor gain [CI] | passes | fails |",
        "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if column else ""),
    ]
    for v in verdicts:
        slope = (
            "n/a" if v.slope is None else f"{v.slope.slope:+.3g} [{v.slope.low:+.3g}, {v.slope.high:+.3g}]"
        )
        rise = "" if v.rise is None else f"{v.rise.estimate:+.3g} [{v.rise.low:+.3g}, {v.rise.high:+.3g}] | "
        lines.append(
            f"| {v.candidate} | {v.head} | {v.lr:g} | {slope} | {rise}{v.max_update_kl:.3g} "
            f"| {v.entropy_change:+.3g} "
            f"| {_fmt(v.gains['sampled'])} | {_fmt(v.gains['anchor'])} | {'yes' if v.passes else 'no'} "
            f"| {'; '.join(v.failed) or '-'} |"
        )
    lines += [
        "",
        f"![learning curves]({Path(out_figure).name})",
        "",
        "Update KL: nats per token (AR) or per action dimension and SDE step (flow), k3 on the iteration's "
        "own rollouts after its update. Entropy: the AR head's token entropy under the sampler; the flow "
        "SDE's "
        "transition entropy per action dimension is set by its noise schedule and is the same at every "
        "iteration.",
        "",
    ]
    atomic_write_text(out_md, "\n".join(lines))
    return choices
