"""The work behind each workflow rule, one function per rule.

Why here and not in the Snakemake scripts: a rule's script only reads ``snakemake.*`` and calls one of
these, so every step can be imported, tested and rerun by an auditor without Snakemake. Each step
(1) loads the prereg, which refuses a design that does not match its lock before any work is done,
(2) does its work through the package, writing every artifact atomically, and (3) writes a manifest
beside its outputs that lists the sha256 of each output and the manifests of its inputs, so the chain
from decision.md back to the prereg can be verified (``grpo-probe verify``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grpo_probe.atomic_io import atomic_write_text
from grpo_probe.prereg import Prereg, load_prereg
from grpo_probe.provenance import file_sha256, write_manifest

__all__ = [
    "anchors",
    "bind_checkpoint",
    "compute",
    "decision",
    "demos",
    "draw0_oracle",
    "join",
    "parallel_oracle",
    "prereg_check",
    "probe_shard",
    "train_reference_arm",
]

PathLike = str | os.PathLike[str]


def _manifest(
    prereg: Prereg,
    manifest: PathLike,
    rule: str,
    outputs: Sequence[PathLike],
    upstream: Sequence[PathLike],
    extra: Mapping[str, Any] | None = None,
) -> None:
    write_manifest(manifest, outputs, upstream, prereg.sha256, rule, extra=extra, prereg_path=prereg.path)


def _write_json(path: PathLike, value: Any) -> None:
    atomic_write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def _group_job(
    prereg: Prereg, arm: str, cell: str, source: Any, mode: Any, seeds: Sequence[int], draws: int
):  # -> GroupJob
    """A rollout job of ``arm`` under the prereg's run key and simulator numbers."""
    from grpo_probe.rollout import GroupJob

    return GroupJob(
        arm=arm,
        cell=cell,
        source=source,
        mode=mode,
        seeds=tuple(seeds),
        draws=draws,
        run_key=prereg.run_key,
        sim=prereg.sim,
    )


def _policy_source(source_json: PathLike, device: str):
    from grpo_probe.rollout import PolicySource

    recipe = json.loads(Path(source_json).read_text())
    return PolicySource(checkpoint=recipe.get("checkpoint"), factory=recipe.get("factory"), device=device)


# -- prereg and training ---------------------------------------------------------------------------------
def prereg_check(prereg_path: PathLike, manifest: PathLike) -> None:
    """The root of the chain: the prereg matches its lock; the manifest records both files."""
    prereg = load_prereg(prereg_path)
    lock = Path(f"{prereg.path}.lock")
    write_manifest(manifest, [prereg.path, lock], [], prereg.sha256, "prereg_check", prereg_path=prereg.path)


def demos(prereg_path: PathLike, upstream: Sequence[PathLike], out: PathLike, manifest: PathLike) -> None:
    """Scripted-expert demonstrations on the registered demo seeds and noise."""
    from grpo_probe.sim.demos import collect_demos

    prereg = load_prereg(prereg_path)
    collected = collect_demos(
        prereg.sim, prereg.training.demo_seeds, prereg.training.demo_noise, prereg.run_key
    )
    collected.save(out)
    print(
        f"demos: {len(collected.obs)} (observation, chunk) pairs from {len(prereg.training.demo_seeds)} "
        "expert episodes",
        flush=True,
    )
    _manifest(prereg, manifest, "demos", [out], upstream, {"pairs": len(collected.obs)})


def train_reference_arm(
    prereg_path: PathLike,
    arm: str,
    demos_npz: PathLike,
    upstream: Sequence[PathLike],
    checkpoint: PathLike,
    source: PathLike,
    manifest: PathLike,
) -> None:
    """Behaviour-clone a reference arm on the demos with its registered budget (deterministic)."""
    import torch

    from grpo_probe.policies.train import train_arm
    from grpo_probe.sim.demos import Demos

    torch.set_num_threads(1)
    prereg = load_prereg(prereg_path)
    if arm not in prereg.arms:
        raise ValueError(f"{prereg.path}: no arm {arm!r} is registered")
    sha = train_arm(arm, Demos.load(demos_npz), checkpoint, prereg.training.arms.get(arm))
    _check_pin(prereg, arm, checkpoint)
    _write_json(source, {"arm": arm, "checkpoint": str(checkpoint), "factory": None})
    _manifest(
        prereg, manifest, "train", [checkpoint, source], upstream, {"arm": arm, "checkpoint_sha256": sha}
    )


