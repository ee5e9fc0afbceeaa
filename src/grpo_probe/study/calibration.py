"""The registered pilot calibration: can GRPO improve competent arms at all, and at which recipe?

Why a registered file of its own: a validation study asks whether the probe predicts what a pilot gains,
which presumes a pilot that can gain. The calibration answers that first, on scenes outside any study, on
each head's competent (longest-trained) arm: it sweeps each head's learning rate at a fixed compute and
applies a rule, registered beside the sweep, that says which recipe passes (its training reward rises, its
per-iteration policy change stays small, its entropy does not grow, its held-out score does not fall) and
which passing recipe gains most (:mod:`grpo_probe.study.calibration_rule`). The file is locked before it
runs, by the study's own lock (:func:`grpo_probe.study.design.write_file_lock`, a format of its own), so
neither the grid nor the rule can move after the curves are seen.

A candidate is one (design, arm, lr): the design's registered text with its ``phase2:`` section replaced
by the calibration's pilot at that lr, validated as any design is (the prereg schema and its cross-field
rules: seeds disjoint from the probe's and the demos', enough training seeds for every iteration, the
sampler each head trains under). The design's guard penalties are kept: they are the scene's. The
candidate is an in-memory design; the member design and its lock are only read.

A calibration may register a **monitor** (``pilot.monitor``): fixed seeds on which the policy is scored
under the sampler every few iterations, the same draws each time, so that "the training reward rises" can
be read paired by seed (``selection.rises``) rather than across the fresh seeds each iteration trains on,
whose difficulty swamps a trend. Its seeds must stay off every other seed the candidate uses. Without
``selection.rises`` the first reading (the OLS slope of the iterations' means) applies, so a calibration
registered before the monitor existed loads, hashes and runs as it did.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_probe.prereg import Prereg
from grpo_probe.prereg.design import prereg_from_mapping
from grpo_probe.prereg.seeds import expand_seeds
from grpo_probe.study.design import (
    StudyError,
    each_design,
    read_file_lock,
    read_study_file,
    registered_sha256,
    write_file_lock,
)

__all__ = [
    "CALIBRATION_LOCK_FORMAT",
    "RISES",
    "Calibration",
    "Candidate",
    "Monitor",
    "Selection",
    "load_calibration",
    "lock_calibration",
]

CALIBRATION_LOCK_FORMAT = "grpo-probe-calibration-lock/1"

RISES: tuple[str, ...] = ("training_slope", "monitor_slope", "monitor_difference")
"""The registered readings of "the training reward rises" (:mod:`grpo_probe.study.calibration_rule`);
the first is the default, the reading of a calibration that registers none."""


@dataclass(frozen=True)
class Selection:
    """The registered rule a recipe passes by (:mod:`grpo_probe.study.calibration_rule`)."""

    confidence: float
    max_update_kl: float
    entropy_tolerance_nats: float
    heldout_tolerance: float
    rank_by: str
    """``anchor`` or ``sampled``: whose held-out gain ranks the passing recipes."""
    rises: str = "training_slope"
    """How "the training reward rises" is read (one of :data:`RISES`)."""


@dataclass(frozen=True)
class Monitor:
    """The registered monitor: fixed seeds scored under the sampler at fixed iterations, same draws."""

    seeds: tuple[int, ...]
    draws: int
    every: int

    def iterations(self, iterations: int) -> tuple[int, ...]:
        """The monitored policies: before iterations 0, every, 2 every, ..., and the final one (policy
        ``i`` is the one iteration ``i`` samples; policy ``iterations`` is the last update's)."""
        return tuple(sorted({*range(0, iterations, self.every), iterations}))


@dataclass(frozen=True)
class Candidate:
    """One run of the calibration: ``arm`` of ``design`` trained at ``lr`` by the calibration's pilot."""

    design: Prereg
    """The member design with its ``phase2:`` replaced by this candidate's pilot (validated, unlocked)."""
    member: Path
    """The registered design file it was built from (its lock was checked)."""
    arm: str
    head: str
    lr: float

    @property
    def id(self) -> str:
        """``<design>-<arm>-lr<lr>``: the candidate's file names and its row in every table."""
        return f"{self.design.name}-{self.arm}-lr{self.lr:g}".replace("e-0", "e-")


@dataclass(frozen=True)
class Calibration:
    """A locked pilot calibration (``prereg/calibrations/*.yaml``)."""

    path: Path
    sha256: str
    lock_date: str
    name: str
    description: str
    candidates: tuple[Candidate, ...]
    iterations: int
    seeds_per_iteration: int
    rollouts_per_seed: int
    eval_draws: int
    gain: str
    selection: Selection
    resamples: int
    bootstrap_seed: int
    monitor: Monitor | None = None
    """None: the calibration registers no monitor."""

    def folder(self, results: str | os.PathLike[str]) -> Path:
        """Where its records and page go: ``<results>/calibrations/<name>/``."""
        return Path(results) / "calibrations" / self.name

    def candidate(self, candidate_id: str) -> Candidate:
        """The candidate ``candidate_id``; a ``KeyError`` lists the registered ones."""
        for c in self.candidates:
            if c.id == candidate_id:
                return c
        raise KeyError(f"{self.path}: no candidate {candidate_id!r} (candidates: {', '.join(self.ids)})")

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.candidates)


