"""Shards by index: registered seeds in any order, split unevenly, give the same reads and outcome.

Why: shards used to be named by a seed range and re-derived by a range filter, so a seed list in any
order other than ascending ran a seed twice and the join failed after the compute was spent. Both
designs here bind the smoke run's trained checkpoints, so the test runs rollouts and analysis only, and
keep only the smoke design's first cell (the AR arm's) and the parallel oracle's AR part: sharding is the
same code for every cell, and every arm costs its own binding, anchors and oracle rollouts in both runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from grpo_probe.prereg import lock_prereg

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SEEDS = [1000, 1001, 1002]
ARM = "ar"
"""The smoke design's first cell's arm, the only arm the two designs keep."""


def _design(workdir: Path, name: str, seeds: list[int]) -> Path:
    raw = yaml.safe_load((workdir / "prereg/smoke.yaml").read_text())
    raw.update(name=name, seeds=seeds, amendments=[])
    raw["cells"] = raw["cells"][:1]
    parallel = raw["oracles"]["parallel"]
    parallel["arms"] = [ARM]
    parallel["modes"] = [m for m in parallel["modes"] if m["kind"] in ("greedy", "temperature")]
    path = workdir / "prereg" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    lock_prereg(path)
    return path


def _bind_trained_arms(workdir: Path, smoke_run: Path) -> Path:
    arms = {
        arm: {
            "source": "checkpoint",
            "path": str(smoke_run / f"results/smoke/arms/{arm}/policy.pt"),
            "adapter": "grpo_probe.policies.checkpoint:load_policy",
        }
        for arm in (ARM,)
    }
    config = workdir / "bound.yaml"
    config.write_text(yaml.safe_dump({"arms": arms}))
    return config


def _without_identity(decision: dict) -> dict:
    """Everything in decision.json but the design's own identity (its name, hash and file paths)."""
    cells = [
        {k: v for k, v in c.items() if k not in ("probe_table", "anchor_table")} for c in decision["cells"]
    ]
    kept = {
        k: v
        for k, v in decision.items()
        if k not in ("prereg", "provenance", "design_files", "cells", "versions")
    }
    # each design is its own version 0 (its hash differs); what the version decides and how firmly must not
    versions = [{k: v[k] for k in ("version", "outcome", "stability")} for v in decision["versions"]]
    return kept | {"cells": cells, "versions": versions}


def test_shuffled_seeds_in_uneven_shards_decide_as_ascending_seeds(
    smoke_run: Path, fresh_copy: Path, snakemake
) -> None:
    config = _bind_trained_arms(fresh_copy, smoke_run)
    _design(fresh_copy, "order_ascending", SEEDS)
    _design(fresh_copy, "order_shuffled", [1002, 1000, 1001])
    decisions = {}
    for name, per_shard in (("order_ascending", 3), ("order_shuffled", 2)):
        proc = snakemake(
            fresh_copy,
            f"results/{name}/decision.json",  # the record compared; not the pages after it
            "--cores",
            "2",
            "--configfile",
            str(config),
            "--config",
            f"prereg=prereg/{name}.yaml",
            f"seeds_per_shard={per_shard}",
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        decisions[name] = json.loads((fresh_copy / f"results/{name}/decision.json").read_text())
    shards = sorted(
        p.name for p in (fresh_copy / "results/order_shuffled/probe/c1_ar_t1_0").glob("*.parquet")
    )
    assert shards == ["shard-0.parquet", "shard-1.parquet"]
    shard_seeds = [
        json.loads(p.read_text())["extra"]["seeds"]
        for p in sorted((fresh_copy / "results/order_shuffled/probe/c1_ar_t1_0").glob("*.manifest.json"))
    ]
    assert shard_seeds == [[1002, 1000], [1001]]
    ascending, shuffled = decisions["order_ascending"], decisions["order_shuffled"]
    assert [s["seed"] for s in shuffled["cells"][0]["seeds"]] == SEEDS
    assert _without_identity(shuffled) == _without_identity(ascending)
