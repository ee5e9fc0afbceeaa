"""Fabricated rollout tables with the full rollout-table column set, for tests of the analysis.

The rollout engine writes these tables for real; here each row is built from a few chosen metrics and
plausible defaults for the rest, so a test states only the numbers its answer depends on.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "ROLLOUT_SCHEMA",
    "anchor_rows",
    "as_prereg",
    "default_prereg",
    "probe_rows",
    "rollout_row",
    "write_table",
]

from grpo_probe.envs.episode_table import EPISODE_SCHEMA
from grpo_probe.prereg import Prereg, prereg_from_mapping
from grpo_probe.prereg.canonical import read_yaml

_SMOKE = Path(__file__).resolve().parents[2] / "prereg" / "smoke.yaml"

_F = pa.float64()
_LF = pa.list_(pa.float64())
ROLLOUT_SCHEMA = pa.schema(
    # nullable everywhere, so a test can plant the null a real writer would refuse
    [field.with_nullable(True) for field in EPISODE_SCHEMA]
    + [
        ("cell", pa.string()),
        ("arm", pa.string()),
        ("head", pa.string()),
        ("mode", pa.string()),
        ("temperature", _F),
        ("sde_a", _F),
        ("sampler_steps", pa.int32()),
        ("draw", pa.int32()),
        ("replan_logprob", _LF),
        ("replan_entropy_mean", _LF),
        ("replan_n_tokens", pa.list_(pa.int32())),
        ("replan_token_ids", pa.list_(pa.list_(pa.int32()))),
    ]
)
"""The rollout-table columns of the simulator API (episode columns plus the rollout columns)."""


def rollout_row(
    cell: str, arm: str, head: str, seed: int, draw: int, progress_cm: float, **overrides: Any
) -> dict:
    """One episode row; ``progress_cm`` fixes progress_final_cm (and a consistent best point and traces)."""
    d0 = 15.0
    ticks = 4
    boat_x = [0.0, 0.001 * draw, 0.002 * draw, 0.003 * draw, progress_cm / 100.0]
    row: dict[str, Any] = {
        "seed": seed,
        "n_ticks": ticks,
        "d0_cm": d0,
        "d_final_cm": d0 - progress_cm,
        "progress_final_cm": progress_cm,
        "best_point_cm": max(progress_cm, 0.0),
        "distance_trace_cm": [d0, d0, d0, d0, d0 - progress_cm],
        "boat_x_trace_m": boat_x,
        "boat_y_trace_m": [0.0, 0.0, 0.001, 0.001, 0.002],
        "pusher_x_trace_m": [-0.1, -0.05, 0.0, 0.01, 0.02],
        "pusher_y_trace_m": [0.1, 0.05, 0.0, 0.0, 0.0],
        "disk_x_m": 0.15,
        "disk_y_m": 0.0,
        "contact": False,
        "first_contact_tick": None,
        "reset_strikes": 0,
        "ended_by_strike_cap": False,
        "final_upright": True,
        "final_tilt_deg": 1.0,
        "final_z_mm": 0.0,
        "knocked_off": False,
        "max_boat_speed_m_s": 0.05,
        "success": False,
        "cell": cell,
        "arm": arm,
        "head": head,
        "mode": "greedy"
        if cell == "anchor" and head == "ar"
        else ("temperature" if head == "ar" else "flow_ode"),
        "temperature": 1.0 if head == "ar" and cell != "anchor" else None,
        "sde_a": None,
        "sampler_steps": None if head == "ar" else 10,
        "draw": draw,
        "replan_logprob": [-3.0, -3.5],
        "replan_entropy_mean": [0.5, 0.7] if head == "ar" else None,
        "replan_n_tokens": [20, 22] if head == "ar" else None,
        "replan_token_ids": [[1, 2], [3, 4]] if head == "ar" else None,
    }
    unknown = set(overrides) - set(row)
    if unknown:
        raise KeyError(f"not rollout-table columns: {sorted(unknown)}")
    row.update(overrides)
    return row


def probe_rows(
    cell: str, arm: str, head: str, progress_by_seed: Mapping[int, Sequence[float]], **overrides: Any
) -> list[dict]:
    """A probe group per seed: draw i of seed s has progress ``progress_by_seed[s][i]``."""
    return [
        rollout_row(cell, arm, head, seed, draw, float(p), **overrides)
        for seed, draws in progress_by_seed.items()
        for draw, p in enumerate(draws)
    ]


def anchor_rows(arm: str, head: str, progress_by_seed: Mapping[int, float], **overrides: Any) -> list[dict]:
    """One anchor row (cell "anchor", draw 0) per seed."""
    return [
        rollout_row("anchor", arm, head, seed, 0, float(p), **overrides)
        for seed, p in progress_by_seed.items()
    ]


def write_table(path: Path, rows: Sequence[Mapping[str, Any]], drop: Sequence[str] = ()) -> Path:
    """Write rows as a parquet rollout table, optionally without some columns."""
    table = pa.Table.from_pylist(list(rows), schema=ROLLOUT_SCHEMA)
    if drop:
        table = table.drop_columns(list(drop))
    pq.write_table(table, path)
    return path


_DEFAULT_PREREG: dict[str, Any] = {
    "arms": {"ar_arm": {"head": "ar"}, "teacher": {"head": "flow"}, "short": {"head": "flow"}},
    "cells": [
        {
            "id": "c1",
            "arm": "ar_arm",
            "mode": {"kind": "temperature", "temperature": 1.0},
            "optional": False,
            "enabled": True,
            "description": "AR arm at T = 1.0",
        },
        {
            "id": "c3",
            "arm": "teacher",
            "mode": {"kind": "flow_ode", "steps": 10},
            "optional": False,
            "enabled": True,
            "description": "teacher, fresh ODE noise",
        },
    ],
    "analysis": {
        "group_std_ddof": 1,
        "signal_bar_cm": 0.25,
        "degenerate_tol_cm": 0.05,
        "competence_tol_cm": 0.5,
        "away_tail_cm": -2.0,
        "swat_speed_m_s": 0.6,
        "bootstrap": {"resamples": 200, "seed": 20260812, "confidence": 0.95},
    },
    "decision_rule": {
        "criteria": {
            "clears_signal_bar": {
                "description": "the median group std of progress reaches the signal bar",
                "all_of": [
                    {
                        "read": "median_group_std_progress_cm",
                        "op": ">=",
                        "threshold": {"analysis": "signal_bar_cm"},
                    }
                ],
            },
            "keeps_anchor_competence": {
                "description": "sampling loses at most the competence tolerance of anchor progress",
                "all_of": [
                    {
                        "read": "mean_progress_delta_cm",
                        "op": ">=",
                        "threshold": {"analysis": "competence_tol_cm", "scale": -1.0},
                    }
                ],
            },
        },
        "qualifies": {
            "ar": ["clears_signal_bar", "keeps_anchor_competence"],
            "flow": ["clears_signal_bar", "keeps_anchor_competence"],
        },
        "arm_choice": {
            "rank_by": [
                {"read": "anchor_engagement_rate", "prefer": "max"},
                {"read": "median_group_std_progress_cm", "prefer": "max"},
            ]
        },
    },
}


def default_prereg() -> dict[str, Any]:
    """A fresh copy of a small prereg: an AR cell c1 and a flow cell c3, the registered default numbers
    (with 200 bootstrap resamples to keep tests fast)."""
    return copy.deepcopy(_DEFAULT_PREREG)


def as_prereg(partial: Mapping[str, Any], where: str = "prereg/test_probe.yaml") -> Prereg:
    """The typed, validated design of a test's partial prereg: what the test states (arms with their
    heads, cells, analysis, decision rule), completed with the smoke design's sections for the rest."""
    raw = read_yaml(_SMOKE)
    raw["name"] = "test_probe"
    raw["amendments"] = []
    raw["arms"] = {}
    for arm, body in partial["arms"].items():
        head = body["head"]
        raw["arms"][arm] = {
            "head": head,
            "anchor": body.get(
                "anchor", {"kind": "greedy"} if head == "ar" else {"kind": "flow_ode", "steps": 10}
            ),
            "checkpoint_sha256": body.get("checkpoint_sha256"),
            "description": body.get("description", f"test arm {arm}"),
        }
    raw["training"]["arms"] = {arm: {"steps": 1, "batch_size": 2, "lr": 0.001} for arm in raw["arms"]}
    raw["cells"] = [
        {"optional": False, "enabled": True, "description": f"test cell {c['id']}"} | dict(c)
        for c in partial["cells"]
    ]
    for cell in raw["cells"]:
        if cell["mode"]["kind"] == "flow_ode":
            cell["mode"] = {"steps": 10} | dict(cell["mode"])
    first = next(iter(raw["arms"]))
    head = raw["arms"][first]["head"]
    raw["oracles"]["parallel"]["arms"] = [first]
    raw["oracles"]["parallel"]["modes"] = [raw["arms"][first]["anchor"]]
    raw["analysis"] = copy.deepcopy(partial["analysis"])
    raw["decision_rule"] = copy.deepcopy(partial["decision_rule"])
    raw.pop("replay", None)  # replays only where the test registers them
    if "replay" in partial:
        raw["replay"] = copy.deepcopy(partial["replay"])
    assert head in ("ar", "flow")
    return prereg_from_mapping(raw, where)