def _raw(path: Path) -> dict[str, Any]:
    return read_study_file(path, "calibration", "calibration.schema.yaml")


def _pilot_section(raw: dict[str, Any], base: dict[str, Any], head: str, lr: float) -> dict[str, Any]:
    """The candidate's ``phase2:``: the calibration's pilot and the head's recipe at ``lr``, with the
    design's guard penalties (the scene's) and compute gate."""
    pilot = raw["pilot"]
    train = expand_seeds(pilot["train_seeds"])
    return {
        "description": f"{raw['name']}: the calibration's pilot of the {head} head at lr {lr:g}",
        "pilot": "every_arm",
        "train_seeds": list(train),
        "eval_seeds": list(expand_seeds(pilot["eval_seeds"])),
        "iterations": pilot["iterations"],
        "seeds_per_iteration": pilot["seeds_per_iteration"],
        "rollouts_per_seed": pilot["rollouts_per_seed"],
        "reward": base["reward"],
        "advantage_epsilon": pilot["advantage_epsilon"],
        "min_group_std": pilot["min_group_std"],
        "epochs": pilot["epochs"],
        "minibatches": pilot["minibatches"],
        "heads": {head: {**raw["heads"][head]["recipe"], "lr": lr}},
        "compute_gate": base["compute_gate"],
    }


def _candidates(path: Path, raw: dict[str, Any]) -> tuple[Candidate, ...]:
    problems: list[str] = []
    candidates: list[Candidate] = []
    for at, entry, member in each_design(path, raw, "candidates", problems):
        base = None if member.raw is None else member.raw.get("phase2")
        if base is None:
            problems.append(
                f"{at}.design: {entry['design']} registers no phase2 section (its guard penalties)"
            )
            continue
        for j, arm in enumerate(entry["arms"]):
            if arm not in member.arms:
                problems.append(f"{at}.arms[{j}]: {entry['design']} has no arm {arm!r}")
                continue
            head = member.arms[arm].head
            if head not in raw["heads"]:
                problems.append(f"{at}.arms[{j}]: {arm!r} is a {head} arm, and heads registers no {head}")
                continue
            for lr in raw["heads"][head]["lrs"]:
                design = {**member.raw, "phase2": _pilot_section(raw, base, head, float(lr))}  # type: ignore[dict-item]
                try:
                    built = prereg_from_mapping(
                        design, f"{at} ({arm} at lr {lr:g}, built on {entry['design']})"
                    )
                except (OSError, ValueError) as exc:
                    problems.append(str(exc))
                    continue
                candidates.append(Candidate(built, Path(entry["design"]), arm, head, float(lr)))
    ids = [c.id for c in candidates]
    if len(set(ids)) != len(ids):
        problems.append(f"{path}: candidates: a (design, arm, lr) is listed twice")
    if problems:
        raise StudyError("\n".join(problems))
    return tuple(candidates)


