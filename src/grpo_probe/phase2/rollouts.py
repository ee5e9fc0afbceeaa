"""Phase-2 rollouts: K keyed rollouts per training seed, recorded with what an update needs.

Why a table of its own: GRPO's importance ratio divides by the log-probs the rollout recorded, and the
replay oracle compares its recomputation against exactly those. The probe's rollout table keeps one
summed log-prob per replan; this one adds, per replan, the observation, the per-token log-probs (AR) and
the per-step log-probs (flow SDE), for a camera-fed policy the frames it saw (``replan_frames``, beside
the digest the engine records in every table, ``replan_frame_sha256``), and per episode the reward, its
group's std, the advantage and whether dynamic sampling kept the group. The flow head's x_t chain is not
stored (50 x 6 x 11 floats per replan): the trainer regenerates it from the row's keys
(:mod:`grpo_probe.phase2.recompute`) and the oracle checks the log-probs of the regenerated chain against
these recorded ones.

Rows run through the rollout engine unchanged (:func:`grpo_probe.rollout.run_group`, sequential or on a
worker pool), so an iteration's bytes do not depend on the path or the number of workers. The table's
leading columns are the design's environment's record (:func:`phase2_rollout_schema`), so a pilot runs
on any environment; the columns phase 2 reads back are the same in every environment's table.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from grpo_probe.envs.episode_table import read_episode_table, write_episode_table
from grpo_probe.envs.registry import env_spec
from grpo_probe.phase2.recording import RECORDING_FACTORY, RecordedRow
from grpo_probe.phase2.reward import adv_estimator, guard_trips, shaped_rewards
from grpo_probe.policies.protocol import RowKey, SamplingMode
from grpo_probe.prereg import Prereg
from grpo_probe.rollout import PolicySource, RolloutPool, design_job, run_group
from grpo_probe.rollout.job import DEFAULT_ENVS_PER_WORKER
from grpo_probe.rollout.progress import RolloutProgress
from grpo_probe.rollout.results import EpisodeResult
from grpo_probe.rollout.table import ROLLOUT_SCHEMA, result_row, rollout_schema

__all__ = [
    "PHASE2_ROLLOUT_SCHEMA",
    "Episode",
    "Replan",
    "RolloutBatch",
    "episode_rewards",
    "iteration_cell",
    "phase2_rollout_schema",
    "prereg_rollout_schema",
    "read_batch",
    "read_iteration_table",
    "run_iteration",
    "write_iteration_table",
]

FRAME_STRUCT = pa.struct(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("height", pa.int32(), nullable=False),
        pa.field("width", pa.int32(), nullable=False),
        pa.field("pixels", pa.binary(), nullable=False),
    ]
)
"""One frame a camera-fed policy saw: its ``observation.images.<camera>`` key, its size, its uint8 RGB
bytes (row-major [H, W, 3]). Stored, not re-rendered, so an update conditions on the very pixels the
sampler saw; the replay oracle checks them against the engine's per-replan digest."""

PHASE2_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("iteration", pa.int32(), nullable=False),
    pa.field("reward", pa.float64(), nullable=False),
    pa.field("group_std", pa.float64(), nullable=False),
    pa.field("advantage", pa.float64(), nullable=False),
    pa.field("kept", pa.bool_(), nullable=False),
    pa.field("replan_obs", pa.list_(pa.list_(pa.float32())), nullable=False),
    pa.field("replan_token_logprobs", pa.list_(pa.list_(pa.float64()))),
    pa.field("replan_step_logprobs", pa.list_(pa.list_(pa.float64()))),
    pa.field("replan_frames", pa.list_(pa.list_(FRAME_STRUCT))),
)
"""Columns a phase-2 rollout row adds to the probe's rollout table, in order."""


def phase2_rollout_schema(episode_schema: pa.Schema) -> pa.Schema:
    """An environment's phase-2 table: its rollout table's columns, then :data:`PHASE2_COLUMNS`."""
    return pa.schema(list(rollout_schema(episode_schema)) + list(PHASE2_COLUMNS))


PHASE2_ROLLOUT_SCHEMA: pa.Schema = pa.schema(list(ROLLOUT_SCHEMA) + list(PHASE2_COLUMNS))
"""The boat scene's phase-2 table; its phase-2 and rollout columns are every environment's."""


