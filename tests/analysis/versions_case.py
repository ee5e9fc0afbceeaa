"""A design with its amendment history and fabricated tables on which its versions decide differently.

The smoke design's history: version 0 ranked qualifying flow cells by engagement, then by spread;
amendment 1 ranks them by engagement, then by reset strikes, then by competence. With two flow cells
that both engage on every draw, the short-trained arm spreads more but trips reset strikes: version 0
names it, the amended rule names the teacher.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpo_probe.prereg import Prereg, prereg_from_mapping
from grpo_probe.prereg.amendments import undo
from grpo_probe.prereg.canonical import read_yaml

from .rollout_factory import anchor_rows, probe_rows, write_table

REPO = Path(__file__).resolve().parents[2]
SEEDS = (1000, 1001, 1002, 1003, 1004, 1005)
K = 4

TEACHER = [4.0, 5.0, 6.0, 5.0]  # std (ddof 1) 0.8165
SHORT = [0.0, 4.0, 8.0, 4.0]  # std 3.2660
FLAT = [5.0, 5.0, 5.0, 5.0]


def before_replays(raw: dict[str, Any]) -> dict[str, Any]:
    """The smoke design without its replays (these tables have none): the entry that added ``replay:``
    undone and dropped, and so is every later entry whose rule reads the replays (the decomposition's
    interval clauses). Later entries that change other sections (phase 2) stay, so the history stays one
    the versions can be rebuilt from."""
    entries = raw["amendments"]
    found = [i for i, entry in enumerate(entries) if "replay" in entry.get("replaces", {})]
    assert found, "the smoke design has an amendment that registers its replays"
    (index,) = found
    dropped = [
        i
        for i, entry in enumerate(entries)
        if i == index or (i > index and "decision_rule.criteria.signal" in entry.get("replaces", {}))
    ]
    for i in reversed(dropped):
        undo(raw, entries[i], f"prereg/smoke.yaml: amendments[{i}]")
    raw["amendments"] = [entry for i, entry in enumerate(entries) if i not in dropped]
    return raw


def versioned_design(where: str = "prereg/versions_case.yaml", **changes: Any) -> Prereg:
    """The smoke design (its amendments included) on six seeds, K = 4, cells c1 (AR), c3 (teacher),
    c4 (short flow arm); ``changes`` replace top-level sections."""
    raw = before_replays(read_yaml(REPO / "prereg/smoke.yaml"))
    raw["seeds"] = list(SEEDS)
    raw["group_size"] = K
    raw["cells"] = [
        {
            "id": "c1_ar_t1_0",
            "arm": "ar",
            "mode": {"kind": "temperature", "temperature": 1.0},
            "optional": False,
            "enabled": True,
            "description": "AR arm at temperature 1.0",
        },
        {
            "id": "c3_teacher_ode",
            "arm": "flow_teacher",
            "mode": {"kind": "flow_ode", "steps": 10},
            "optional": False,
            "enabled": True,
            "description": "flow teacher, fresh ODE noise",
        },
        {
            "id": "c4_short_ode",
            "arm": "flow_short",
            "mode": {"kind": "flow_ode", "steps": 10},
            "optional": False,
            "enabled": True,
            "description": "short-trained flow arm, fresh ODE noise",
        },
    ]
    raw.update(changes)
    return prereg_from_mapping(raw, where)


def write_tables(
    root: Path, short_strike_seeds: tuple[int, ...] = SEEDS, short_delta_cm: float = 0.0
) -> tuple[dict[str, Path], dict[str, Path]]:
    """Probe tables per cell and anchor tables per arm. The short arm trips a reset strike on draw 0 of
    ``short_strike_seeds``; its draws are shifted by ``short_delta_cm`` (its competence against the
    anchor)."""
    root.mkdir(parents=True, exist_ok=True)
    c1 = probe_rows("c1_ar_t1_0", "ar", "ar", {s: FLAT for s in SEEDS}, contact=True)
    c3 = probe_rows("c3_teacher_ode", "flow_teacher", "flow", {s: TEACHER for s in SEEDS}, contact=True)
    shifted = [p + short_delta_cm for p in SHORT]
    c4 = probe_rows("c4_short_ode", "flow_short", "flow", {s: shifted for s in SEEDS}, contact=True)
    for row in c4:
        if row["seed"] in short_strike_seeds and row["draw"] == 0:
            row["reset_strikes"] = 1
    probes = {
        cell: write_table(root / f"{cell}.parquet", rows)
        for cell, rows in (("c1_ar_t1_0", c1), ("c3_teacher_ode", c3), ("c4_short_ode", c4))
    }
    anchors = {
        arm: write_table(
            root / f"anchor_{arm}.parquet",
            anchor_rows(arm, head, {s: 5.0 for s in SEEDS}, contact=True),
        )
        for arm, head in (("ar", "ar"), ("flow_teacher", "flow"), ("flow_short", "flow"))
    }
    return probes, anchors