def bind_checkpoint(
    prereg_path: PathLike,
    arm: str,
    checkpoint: PathLike,
    adapter: str | None,
    upstream: Sequence[PathLike],
    source: PathLike,
    manifest: PathLike,
) -> None:
    """Bind a user's checkpoint (and adapter) to a registered arm; the prereg may pin its sha256."""
    prereg = load_prereg(prereg_path)
    if arm not in prereg.arms:
        raise ValueError(f"{prereg.path}: no arm {arm!r} is registered")
    if not Path(checkpoint).is_file():
        raise FileNotFoundError(f"{checkpoint}: checkpoint bound to arm {arm!r} not found")
    _check_pin(prereg, arm, checkpoint)
    _write_json(source, {"arm": arm, "checkpoint": str(checkpoint), "factory": adapter})
    # The checkpoint lives outside the results tree, so it is recorded by hash rather than as an output.
    extra = {"arm": arm, "checkpoint": str(checkpoint), "checkpoint_sha256": file_sha256(checkpoint)}
    _manifest(prereg, manifest, "bind_checkpoint", [source], upstream, extra)


def _check_pin(prereg: Prereg, arm: str, checkpoint: PathLike) -> None:
    pinned = prereg.arms[arm].checkpoint_sha256
    if pinned is None:
        return
    found = file_sha256(checkpoint)
    if found != pinned:
        raise ValueError(
            f"{checkpoint}: sha256 {found} differs from arms.{arm}.checkpoint_sha256 {pinned} "
            f"pinned in {prereg.path}"
        )


# -- rollouts --------------------------------------------------------------------------------------------
def parallel_oracle(
    prereg_path: PathLike,
    sources: Mapping[str, PathLike],
    upstream: Sequence[PathLike],
    report: PathLike,
    manifest: PathLike,
    device: str = "cpu",
) -> None:
    """Every registered (arm, mode) pair of the oracle subset, sequential against parallel, bit for bit.

    The worker count is registered with the subset (``oracles.parallel.workers``): the oracle proves the
    parallel path at that width, so it is not a run setting here.
    """
    from grpo_probe.rollout import run_parallel_oracle

    prereg = load_prereg(prereg_path)
    spec = prereg.oracles.parallel
    jobs = []
    for arm in spec.arms:
        head = prereg.arms[arm].head
        for mode in spec.modes:
            if mode.head != head:
                continue
            source = _policy_source(sources[arm], device)
            cell = f"oracle:{arm}:{mode.kind}"
            jobs.append(_group_job(prereg, arm, cell, source, mode, spec.seeds, spec.draws))
    result = run_parallel_oracle(jobs, report, workers=spec.workers)
    _manifest(prereg, manifest, "parallel_oracle", [report], upstream, {"episodes": result.get("episodes")})


def anchors(
    prereg_path: PathLike,
    arm: str,
    source: PathLike,
    upstream: Sequence[PathLike],
    table: PathLike,
    manifest: PathLike,
    workers: int,
    device: str = "cpu",
) -> None:
    """The arm's deterministic rerun on the registered seeds (AR greedy; flow Heun draw 0)."""
    from grpo_probe.rollout import write_shard
    from grpo_probe.rollout.table import ANCHOR_CELL

    prereg = load_prereg(prereg_path)
    mode = prereg.arms[arm].anchor
    job = _group_job(prereg, arm, ANCHOR_CELL, _policy_source(source, device), mode, prereg.seeds, 1)
    write_shard(job, table, workers=workers)
    _manifest(prereg, manifest, "anchors", [table], upstream, {"arm": arm})


def probe_shard(
    prereg_path: PathLike,
    cell: str,
    seeds: Sequence[int],
    source: PathLike,
    upstream: Sequence[PathLike],
    table: PathLike,
    manifest: PathLike,
    workers: int,
    device: str = "cpu",
) -> None:
    """``seeds x K`` stochastic rollouts of one cell; every draw keyed by (seed, replan, draw)."""
    from grpo_probe.rollout import write_shard

    prereg = load_prereg(prereg_path)
    unknown = sorted(set(seeds) - set(prereg.seeds))
    if unknown:
        raise ValueError(f"{prereg.path}: shard seeds {unknown} are not registered seeds")
    spec = prereg.cell(cell)
    policy = _policy_source(source, device)
    job = _group_job(prereg, spec.arm, cell, policy, spec.mode, seeds, prereg.group_size)
    write_shard(job, table, workers=workers)
    _manifest(prereg, manifest, "probe", [table], upstream, {"cell": cell, "seeds": list(seeds)})


