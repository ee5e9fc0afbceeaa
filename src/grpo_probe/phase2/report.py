"""phase2.md and phase2.json: did the probe's prediction hold, and what did GRPO do on the way.

The page opens with the answer: per trained stage, whether the final policy's held-out progress is
higher than the initial policy's (the hull of the paired t and the bootstrap-t intervals of the mean
change over held-out seeds, :func:`grpo_probe.phase2.evaluate.paired_interval`, above zero: the prediction
held; below zero: it did not; holding zero: not shown; unbounded, at too few seeds: not decidable, said
as "not shown"), then the guard trips, and beside them the false-call rate the verdict carries (nominal,
the differences' measured skewness, and the rare jump no test on n seeds can rule out). Two reads qualify
that answer:

- whether the pilot moved the policy the held-out evaluation runs (:mod:`grpo_probe.phase2.movement`:
  the anchor's action change against its floor, with the KL to the initial policy reported beside it). A
  pilot whose anchor did not move is "not tested": its held-out comparison compares the deployed policy
  with itself, whatever its interval or its KL says;
- what the held-out seeds could detect (:func:`grpo_probe.phase2.evaluate.minimum_detectable_change`,
  from the spread of the paired differences), so "not shown" reads as "absent at this power" (the
  interval excludes a change as large as the MDE) or as "below what n seeds can detect".

Then the registered pilot (with the names of its policy loss and advantage estimator), each stage's
loss and estimator as its training job recorded them, its replay oracle, its per-iteration table and
learning curves, its held-out evaluation (every guard the environment declares, with n), and the
provenance of every artifact read. A design whose decision parks, or that registers no phase 2, gets a
page that says nothing was trained and why.

This module builds phase2.json (and the figures) from the artifacts; the page's words are
:mod:`grpo_probe.phase2.page`, rendered from phase2.json alone. Everything here is a pure function of the
artifacts, so an auditor's rerun writes the same bytes; the compute the pilot used (which varies by run)
is in ``phase2.compute.md`` beside it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import matplotlib.style
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from grpo_probe.atomic_io import atomic_write_bytes, atomic_write_json, atomic_write_text
from grpo_probe.compute.accounting import read_benchmarks
from grpo_probe.envs.registry import env_spec
from grpo_probe.parquet_io import read_parquet
from grpo_probe.phase2.evaluate import (
    BOOTSTRAP_RESAMPLES,
    INTERVAL_NAME,
    DetectableChange,
    PairedChange,
    minimum_detectable_change,
    paired_changes,
    skewness,
)
from grpo_probe.phase2.gate import Phase2Plan, Stage
from grpo_probe.phase2.held_out import policy_gains
from grpo_probe.phase2.page import phase2_markdown
from grpo_probe.phase2.paths import StagePaths, stage_paths
from grpo_probe.png_io import png_bytes
from grpo_probe.prereg import Prereg
from grpo_probe.prereg.phase2 import Phase2
from grpo_probe.provenance import read_manifest
from grpo_probe.provenance.manifest import relative_to_root

__all__ = ["build_phase2_report", "phase2_compute_report", "stage_verdict"]

INTERVAL = "paired_bootstrap_t"
"""How phase2.json's held-out intervals (``stages[].eval.interval``) are computed: the hull of the paired t
and the studentised bootstrap intervals of the mean change
(:func:`grpo_probe.phase2.evaluate.paired_interval`); an end the seeds cannot bound is written as null."""

_CURVES: tuple[tuple[str, str], ...] = (
    ("mean_reward", "mean reward (cm)"),
    ("median_group_std", "median group reward std (cm)"),
    ("kept_fraction", "groups kept"),
    ("clip_fraction", "clip fraction"),
    ("approx_kl", "approx KL old -> new"),
    ("guard_rates", "guard trip rates"),
)
"""Panels of the per-iteration figure; ``guard_rates`` draws one line per guard the environment declares."""

_DPI = 100
"""Pixels per inch of phase 2's figures (a 9-inch learning-curve figure is 900 pixels wide)."""


