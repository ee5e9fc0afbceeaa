"""One group run as every rollout path takes it: an arm's policy, a sampling mode, seeds x K draws.

Why its own module: the sequential path, the worker pool and the oracles all take a :class:`GroupJob`,
and the pool (:mod:`grpo_probe.rollout.pool`) and the runner (:mod:`grpo_probe.rollout.engine`) both
need it without needing each other's code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from grpo_probe.envs.observation import ObservationConfig
from grpo_probe.envs.protocol import EnvSpec
from grpo_probe.envs.registry import EnvConfig, boat_env, env_spec
from grpo_probe.policies.policy_source import PolicySource
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.rollout.perturb import Replay
from grpo_probe.rollout.results import EpisodeSpec

if TYPE_CHECKING:
    from grpo_probe.prereg import Prereg

__all__ = ["DEFAULT_ENVS_PER_WORKER", "GroupJob", "RolloutWorkerError", "design_job"]

DEFAULT_ENVS_PER_WORKER = 8
"""Envs a worker steps in lockstep per task: the probe's K, so one task is one seed's group."""


class RolloutWorkerError(RuntimeError):
    """A worker process died (killed or crashed) before returning its episodes; nothing was written."""


@dataclass(frozen=True)
class GroupJob:
    """One group run: an arm's policy under one sampling mode on ``seeds`` x ``group_size`` episodes."""

    arm: str
    cell: str
    source: PolicySource
    mode: SamplingMode
    seeds: tuple[int, ...]
    group_size: int
    """K: draws 0..K-1 of every seed (draw 0 of a flow cell is the anchor's keyed noise)."""
    run_key: int
    env: EnvConfig = field(default_factory=boat_env)
    """The environment every episode runs in (the design's ``env:``; the boat scene by default)."""
    observation: ObservationConfig = field(default_factory=ObservationConfig)
    """The design's registered task and cameras (``observation:``); none by default."""
    envs_per_worker: int | None = None
    """Envs a worker steps in lockstep per task for this job (one batched policy call per replan); None:
    the pool's ``envs_per_worker``. An AR arm with a registered row block of 20 runs 20 per task, so its
    blocks are full. Never changes a byte: rows are computed alone in their fixed, padded blocks."""
    inputs: tuple[str, ...] | None = None
    """The arm's registered inputs (``arms.<id>.inputs``): a policy declaring any other key fails; None
    lets a policy read whatever the design registers (tests, benchmarks)."""
    replay: Replay | None = None
    """When set, every episode is this replay of its draw: the draw's own noise keys, plus the keyed
    perturbation (:mod:`grpo_probe.rollout.perturb`); None: the draws themselves."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "seeds", tuple(self.seeds))
        for name in ("arm", "cell"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"rollout job: {name} must be a non-empty string, got {value!r}")
        if not self.seeds:
            raise ValueError(f"rollout job {self.cell}/{self.arm}: seeds is empty")
        for i, seed in enumerate(self.seeds):
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise ValueError(
                    f"rollout job {self.cell}/{self.arm}: seeds[{i}] must be an integer >= 0, got {seed!r}"
                )
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"rollout job {self.cell}/{self.arm}: seeds contain duplicates")
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int) or self.group_size < 1:
            raise ValueError(
                f"rollout job {self.cell}/{self.arm}: group_size must be an integer >= 1, "
                f"got {self.group_size!r}"
            )
        if isinstance(self.run_key, bool) or not isinstance(self.run_key, int) or self.run_key < 0:
            raise ValueError(
                f"rollout job {self.cell}/{self.arm}: run_key must be an integer >= 0, got {self.run_key!r}"
            )

    @property
    def label(self) -> str:
        """``cell/arm seeds a-b`` for progress lines and error messages."""
        replay = f" ({self.replay.label()})" if self.replay is not None else ""
        return f"{self.cell}/{self.arm} seeds {min(self.seeds)}-{max(self.seeds)}{replay}"

    def episodes(self) -> list[EpisodeSpec]:
        """Every (seed, draw) of the job, sorted: the order rows are written in."""
        return sorted(EpisodeSpec(int(s), d) for s in self.seeds for d in range(self.group_size))

    def replace(self, **changes: Any) -> GroupJob:
        """A copy with some fields changed (e.g. the mode or the draws of an oracle's reference run)."""
        return dataclasses.replace(self, **changes)

    @property
    def spec(self) -> EnvSpec:
        """The environment's spec (chunk geometry, record columns, guards)."""
        return env_spec(self.env)


def design_job(
    design: Prereg,
    arm: str,
    cell: str,
    source: PolicySource,
    mode: SamplingMode,
    seeds: Sequence[int],
    group_size: int,
) -> GroupJob:
    """A rollout job of the design's registered arm ``arm``: the design's run key, environment and
    observation, the arm's registered inputs, and its row block as the envs a worker steps together.

    Why one function: the probe's shards and oracles, phase 2's iterations, held-out evaluation and
    gradient read, and the pilot calibration all run a registered arm, and each must run it in the
    design's world; a field one path leaves out (the calibration once left out the row block) is a
    difference no test of the other paths sees. The row block as ``envs_per_worker`` changes no byte
    (rows are computed alone in fixed, padded blocks), only how full an AR arm's blocks are. ``source``
    is taken as given: whether it decodes in the arm's row block is the caller's choice of policy.
    """
    registered = design.arms[arm]
    return GroupJob(
        arm=arm,
        cell=cell,
        source=source,
        mode=mode,
        seeds=tuple(seeds),
        group_size=group_size,
        run_key=design.run_key,
        env=design.env,
        observation=design.observation,
        inputs=registered.inputs,
        envs_per_worker=registered.row_block,
    )