def prereg_rollout_schema(prereg: Prereg) -> pa.Schema:
    """The phase-2 table of the design's environment."""
    return phase2_rollout_schema(env_spec(prereg.env).episode_schema)


def iteration_cell(iteration: int) -> str:
    """The ``cell`` label of an iteration's rows (``phase2-it3``)."""
    return f"phase2-it{iteration}"


@dataclass(frozen=True)
class Replan:
    """One recorded replan of an episode: what the policy saw and the log-probs of what it sampled."""

    replan: int
    obs: np.ndarray
    """float32 [obs_dim]."""
    logprob: float
    """The recorded log-prob of the chunk (sum over tokens, or over SDE steps)."""
    token_ids: np.ndarray | None
    """AR: int64 [n_tokens] (no BOS, no EOS)."""
    token_logprobs: np.ndarray | None
    """AR: float64 [n_tokens]."""
    step_logprobs: np.ndarray | None
    """flow: float64 [steps]."""
    frames: Mapping[str, np.ndarray] | None = None
    """Camera-fed policy: ``observation.images.<camera>`` -> uint8 [H, W, 3], the stored frames."""
    frame_sha256: str | None = None
    """Camera-fed policy: the digest of the frames the engine rendered for this replan
    (:func:`grpo_probe.envs.observation.frame_sha256`), recorded when the policy saw them."""

    def key(self, run_key: int, seed: int, draw: int) -> RowKey:
        """The row key this replan's random draws were keyed by."""
        return RowKey(run_key, seed, self.replan, draw)


@dataclass(frozen=True)
class Episode:
    """One rollout of a group, with its reward, advantage and recorded replans."""

    seed: int
    draw: int
    reward: float
    advantage: float
    kept: bool
    replans: tuple[Replan, ...]


@dataclass(frozen=True)
class RolloutBatch:
    """An iteration's rollouts as the trainer and the replay oracle read them."""

    path: str
    iteration: int
    head: str
    mode: SamplingMode
    run_key: int
    episodes: tuple[Episode, ...]

    @property
    def kept_episodes(self) -> tuple[Episode, ...]:
        """Episodes of groups dynamic sampling kept (the ones the update sees)."""
        return tuple(e for e in self.episodes if e.kept)


def episode_rewards(prereg: Prereg, results: Sequence[EpisodeResult]) -> np.ndarray:
    """The registered reward of each result (in order): progress minus the penalties of the guards tripped.

    The guards are the design's environment's (:class:`grpo_probe.envs.protocol.Guard`), read from each
    record's own columns, with the registered analysis thresholds (:mod:`grpo_probe.phase2.reward`).
    """
    phase2 = prereg.phase2
    if phase2 is None:
        raise ValueError(f"{prereg.path}: the design registers no phase2 section")
    guards = env_spec(prereg.env).guards
    rows = [r.record.to_row() for r in results]
    needed = {"progress_final_cm", *(g.column for g in guards)}
    columns = {name: [row[name] for row in rows] for name in sorted(needed)}
    trips = guard_trips(columns, guards, prereg.analysis.to_dict())
    try:
        return shaped_rewards(columns["progress_final_cm"], trips, phase2.penalties)
    except ValueError as exc:
        raise ValueError(f"{prereg.path}: {exc}") from None


def _list_or_none(values: np.ndarray | None) -> list[float] | None:
    return None if values is None else [float(v) for v in values]


def _frame_entries(frames: Mapping[str, np.ndarray] | None) -> list[dict[str, Any]]:
    """One replan's frames as :data:`FRAME_STRUCT` entries, in key order (the digest's order)."""
    entries = []
    for key in sorted(frames or {}):
        frame = np.ascontiguousarray(frames[key])  # type: ignore[index]
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            found = f"{frame.dtype} {frame.shape}"
            raise ValueError(f"{key}: a recorded frame must be uint8 [H, W, 3], not {found}")
        entries.append(
            {"key": key, "height": frame.shape[0], "width": frame.shape[1], "pixels": frame.tobytes()}
        )
    return entries


