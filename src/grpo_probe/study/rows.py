"""The study's rows: one per arm of each member, read from the members' decision.json and phase2.json.

Why from the members' records and nothing else: decision.json holds each cell's reads as the probe wrote
them, and phase2.json each arm's held-out change with its interval and the spread of its paired
differences, so the study adds no new measurement. A record written for another version of a member's
design, a missing cell, stage or read is an error that names the file.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_probe.study.design import Member, Study

__all__ = ["ArmRow", "arm_rows"]


@dataclass(frozen=True)
class ArmRow:
    """One arm of one member: the probe's reads of the cell that stands for it, and what the pilot gained."""

    design: str
    role: str
    arm: str
    head: str
    cell: str
    reads: dict[str, float | None]
    engagement: float | None
    """The study's engagement read of the arm's cell (share of sampled episodes that moved the object);
    None when the study registers no engagement read."""
    engages: bool
    """Whether the arm counts: its engagement reaches the registered minimum (True without a registered
    engagement read)."""
    qualifies: bool
    """Whether the probe's registered rule qualified the arm's cell (the probe's "go")."""
    predicted: bool
    """Whether the member's decision named this arm for phase 2."""
    gain: float
    gain_ci_low: float
    gain_ci_high: float
    gain_se: float | None
    """Standard error of the gain, s_d / sqrt(n) over the n held-out seeds' paired differences; None when
    the record gives no spread for the gain's read (one seed, or another read than phase 2's MDE read)."""
    pilot_verdict: str
    """The stage's verdict on phase2.md: held, did not hold, not shown or not tested."""
    moved: bool
    replicate_gains: tuple[float, ...] = ()
    """Each pilot replicate's gain of the registered policy (``gain.policy``), whose mean is ``gain``;
    empty for a study that registers the gain as a column alone."""
    policy_gains: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """Every held-out policy the member scored (anchor, sampled) -> its mean gain over the replicates in
    the study's gain read, with its interval and se (:mod:`grpo_probe.phase2.held_out`), so the page shows
    what GRPO trains beside what a lab deploys; empty for a member whose pilot scored the anchor alone."""

    @property
    def gained(self) -> bool:
        """The pilot resolved a gain: its held-out interval lies above zero (phase2.md's "held"; for a gain
        registered by policy, the interval of that policy's mean gain over the replicates)."""
        if self.replicate_gains:
            return self.gain_ci_low > 0
        return self.pilot_verdict == "held"


def _load(path: str | os.PathLike[str], what: str) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: {what} not found") from None
    except ValueError as exc:
        raise ValueError(f"{path}: not a readable {what} ({exc})") from None


def _gain_se(stage: dict[str, Any], gain: str) -> float | None:
    """s_d / sqrt(n), the standard error of a mean of n paired differences, from the stage's MDE record."""
    detectable = stage.get("eval", {}).get("detectable")
    if not detectable or detectable.get("read") != gain or detectable.get("diff_sd") is None:
        return None
    return float(detectable["diff_sd"]) / math.sqrt(int(detectable["seeds"]))