def stage_verdict(
    progress: PairedChange, moved: bool, detectable: DetectableChange, movement_text: str = ""
) -> tuple[str, str, str | None]:
    """(verdict, sentence, detectability) from the paired change in held-out progress.

    ``moved``: whether the pilot moved the anchor the held-out evaluation runs
    (:attr:`grpo_probe.phase2.movement.Movement.moved`); a pilot whose anchor did not move is "not tested"
    whatever the interval says (``movement_text`` says by how much it moved). ``detectability`` words a
    "not shown": ``absent at this power`` when the paired t interval lies inside +-MDE
    (:meth:`~grpo_probe.phase2.evaluate.DetectableChange.resolves`), ``below what n seeds can detect``
    otherwise (None for any other verdict, and when the differences have no spread to size an MDE by), and
    ``not decidable at n seeds`` where the interval is unbounded: the seeds are too few for the test to
    reach the confidence, so "not shown" there claims nothing about the change.
    """
    interval = f"{progress.delta:+.2f} cm, {_end(progress.ci_low)} to {_end(progress.ci_high)}"
    if not moved:
        return (
            "not tested",
            "not tested: the pilot did not move the anchor, the policy the held-out evaluation runs "
            f"({movement_text}), so the held-out comparison ({interval}) compares that policy with itself",
            None,
        )
    if progress.verdict == "up":
        return "held", f"held: held-out progress rose ({interval})", None
    if progress.verdict == "down":
        return "did not hold", f"did not hold: held-out progress fell ({interval})", None
    zero = f"not shown: the interval of the change in held-out progress holds zero ({interval})"
    n = detectable.seeds
    if not progress.decidable:
        return (
            "not shown",
            f"not decidable at {n} seeds at {detectable.confidence:.0%} confidence: the interval of "
            f"the change in held-out progress is unbounded ({interval}), since that many seeds cannot reach "
            "the confidence, so no call, up or down, could be made here",
            f"not decidable at {n} seeds",
        )
    if detectable.mde is None:
        return (
            "not shown",
            f"{zero}; the paired differences in held-out progress have no spread over {n} seed(s) to size "
            "a detectable change by",
            None,
        )
    power = f"{detectable.confidence:.0%} confidence, {detectable.power:.0%} power"
    if detectable.resolves(progress.ci_low, progress.ci_high):
        return (
            "not shown",
            f"{zero} and lies inside +-{detectable.mde:.3g} cm, the smallest change {n} held-out seeds "
            f"detect ({power}): a change that large is absent at this power",
            "absent at this power",
        )
    return (
        "not shown",
        f"{zero}; a true change below what {n} held-out seeds can detect (MDE {detectable.mde:.3g} cm, "
        f"{power}) would look like this",
        f"below what {n} seeds can detect",
    )


def _end(value: float) -> str:
    """An interval end for a sentence: ``+1.97``, or ``unbounded`` where the seeds cannot bound it."""
    return f"{value:+.2f}" if np.isfinite(value) else "unbounded"


def _change_record(change: PairedChange) -> dict[str, Any]:
    """A held-out change as phase2.json holds it: an unbounded end is null (JSON has no infinity)."""
    record = {**asdict(change), "verdict": change.verdict}
    for end in ("ci_low", "ci_high"):
        if not np.isfinite(record[end]):
            record[end] = None
    return record


def _movement_text(movement: dict[str, Any]) -> str:
    """``anchor actions mean |delta a| 0 (floor 0.002); KL to the initial policy 3e-09 nats per token
    (floor 5e-09)``."""
    return (
        f"anchor actions mean |delta a| {movement['action_change']:.2g} (floor "
        f"{movement['action_floor']:.2g}); KL to the initial policy {movement['kl_to_initial']:.2g} "
        f"{movement['kl_unit']} (floor {movement['kl_floor']:.2g})"
    )


def _figure(rows: list[dict[str, Any]], guards: Sequence[str], arm: str) -> bytes:
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(9, 5.5))
        axes = fig.subplots(2, 3)
        x = [r["iteration"] for r in rows]
        for ax, (read, label) in zip(axes.flat, _CURVES, strict=True):
            if read == "guard_rates":
                for guard in guards:
                    ax.plot(x, [r[f"{guard}_rate"] for r in rows], marker="o", label=guard)
                if guards:
                    ax.legend(fontsize=6)
            else:
                y = [np.nan if r[read] is None else r[read] for r in rows]
                ax.plot(x, y, marker="o", color="tab:blue")
            ax.set_title(label, fontsize=9)
            ax.set_xlabel("iteration", fontsize=8)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.tick_params(labelsize=8)
        fig.suptitle(f"GRPO pilot on arm {arm}: per iteration", fontsize=10)
        fig.tight_layout()
        return png_bytes(fig, _DPI)