def _frames_of(entries: list[dict[str, Any]] | None, at: str) -> dict[str, np.ndarray] | None:
    """The frames of one replan's :data:`FRAME_STRUCT` entries; a size that does not fit is an error."""
    if not entries:
        return None
    frames = {}
    for entry in entries:
        shape = (int(entry["height"]), int(entry["width"]), 3)
        pixels = entry["pixels"]
        if len(pixels) != shape[0] * shape[1] * 3:
            raise ValueError(f"{at}: frame {entry['key']!r} holds {len(pixels)} bytes, not {shape} uint8")
        frames[entry["key"]] = np.frombuffer(pixels, dtype=np.uint8).reshape(shape).copy()
    return frames


def iteration_table(
    prereg: Prereg, arm: str, iteration: int, mode: SamplingMode, results: Sequence[EpisodeResult]
) -> pa.Table:
    """The phase-2 table of one iteration's results: rollout columns, reward, advantage, replay columns."""
    phase2 = prereg.phase2
    if phase2 is None:
        raise ValueError(f"{prereg.path}: the design registers no phase2 section")
    ordered = sorted(results, key=lambda r: r.spec)
    rewards = [float(r) for r in episode_rewards(prereg, ordered)]
    # the estimator the design names (phase2.advantage; by default GRPO's outcome advantage)
    adv = adv_estimator(phase2.advantage)(rewards, [r.spec.seed for r in ordered], phase2)
    rows = []
    for i, result in enumerate(ordered):
        row = result_row(result, cell=iteration_cell(iteration), arm=arm, mode=mode)
        diagnostics = result.diagnostics
        for replan, diag in enumerate(diagnostics):
            if not isinstance(diag, RecordedRow) or diag.obs is None:
                raise ValueError(
                    f"phase-2 rollout seed {result.spec.seed} draw {result.spec.draw} replan {replan}: the "
                    "policy recorded no observation (rollouts must run through the recording policy)"
                )
            if diag.logprob is None:
                raise ValueError(
                    f"phase-2 rollout seed {result.spec.seed} draw {result.spec.draw} replan {replan}: the "
                    f"sampler {mode.kind!r} records no log-prob, so GRPO has no ratio to divide by"
                )
        row.update(
            iteration=iteration,
            reward=rewards[i],
            group_std=float(adv.group_std[i]),
            advantage=float(adv.advantage[i]),
            kept=bool(adv.kept[i]),
            replan_obs=[[float(v) for v in d.obs] for d in diagnostics],  # type: ignore[attr-defined]
            replan_token_logprobs=(
                [_list_or_none(d.token_logprobs) for d in diagnostics] if result.head == "ar" else None
            ),
            replan_step_logprobs=(
                [_list_or_none(d.step_logprobs) for d in diagnostics] if result.head == "flow" else None
            ),
        )
        if any(getattr(d, "frames", None) for d in diagnostics):
            row["replan_frames"] = [_frame_entries(d.frames) for d in diagnostics]  # type: ignore[attr-defined]
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=prereg_rollout_schema(prereg))


def run_iteration(
    prereg: Prereg,
    arm: str,
    checkpoint: str | os.PathLike[str],
    iteration: int,
    *,
    device: str = "cpu",
    workers: int = 0,
    pool: RolloutPool | None = None,
    show_progress: bool = True,
    replicate: int = 0,
) -> pa.Table:
    """Run iteration ``iteration``'s groups with the policy in ``checkpoint``; returns its table.

    ``replicate``: which replicate's training seeds (``phase2.replicates``; 0, the stage's own, by default).
    """
    phase2 = prereg.phase2
    if phase2 is None:
        raise ValueError(f"{prereg.path}: the design registers no phase2 section")
    head = prereg.arms[arm].head
    mode = phase2.recipe(head).mode
    source = PolicySource(checkpoint=str(checkpoint), factory=RECORDING_FACTORY, device=device)
    seeds = phase2.iteration_seeds(iteration, replicate)
    job = design_job(prereg, arm, iteration_cell(iteration), source, mode, seeds, phase2.rollouts_per_seed)
    progress = RolloutProgress(len(job.episodes()), job.label, enabled=show_progress)
    try:
        results = run_group(
            job, workers=workers, pool=pool, envs_per_worker=DEFAULT_ENVS_PER_WORKER, progress=progress
        )
    finally:
        progress.close()
    return iteration_table(prereg, arm, iteration, mode, results)