def _monitor(path: Path, raw: dict[str, Any], candidates: tuple[Candidate, ...]) -> Monitor | None:
    """The registered monitor, its seeds checked off every other seed a candidate uses; a monitor read of
    ``selection.rises`` without a monitor is refused."""
    rises = raw["selection"].get("rises", RISES[0])
    entry = raw["pilot"].get("monitor")
    if entry is None:
        if rises != RISES[0]:
            raise StudyError(
                f"{path}: selection.rises: {rises} reads the monitor, and pilot.monitor is absent"
            )
        return None
    seeds = expand_seeds(entry["seeds"])
    problems = []
    if len(set(seeds)) != len(seeds):
        problems.append(f"{path}: pilot.monitor.seeds: a seed is registered twice")
    if len(seeds) < 2:
        problems.append(f"{path}: pilot.monitor.seeds: a t interval over seeds needs at least 2 seeds")
    pilot = raw["pilot"]
    others = {
        "pilot.train_seeds": expand_seeds(pilot["train_seeds"]),
        "pilot.eval_seeds": expand_seeds(pilot["eval_seeds"]),
    }
    for c in candidates:
        if c.design.raw is not None:
            others[f"{c.member}'s seeds"] = expand_seeds(c.design.raw["seeds"])
            others[f"{c.member}'s training.demos.seeds"] = expand_seeds(
                c.design.raw["training"]["demos"]["seeds"]
            )
    for other, taken in others.items():
        overlap = sorted(set(seeds) & set(taken))
        if overlap:
            shown = ", ".join(map(str, overlap[:5])) + (", ..." if len(overlap) > 5 else "")
            problems.append(f"{path}: pilot.monitor.seeds: overlaps {other} ({shown})")
    if problems:
        raise StudyError("\n".join(dict.fromkeys(problems)))
    return Monitor(seeds=seeds, draws=int(entry["draws"]), every=int(entry["every"]))


def lock_calibration(path: str | os.PathLike[str]) -> Path:
    """Validate the calibration (its schema, every candidate design, its monitor) and write its lock."""
    path = Path(path)
    raw = _raw(path)
    _monitor(path, raw, _candidates(path, raw))
    return write_file_lock(path, registered_sha256(raw, "candidates"), CALIBRATION_LOCK_FORMAT)


def load_calibration(path: str | os.PathLike[str]) -> Calibration:
    """The typed, locked calibration; every problem (schema, lock, candidates) names its file and field."""
    path = Path(path)
    raw = _raw(path)
    sha256 = registered_sha256(raw, "candidates")
    lock_date = read_file_lock(
        path, sha256, CALIBRATION_LOCK_FORMAT, what="calibration", command="study calibrate lock"
    )
    pilot, selection = raw["pilot"], raw["selection"]
    candidates = _candidates(path, raw)
    monitor = _monitor(path, raw, candidates)
    return Calibration(
        path=path,
        sha256=sha256,
        lock_date=lock_date,
        name=str(raw["name"]),
        description=str(raw["description"]),
        candidates=candidates,
        iterations=int(pilot["iterations"]),
        seeds_per_iteration=int(pilot["seeds_per_iteration"]),
        rollouts_per_seed=int(pilot["rollouts_per_seed"]),
        eval_draws=int(pilot["eval_draws"]),
        gain=str(raw["gain"]),
        selection=Selection(
            confidence=float(selection["confidence"]),
            max_update_kl=float(selection["max_update_kl"]),
            entropy_tolerance_nats=float(selection["entropy_tolerance_nats"]),
            heldout_tolerance=float(selection["heldout_tolerance"]),
            rank_by=str(selection["rank_by"]),
            rises=str(selection.get("rises", RISES[0])),
        ),
        resamples=int(raw["bootstrap"]["resamples"]),
        bootstrap_seed=int(raw["bootstrap"]["seed"]),
        monitor=monitor,
    )