def _eval_figure(initial: np.ndarray, final: np.ndarray, arm: str) -> bytes:
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(5, 4))
        ax = fig.subplots()
        for a, b in zip(initial, final, strict=True):  # one line per held-out seed: blue up, red down
            ax.plot([0, 1], [a, b], color="tab:blue" if b >= a else "tab:red", alpha=0.6, marker="o")
        ax.set_xticks([0, 1], ["initial", "final"])
        ax.set_ylabel("held-out progress_final_cm")
        ax.set_title(f"arm {arm}: per held-out seed (anchor sampler)", fontsize=9)
        fig.tight_layout()
        return png_bytes(fig, _DPI)


def _stage_record(
    prereg: Prereg, stage: Stage, paths: StagePaths, figures_dir: Path
) -> tuple[dict[str, Any], list[Path]]:
    phase2 = prereg.phase2
    if phase2 is None:
        raise ValueError(f"{prereg.path}: the design registers no phase2 section")
    recipe = phase2.recipe(stage.head)
    oracle = json.loads(Path(paths.oracle_report).read_text())
    movement = json.loads(Path(paths.eval_movement).read_text())
    rows = read_parquet(paths.metrics).to_pylist()
    trained = read_manifest(paths.train_manifest)["extra"]  # the names the training job ran with
    boot = prereg.analysis.bootstrap
    guards = env_spec(prereg.env).guards
    changes = paired_changes(
        paths.eval_initial, paths.eval_final, boot.confidence, guards, prereg.analysis.to_dict()
    )
    by_read = {c.read: c for c in changes}
    initial = read_parquet(paths.eval_initial, ["progress_final_cm"]).column(0).to_numpy()
    final = read_parquet(paths.eval_final, ["progress_final_cm"]).column(0).to_numpy()
    # paired by seed: paired_changes refused tables evaluated on different seeds
    detectable = minimum_detectable_change("progress_final_cm", final - initial, boot.confidence)
    verdict, sentence, detectability = stage_verdict(
        by_read["progress_final_cm"], bool(movement["moved"]), detectable, _movement_text(movement)
    )
    worse_guards = [c.label for c in changes if c.guard and c.verdict == "up"]
    figures = [figures_dir / f"{stage.arm}_iterations.png", figures_dir / f"{stage.arm}_heldout.png"]
    guard_names = [g.name for g in guards]
    atomic_write_bytes(figures[0], _figure(rows, guard_names, stage.arm))
    atomic_write_bytes(figures[1], _eval_figure(initial, final, stage.arm))
    record = {
        "head": stage.head,
        "arm": stage.arm,
        "after": stage.after,
        "recipe": {**asdict(recipe), "mode": asdict(recipe.mode)},
        "policy_loss": trained["policy_loss"],
        "advantage": trained["advantage"],
        "replay_oracle": oracle,
        "guards": guard_names,
        "iterations": rows,
        "final_checkpoint_sha256": rows[-1]["checkpoint_sha256"] if rows else None,
        "movement": movement,
        "eval": {
            "seeds": len(phase2.eval_seeds),
            "sampler": asdict(prereg.arms[stage.arm].anchor),
            "confidence": boot.confidence,
            "interval": INTERVAL,
            "test": INTERVAL_NAME,
            "resamples": BOOTSTRAP_RESAMPLES,
            "skewness": skewness(final - initial),
            "changes": [_change_record(c) for c in changes],
            "detectable": asdict(detectable),
        },
        "verdict": verdict,
        "sentence": sentence,
        "detectability": detectability,
        **_held_out(phase2, paths, boot.confidence),
        "guards_worse": worse_guards,
        "figures": [f.name for f in figures],
    }
    return record, figures


_LATER_DEFAULTS: dict[str, Any] = {"replicates": 1, "sampled_draws": None}
"""Fields of the pilot added after designs were locked, at the value that means what those designs ran:
left out of phase2.json at that value, so a design that does not register them keeps its record's bytes."""