def write_iteration_table(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Write an iteration's table atomically (fixed parquet options: same rows, same bytes)."""
    tail = pa.schema(list(table.schema)[-len(PHASE2_COLUMNS) :])
    if not tail.equals(pa.schema(list(PHASE2_COLUMNS))):
        raise ValueError(f"{path}: not a phase-2 rollout table (its last columns are not the phase-2 ones)")
    write_episode_table(path, table, schema=table.schema)


def read_iteration_table(path: str | os.PathLike[str], schema: pa.Schema) -> pa.Table:
    """An iteration's whole table, checked against ``schema`` (:func:`prereg_rollout_schema`)."""
    return read_episode_table(path, schema)


_BATCH_COLUMNS = (
    "seed",
    "head",
    "mode",
    "temperature",
    "sde_a",
    "sampler_steps",
    "draw",
    "replan_logprob",
    "replan_token_ids",
    "iteration",
    "reward",
    "advantage",
    "kept",
    "replan_obs",
    "replan_token_logprobs",
    "replan_step_logprobs",
    "replan_frame_sha256",
    "replan_frames",
)
"""The columns :func:`read_batch` reads: the same in every environment's phase-2 table."""


def _array(values: list[float] | None, dtype: type) -> np.ndarray | None:
    return None if values is None else np.asarray(values, dtype=dtype)


def read_batch(path: str | os.PathLike[str], run_key: int) -> RolloutBatch:
    """Read an iteration's table as a :class:`RolloutBatch`; a malformed table is an error naming the file.

    ``run_key`` is the prereg's: the flow chain is regenerated from (run_key, seed, replan, draw).
    """
    table = read_episode_table(path, PHASE2_ROLLOUT_SCHEMA, _BATCH_COLUMNS)
    if table.num_rows == 0:
        raise ValueError(f"{path}: phase-2 rollout table has no rows")
    columns = table.to_pydict()
    heads, modes, iterations = set(columns["head"]), set(columns["mode"]), set(columns["iteration"])
    if len(heads) != 1 or len(modes) != 1 or len(iterations) != 1:
        raise ValueError(f"{path}: rows mix heads {heads}, modes {modes} or iterations {iterations}")
    head = heads.pop()
    first = 0
    mode = SamplingMode(
        kind=columns["mode"][first],
        temperature=columns["temperature"][first],
        sde_a=columns["sde_a"][first],
        steps=int(columns["sampler_steps"][first] or 10),
    )
    episodes = []
    for i in range(table.num_rows):
        at = f"{path}: row {i} (seed {columns['seed'][i]}, draw {columns['draw'][i]})"
        obs, logprobs = columns["replan_obs"][i], columns["replan_logprob"][i]
        token_ids = columns["replan_token_ids"][i] or [None] * len(obs)
        token_logps = columns["replan_token_logprobs"][i] or [None] * len(obs)
        step_logps = columns["replan_step_logprobs"][i] or [None] * len(obs)
        digests = columns["replan_frame_sha256"][i] or [None] * len(obs)
        frames = columns["replan_frames"][i] or [None] * len(obs)
        lengths = {len(obs), len(logprobs), len(token_ids), len(token_logps), len(step_logps)}
        if len(lengths | {len(digests), len(frames)}) != 1:
            raise ValueError(f"{at}: the per-replan columns have different lengths")
        replans = []
        for r in range(len(obs)):
            if logprobs[r] is None:
                raise ValueError(f"{at}: replan_logprob[{r}] is null; GRPO needs the recorded log-prob")
            replans.append(
                Replan(
                    replan=r,
                    obs=np.asarray(obs[r], dtype=np.float32),
                    logprob=float(logprobs[r]),
                    token_ids=_array(token_ids[r], np.int64),
                    token_logprobs=_array(token_logps[r], np.float64),
                    step_logprobs=_array(step_logps[r], np.float64),
                    frames=_frames_of(frames[r], f"{at}, replan {r}"),
                    frame_sha256=digests[r],
                )
            )
        episodes.append(
            Episode(
                seed=int(columns["seed"][i]),
                draw=int(columns["draw"][i]),
                reward=float(columns["reward"][i]),
                advantage=float(columns["advantage"][i]),
                kept=bool(columns["kept"][i]),
                replans=tuple(replans),
            )
        )
    return RolloutBatch(
        path=str(path),
        iteration=int(iterations.pop()),
        head=head,
        mode=mode,
        run_key=run_key,
        episodes=tuple(episodes),
    )
