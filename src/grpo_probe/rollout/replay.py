"""Replays of a shard's draws under the registered perturbations, written as one table beside the shard.

Why a table of its own: the probe's shard is the draws as sampled; the replay table holds, for each draw
of the replayed seeds, its M replays under each registered perturbation, with the columns the draws have
(so the same analysis reads both) plus which replay it is and the tick at which it split from its draw.
Rows are sorted by (seed, draw, perturbation, replay), the parquet options are the rollout table's, and
the file is written atomically once every replay has finished: same inputs, same bytes, whichever path
or worker ran them.

The divergence tick is measured against the draw's own row (the probe shard): the first tick at which
the replay's object is more than ``replay.divergence_m`` from where the draw's object was at that tick
(in the table plane, from the environment's ``view.object_xy`` traces), or the tick one episode ended
while the other went on. A replay that never leaves its draw has none (null).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from grpo_probe.atomic_io import atomic_path
from grpo_probe.envs.protocol import EnvSpec
from grpo_probe.parquet_io import read_table_file
from grpo_probe.prereg.replay import ReplaySection
from grpo_probe.rollout.perturb import Replay
from grpo_probe.rollout.progress import RolloutProgress
from grpo_probe.rollout.shards import remove_stale_temps
from grpo_probe.rollout.table import read_rollout_table, rollout_schema, table_bytes

if TYPE_CHECKING:  # the engine imports torch: only the functions that run episodes import it
    from grpo_probe.rollout.job import GroupJob
    from grpo_probe.rollout.pool import RolloutPool

__all__ = [
    "REPLAY_COLUMNS",
    "ReplayShard",
    "divergence_tick",
    "read_replay_table",
    "registered_replays",
    "replay_schema",
    "replay_table",
    "write_replay_shard",
]

REPLAY_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("perturbation_index", pa.int32(), nullable=False),
    pa.field("perturbation", pa.string(), nullable=False),
    pa.field("perturbation_scale", pa.float64(), nullable=False),
    pa.field("replay", pa.int32(), nullable=False),
    pa.field("divergence_tick", pa.int32(), nullable=True),
)
"""Columns a replay row adds after the rollout columns: which perturbation (its position in
``replay.perturbations``, its kind and size), which replay of the draw (1..M), and the divergence tick."""

_SORT = ("seed", "draw", "perturbation_index", "replay")


def replay_schema(episode_schema: pa.Schema) -> pa.Schema:
    """An environment's rollout schema, then :data:`REPLAY_COLUMNS`."""
    return pa.schema(list(rollout_schema(episode_schema)) + list(REPLAY_COLUMNS))


def registered_replays(section: ReplaySection, *, first_only: bool = False) -> list[Replay]:
    """Every replay the design registers for each draw: perturbation by perturbation, replays 1..M
    (``first_only``: replay 1 of each perturbation, what the oracles check)."""
    last = 1 if first_only else section.replays_per_draw
    return [
        Replay(index, slot, perturbation)
        for slot, perturbation in enumerate(section.perturbations)
        for index in range(1, last + 1)
    ]


def divergence_tick(
    original: Mapping[str, Any], replay: Mapping[str, Any], spec: EnvSpec, distance_m: float
) -> int | None:
    """The first tick the replay's object is farther than ``distance_m`` from the draw's (see above)."""
    x_col, y_col = spec.view.object_xy
    ox, oy, rx, ry = original[x_col], original[y_col], replay[x_col], replay[y_col]
    common = min(len(ox), len(rx))
    for t in range(common):
        if math.hypot(rx[t] - ox[t], ry[t] - oy[t]) > distance_m:
            return t
    if len(ox) != len(rx):
        return common
    return None


def replay_table(
    job: GroupJob, runs: Sequence[tuple[Replay, Sequence[Any]]], originals: pa.Table, distance_m: float
) -> pa.Table:
    """The replay rows of ``runs`` ((replay, its results) pairs), each with its divergence from the draw
    of the same (seed, draw) in ``originals`` (the probe rows); a draw missing there is an error."""
    from grpo_probe.rollout.engine import group_table

    by_key = {(row["seed"], row["draw"]): row for row in originals.to_pylist()}
    rows = []
    for replay, results in runs:
        table = group_table(job.replace(replay=replay), results)
        for row in table.to_pylist():
            original = by_key.get((row["seed"], row["draw"]))
            if original is None:
                raise ValueError(
                    f"{job.label}: no probe row of seed {row['seed']}, draw {row['draw']} to replay against"
                )
            row.update(
                perturbation_index=replay.slot,
                perturbation=replay.perturbation.kind,
                perturbation_scale=replay.perturbation.scale,
                replay=replay.index,
                divergence_tick=divergence_tick(original, row, job.spec, distance_m),
            )
            rows.append(row)
    rows.sort(key=lambda r: tuple(r[c] for c in _SORT))
    return pa.Table.from_pylist(rows, schema=replay_schema(job.spec.episode_schema))


@dataclass(frozen=True)
class ReplayShard:
    """What a written replay table holds: its path, rows and sha256, and the GPU seconds of its policy
    calls (None: not measured)."""

    path: Path
    rows: int
    sha256: str
    gpu_s: float | None


def write_replay_shard(
    job: GroupJob,
    section: ReplaySection,
    originals_path: str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    workers: int = 0,
    pool: RolloutPool | None = None,
    show_progress: bool = True,
) -> ReplayShard:
    """Replay every draw of ``job`` (its seeds: the shard's replayed seeds, all K draws) under every
    registered replay, and write the replay table atomically at ``path``.

    ``originals_path`` is the shard's probe table; its rows are the draws the replays are measured
    against. The workflow runs it only for shards that hold a replayed seed.
    """
    from grpo_probe.rollout.engine import job_worker_count, run_group
    from grpo_probe.rollout.pool import RolloutPool

    remove_stale_temps(path)
    schema = rollout_schema(job.spec.episode_schema)
    originals = read_rollout_table(originals_path, schema=schema)
    replays = registered_replays(section)
    runs: list[tuple[Replay, Sequence[Any]]] = []
    gpu: list[float | None] = []
    progress = RolloutProgress(
        len(job.episodes()) * len(replays), f"replays {job.label}", enabled=show_progress
    )
    try:
        with ExitStack() as stack:
            active = pool
            started = job_worker_count(job, workers)
            if active is None and started > 0:
                active = stack.enter_context(RolloutPool(started))
            for replay in replays:
                replayed = job.replace(replay=replay)
                results = run_group(replayed, workers=workers, pool=active, progress=progress)
                runs.append((replay, results))
                gpu.extend(r.timing.gpu_s for r in results)
    finally:
        progress.close()
    table = replay_table(job, runs, originals, section.divergence_m)
    data = table_bytes(table)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    gpu_s = None if not gpu or any(g is None for g in gpu) else sum(g or 0.0 for g in gpu)
    return ReplayShard(Path(path), table.num_rows, hashlib.sha256(data).hexdigest(), gpu_s)


def read_replay_table(path: str | os.PathLike[str], episode_schema: pa.Schema) -> pa.Table:
    """A replay table with its environment's schema; a missing or mistyped file is an error naming it."""
    table = read_table_file(path, "replay table")
    expected = replay_schema(episode_schema)
    missing = [f.name for f in REPLAY_COLUMNS if f.name not in table.schema.names]
    if missing:
        raise ValueError(f"{path}: not a replay table (missing column(s) {', '.join(missing)})")
    try:
        return table.select(expected.names).cast(expected)
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"{path}: its columns do not match the environment's replay table ({exc})") from exc