def _unregistered_default(field: str, value: Any) -> bool:
    return field in _LATER_DEFAULTS and value == _LATER_DEFAULTS[field]


def _held_out(phase2: Phase2, paths: StagePaths, confidence: float) -> dict[str, Any]:
    """``held_out``: each scored policy's gains over the replicates (:mod:`grpo_probe.phase2.held_out`),
    for a design that registers replicates or the sampled score; nothing for one that registers neither,
    whose record keeps its bytes."""
    if paths.replicates == 1 and not paths.sampled:
        return {}
    tables = {p: {label: paths.eval_table(p, label) for label in paths.eval_labels} for p in paths.policies}
    draws = {"anchor": 1, "sampled": phase2.sampled_draws or 1}
    gains = policy_gains(tables, draws, confidence)
    return {"held_out": {"replicates": paths.replicates, "gains": [g.to_dict() for g in gains]}}


def _registered(prereg: Prereg) -> dict[str, Any] | None:
    phase2 = prereg.phase2
    if phase2 is None:
        return None
    heads = {head: {**asdict(r), "mode": asdict(r.mode)} for head, r in phase2.heads.items()}
    spec = env_spec(prereg.env)
    numbers = prereg.analysis.to_dict()
    return {
        "environment": spec.id,
        "guards": [
            {"name": g.name, "meaning": g.describe(numbers), "penalty_cm": phase2.penalties.get(g.name)}
            for g in spec.guards
        ],
        **{
            k: v
            for k, v in asdict(phase2).items()
            if k not in ("heads", "train_seeds", "eval_seeds") and not _unregistered_default(k, v)
        },
        "heads": heads,
        "train_seeds": {
            "first": min(phase2.train_seeds),
            "last": max(phase2.train_seeds),
            "count": len(phase2.train_seeds),
        },
        "eval_seeds": {
            "first": min(phase2.eval_seeds),
            "last": max(phase2.eval_seeds),
            "count": len(phase2.eval_seeds),
        },
    }


def _answer(stages: list[dict[str, Any]], reason: str) -> tuple[str, str]:
    """The overall verdict and the page's opening sentence.

    The verdict reads the stages the decision named (``predicted``); a validation design's pilot on every
    arm also trains arms the decision did not name, which the sentence lists after the prediction's.
    """
    if not stages:
        return "not tested", f"Not tested: nothing was trained, because {reason}."
    predicted = [s for s in stages if s.get("predicted", True)]
    others = [s for s in stages if not s.get("predicted", True)]
    if not predicted:
        lines = "; ".join(f"arm {s['arm']} ({s['head']} head): {s['sentence']}" for s in others)
        return (
            "not tested",
            f"Not tested: the decision names no arm, so there is no prediction to test. The pilot on every "
            f"arm: {lines}.",
        )
    verdict, sentence = _predicted_answer(predicted)
    if others:
        also = "; ".join(f"arm {s['arm']} ({s['head']} head): {s['sentence']}" for s in others)
        sentence += f" Also trained, at the same compute (the decision did not name them): {also}."
    return verdict, sentence


def _predicted_answer(stages: list[dict[str, Any]]) -> tuple[str, str]:
    verdicts = [s["verdict"] for s in stages]
    if "did not hold" in verdicts:
        verdict = "did not hold"
    elif all(v == "held" for v in verdicts):
        verdict = "held"
    elif all(v == "not tested" for v in verdicts):
        verdict = "not tested"
    else:
        verdict = "not shown"
    parts = []
    for s in stages:
        guards = (
            f"; guard trips rose: {', '.join(s['guards_worse'])}"
            if s["guards_worse"]
            else "; no guard trip rose"
        )
        parts.append(f"GRPO on arm {s['arm']} ({s['head']} head): {s['sentence']}{guards}")
    return verdict, f"{verdict[0].upper()}{verdict[1:]}. " + ". ".join(parts) + "."