def _policy_gain(
    study: Study, stage: dict[str, Any], phase2_path: str | os.PathLike[str], arm: str
) -> dict[str, Any]:
    """The arm's gain fields: the anchor's change of the stage's own pilot (a gain registered as a column),
    or the registered policy's mean over the replicates with its replicate standard error
    (:mod:`grpo_probe.phase2.held_out`; one replicate: s_d / sqrt(n) of its paired differences)."""
    if study.gain_policy is None:
        change = next((c for c in stage["eval"]["changes"] if c["read"] == study.gain), None)
        if change is None:
            raise ValueError(f"{phase2_path}: arm {arm!r} has no held-out change in {study.gain!r}")
        if change["ci_low"] is None or change["ci_high"] is None:  # the bootstrap-t interval is unbounded
            raise ValueError(
                f"{phase2_path}: stages[{arm}].eval: the held-out change in {study.gain!r} has an unbounded "
                "interval (too few held-out seeds to decide, docs/phase2.md); a study member needs at least "
                "4 held-out seeds"
            )
        return {
            "gain": float(change["delta"]),
            "gain_ci_low": float(change["ci_low"]),
            "gain_ci_high": float(change["ci_high"]),
            "gain_se": _gain_se(stage, study.gain),
        }
    gains = stage.get("held_out", {}).get("gains", [])
    entry = next((g for g in gains if g["policy"] == study.gain_policy and g["read"] == study.gain), None)
    if entry is None:
        raise ValueError(
            f"{phase2_path}: stages[{arm}].held_out: no {study.gain_policy} gain in {study.gain!r} (the "
            "study's gain); the member must register phase2.sampled_draws for a sampled gain, and be rerun"
        )
    replicates = entry["replicates"]
    se = entry["se"]
    if se is None and replicates and replicates[0]["seeds"] >= 2:
        se = float(replicates[0]["diff_sd"]) / math.sqrt(int(replicates[0]["seeds"]))
    return {
        "gain": float(entry["gain"]),
        "gain_ci_low": float(entry["ci_low"]),
        "gain_ci_high": float(entry["ci_high"]),
        "gain_se": None if se is None else float(se),
        "replicate_gains": tuple(float(r["gain"]) for r in replicates),
    }


def _held_out_gains(stage: dict[str, Any], read: str) -> dict[str, dict[str, float | None]]:
    """Each scored policy's mean gain in ``read`` with its interval and se, from the stage's held-out
    block (none for a stage without one)."""
    return {
        g["policy"]: {"gain": g["gain"], "ci_low": g["ci_low"], "ci_high": g["ci_high"], "se": g["se"]}
        for g in stage.get("held_out", {}).get("gains", [])
        if g["read"] == read
    }


def _member_rows(
    study: Study, member: Member, decision_path: str | os.PathLike[str], phase2_path: str | os.PathLike[str]
) -> list[ArmRow]:
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
    needed = list(study.reads) + ([study.engagement.read] if study.engagement is not None else [])
    rows = []
    for arm, cell_id in member.cells.items():
        if cell_id not in cells:
            raise ValueError(f"{decision_path}: no cell {cell_id!r} (the study's cell for arm {arm!r})")
        if arm not in stages:
            raise ValueError(
                f"{phase2_path}: the pilot did not train arm {arm!r} (trained: {', '.join(stages) or 'none'})"
            )
        cell, stage = cells[cell_id], stages[arm]
        missing = [r for r in needed if r not in cell["reads"]]
        if missing:
            raise ValueError(f"{decision_path}: cell {cell_id!r} has no read {', '.join(missing)}")
        gain = _policy_gain(study, stage, phase2_path, arm)
        engagement = None if study.engagement is None else cell["reads"][study.engagement.read]
        engages = study.engagement is None or (
            engagement is not None and float(engagement) >= study.engagement.min
        )
        rows.append(
            ArmRow(
                design=member.design.name,
                role=member.role,
                arm=arm,
                head=stage["head"],
                cell=cell_id,
                reads={r: cell["reads"][r] for r in study.reads},
                engagement=None if engagement is None else float(engagement),
                engages=engages,
                qualifies=bool(cell["verdict"]["qualifies"]),
                predicted=bool(stage.get("predicted", False)),
                **gain,
                pilot_verdict=str(stage["verdict"]),
                moved=bool(stage["movement"]["moved"]),
                policy_gains=_held_out_gains(stage, study.gain),
            )
        )
    return rows


def arm_rows(
    study: Study, decisions: Sequence[str | os.PathLike[str]], phase2s: Sequence[str | os.PathLike[str]]
) -> list[ArmRow]:
    """The study's rows, member by member in the registered order; ``decisions`` and ``phase2s`` are each
    member's decision.json and phase2.json, in the same order."""
    if not len(decisions) == len(phase2s) == len(study.members):
        raise ValueError(
            f"{study.path}: {len(study.members)} members, but {len(decisions)} decision and "
            f"{len(phase2s)} phase-2 records"
        )
    rows: list[ArmRow] = []
    for member, decision_path, phase2_path in zip(study.members, decisions, phase2s, strict=True):
        rows += _member_rows(study, member, decision_path, phase2_path)
    return rows
