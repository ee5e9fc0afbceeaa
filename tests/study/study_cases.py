"""Member designs, a study over them, and member records shaped as the workflow writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from grpo_probe.prereg import Prereg, load_prereg, lock_prereg
from grpo_probe.prereg.canonical import read_yaml

REPO = Path(__file__).resolve().parents[2]
CELLS = {"ar": "c1_ar_t1_0", "flow_teacher": "c3_teacher_ode"}
"""The smoke design's enabled cells, one per arm."""


def member_design(folder: Path, name: str, pilot: str = "every_arm") -> Path:
    """The smoke design renamed ``name``, its pilot on every arm (or ``pilot``), locked in ``folder``."""
    raw = read_yaml(REPO / "prereg" / "smoke.yaml")
    raw["name"] = name
    raw["phase2"]["pilot"] = pilot
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    lock_prereg(path)
    return path


def study_file(path: Path, members: list[dict[str, Any]], **changes: Any) -> Path:
    raw: dict[str, Any] = {
        "name": "tiny_study",
        "description": "Does the probe's choice std rank the arms as the pilot's gains do?",
        "members": members,
        "predictor": "median_choice_std_cm",
        "reads": [
            "median_group_std_progress_cm",
            "median_choice_std_cm",
            "chaos_fraction",
            "mean_progress_delta_cm",
        ],
        "gain": "progress_final_cm",
        "bootstrap": {"resamples": 400, "confidence": 0.9, "seed": 11},
    }
    raw.update(changes)
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def member_records(
    folder: Path,
    design: Prereg,
    reads: dict[str, dict[str, float]],
    gains: dict[str, tuple[float, float, float]],
) -> tuple[Path, Path]:
    """decision.json and phase2.json of ``design``: per arm, its cell's reads and its held-out gain."""
    folder.mkdir(parents=True, exist_ok=True)
    decision = {
        "prereg": {"name": design.name, "sha256": design.sha256},
        "cells": [
            {
                "id": CELLS[arm],
                "arm": arm,
                "reads": {"sampled_engagement_rate": 0.5, **values},
                "verdict": {"qualifies": values["median_choice_std_cm"] > 1},
            }
            for arm, values in reads.items()
        ],
    }
    phase2 = {
        "design": {"name": design.name, "prereg_sha256": design.sha256},
        "stages": [
            {
                "arm": arm,
                "head": design.arms[arm].head,
                "verdict": "held" if low > 0 else "not shown",
                "movement": {"moved": True},
                "predicted": arm == "flow_teacher",
                "eval": {
                    "changes": [{"read": "progress_final_cm", "delta": d, "ci_low": low, "ci_high": high}],
                    # s_d from the interval's width, as a t interval over 12 seeds would give it
                    "detectable": {
                        "read": "progress_final_cm",
                        "seeds": 12,
                        "diff_sd": (high - low) / (2 * 2.201) * 12**0.5,
                    },
                },
            }
            for arm, (d, low, high) in gains.items()
        ],
    }
    decision_path, phase2_path = folder / "decision.json", folder / "phase2.json"
    decision_path.write_text(json.dumps(decision), encoding="utf-8")
    phase2_path.write_text(json.dumps(phase2), encoding="utf-8")
    return decision_path, phase2_path


def loaded(path: Path) -> Prereg:
    return load_prereg(path)