def build_phase2_report(
    prereg: Prereg,
    plan: Phase2Plan,
    decision_json: str | os.PathLike[str],
    phase2_dir: str | os.PathLike[str],
    upstream: Sequence[str | os.PathLike[str]],
    out_md: str | os.PathLike[str],
    out_json: str | os.PathLike[str],
    figures_dir: str | os.PathLike[str],
) -> list[Path]:
    """Write phase2.json, phase2.md rendered from it, and the figures; returns the figure paths."""
    decision = json.loads(Path(decision_json).read_text())
    figures_path = Path(figures_dir)
    figures_path.mkdir(parents=True, exist_ok=True)
    stages: list[dict[str, Any]] = []
    figures: list[Path] = []
    named = {plan.ar_arm, plan.flow_arm} - {None}
    for stage in plan.stages:
        stage_record, stage_figures = _stage_record(
            prereg, stage, stage_paths(prereg.phase2, phase2_dir, stage.arm), figures_path
        )
        stage_record["predicted"] = stage.arm in named
        stages.append(stage_record)
        figures += stage_figures
    verdict, answer = _answer(stages, plan.reason)
    provenance: set[tuple[str, str]] = set()
    for path in upstream:
        for entry in read_manifest(path).get("outputs", []):
            provenance.add((entry["path"], entry["sha256"]))
    outcome = decision.get("outcome", {})
    record = {
        "question": None if prereg.phase2 is None else prereg.phase2.description,
        "design": {
            "name": prereg.name,
            "path": relative_to_root(prereg.path),
            "folder": relative_to_root(Path(out_md).parent),
            "prereg_sha256": prereg.sha256,
            "lock_date": prereg.lock_date,
        },
        "decision": {
            "outcome": plan.outcome,
            "headline": outcome.get("headline", ""),
            "ar_arm": plan.ar_arm,
            "flow_arm": plan.flow_arm,
        },
        "trained": bool(stages),
        "reason": plan.reason,
        "guard_checks": [c.to_dict() for c in plan.guard_checks],
        "prediction": {"verdict": verdict, "text": answer},
        "stages": stages,
        "registered": _registered(prereg),
        "figures_dir": relative_to_root(figures_path),
        "provenance": [{"path": p, "sha256": h} for p, h in sorted(provenance)],
    }
    atomic_write_json(out_json, record)
    atomic_write_text(out_md, phase2_markdown(record, Path(out_md).parent))
    return figures


def phase2_compute_report(
    prereg: Prereg,
    bench_dir: str | os.PathLike[str],
    out_md: str | os.PathLike[str],
    out_json: str | os.PathLike[str],
) -> dict[str, Any]:
    """Wall and CPU time of the phase-2 rules (benchmark files ``phase2_*``) against the registered gate."""
    stages = (
        [s for s in read_benchmarks(bench_dir) if s.stage.startswith("phase2")]
        if Path(bench_dir).is_dir()
        else []
    )
    gate = None if prereg.phase2 is None else prereg.phase2.cpu_hours
    cpu_hours = sum(s.cpu_s for s in stages) / 3600.0
    wall_s = sum(s.wall_s for s in stages)
    record = {
        "prereg": prereg.name,
        "prereg_sha256": prereg.sha256,
        "stages": [asdict(s) for s in stages],
        "total_cpu_hours": cpu_hours,
        "total_wall_s": wall_s,
        "gate_cpu_hours": gate,
        "within_gate": None if gate is None else cpu_hours <= gate,
    }
    lines = [
        f"# Phase-2 compute: {prereg.name}",
        "",
        "What each phase-2 stage used (Snakemake `benchmark:` files) against the pilot's registered gate "
        "(`phase2.compute_gate`). The scientific record is [phase2.md](phase2.md); this page changes from "
        "run to run, that one does not.",
        "",
        "| stage | jobs | wall (s) | CPU (s) | peak RSS (MB) |",
        "|---|---|---|---|---|",
        *[f"| {s.stage} | {s.jobs} | {s.wall_s:.1f} | {s.cpu_s:.1f} | {s.max_rss_mb:.0f} |" for s in stages],
        "",
    ]
    if gate is None:
        lines.append("The design registers no phase 2, so there is no gate.")
    else:
        verdict = "within" if cpu_hours <= gate else "OVER"
        lines.append(
            f"Total {cpu_hours:.4f} CPU-hours ({wall_s:.0f} s of job wall time): {verdict} the registered "
            f"gate of {gate:g} CPU-hours."
        )
    lines.append("")
    atomic_write_text(out_md, "\n".join(lines))
    atomic_write_json(out_json, record)
    return record