def draw0_oracle(
    prereg_path: PathLike,
    cell: str,
    source: PathLike,
    anchor_table: PathLike,
    upstream: Sequence[PathLike],
    report: PathLike,
    manifest: PathLike,
    workers: int,
    device: str = "cpu",
) -> None:
    """The cell's probe path with stochasticity off reproduces its reference rows bit for bit."""
    from grpo_probe.rollout import run_draw0_oracle

    prereg = load_prereg(prereg_path)
    spec = prereg.cell(cell)
    policy = _policy_source(source, device)
    job = _group_job(prereg, spec.arm, cell, policy, spec.mode, prereg.oracles.draw0_seeds, 1)
    run_draw0_oracle(job, report, anchor_table=anchor_table, workers=workers)
    _manifest(prereg, manifest, "draw0_oracle", [report], upstream, {"cell": cell})


# -- analysis --------------------------------------------------------------------------------------------
def join(
    prereg_path: PathLike,
    cell: str,
    shards: Sequence[PathLike],
    anchor_table: PathLike,
    upstream: Sequence[PathLike],
    cell_table: PathLike,
    joined: PathLike,
    manifest: PathLike,
) -> None:
    """Merge a cell's shards, then put each seed's group statistics next to its anchor row."""
    import pyarrow as pa

    from grpo_probe.analysis.anchor_join import check_seeds_match, join_seeds
    from grpo_probe.analysis.group_stats import seed_groups
    from grpo_probe.analysis.tables import read_rollout_table as read_analysed
    from grpo_probe.rollout import merge_shards
    from grpo_probe.sim.episode_table import write_episode_table

    prereg = load_prereg(prereg_path)
    merge_shards(list(shards), cell_table)
    spec = prereg.analysis
    probe, anchor = read_analysed(cell_table), read_analysed(anchor_table)
    check_seeds_match(probe, anchor, cell)
    groups = {g.seed: g for g in seed_groups(probe, spec)}
    rows = []
    for j in join_seeds(probe, anchor):
        g = groups[j.seed]
        rows.append(
            {
                "cell": cell,
                "arm": probe.arm,
                "seed": j.seed,
                "k": g.k,
                "std_progress_cm": g.std_progress_cm,
                "std_best_point_cm": g.std_best_point_cm,
                "nondegenerate": g.nondegenerate,
                "sampled_mean_progress_cm": j.sampled_mean_progress_cm,
                "anchor_progress_cm": j.anchor_progress_cm,
                "progress_delta_cm": j.progress_delta_cm,
                "sampled_engagement_rate": j.sampled_engagement_rate,
                "anchor_engaged": j.anchor_engaged,
            }
        )
    schema = pa.schema(
        [
            ("cell", pa.string()),
            ("arm", pa.string()),
            ("seed", pa.int64()),
            ("k", pa.int32()),
            ("std_progress_cm", pa.float64()),
            ("std_best_point_cm", pa.float64()),
            ("nondegenerate", pa.bool_()),
            ("sampled_mean_progress_cm", pa.float64()),
            ("anchor_progress_cm", pa.float64()),
            ("progress_delta_cm", pa.float64()),
            ("sampled_engagement_rate", pa.float64()),
            ("anchor_engaged", pa.bool_()),
        ]
    )
    write_episode_table(joined, pa.Table.from_pylist(rows, schema=schema), schema=schema)
    _manifest(prereg, manifest, "join", [cell_table, joined], upstream, {"cell": cell})


def decision(
    prereg_path: PathLike,
    cell_tables: Mapping[str, PathLike],
    anchor_tables: Mapping[str, PathLike],
    upstream: Sequence[PathLike],
    out_md: PathLike,
    out_json: PathLike,
    figures_dir: PathLike,
    manifest: PathLike,
) -> None:
    """decision.md, decision.json and the figures, from the joined cells and the anchors."""
    from grpo_probe.analysis import build_decision
    from grpo_probe.provenance import read_manifest

    prereg = load_prereg(prereg_path)
    provenance: list[tuple[str, str]] = []
    for path in upstream:
        for entry in read_manifest(path).get("outputs", []):
            provenance.append((entry["path"], entry["sha256"]))
    build_decision(
        probe_tables=dict(cell_tables),
        anchor_tables=dict(anchor_tables),
        prereg=prereg,
        out_md=out_md,
        out_json=out_json,
        figures_dir=figures_dir,
        provenance=sorted(set(provenance)),
    )
    figures = sorted(Path(figures_dir).rglob("*.png"))
    _manifest(prereg, manifest, "decision", [out_md, out_json, *figures], upstream)


def compute(prereg_path: PathLike, benchmarks: PathLike, out_md: PathLike, out_json: PathLike) -> None:
    """Compute per stage against the registered gate (a report that varies by run, so not in the chain)."""
    from grpo_probe.compute import compute_report

    prereg = load_prereg(prereg_path)
    compute_report(prereg, benchmarks, out_md, out_json)
