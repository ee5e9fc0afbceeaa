"""The check's batch and its ``act`` calls: keyed observations (states, camera frames, task) per row, and
each call made with the global RNGs seeded and its outcome kept, exception included.

Why apart from the checks: every check family calls ``act`` the same way (the same rows, the same global
seeds), so that a difference between two calls is the policy's and never the check's.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from grpo_probe.envs.observation import (
    OBSERVATION_STATE,
    TASK,
    ObservationBatch,
    ObservationConfig,
    StateSplit,
    camera_of,
)
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies.protocol import Policy, RowKey, SamplingMode

__all__ = ["GLOBAL_SEEDS", "Call", "Rows", "call_act", "global_rngs_kept", "observation_rows"]

_FRAME_TAG = tag("check_policy_frame")
GLOBAL_SEEDS = (20240611, 11060242)
"""Seeds the global RNGs are set to around ``act`` calls: the same for a repeat, the other to vary them."""


@dataclass(frozen=True)
class Rows:
    """The check's batch: per row an observation (state, frames, task) and a key.

    Row 1 repeats row 0's observation under another draw (the key test); the others are distinct.
    """

    declared: tuple[str, ...]
    head: str
    values: tuple[dict[str, Any], ...]
    keys: tuple[RowKey, ...]

    def batch(self, rows: Sequence[int]) -> np.ndarray | ObservationBatch:
        """The observation batch of ``rows``, in that order, in the form the engine hands the policy."""
        if self.declared == (OBSERVATION_STATE,):
            return np.stack([self.values[r][OBSERVATION_STATE] for r in rows]).astype(np.float32)
        out: dict[str, Any] = {}
        for key in self.declared:
            if key == TASK:
                out[key] = tuple(self.values[r][TASK] for r in rows)
            else:
                out[key] = np.stack([self.values[r][key] for r in rows])
        return ObservationBatch(out, self.head)


def observation_rows(
    declared: tuple[str, ...],
    head: str,
    states: np.ndarray,
    seeds: Sequence[int],
    observation: ObservationConfig,
    run_key: int,
    batch: int,
    split: StateSplit | None = None,
) -> Rows:
    """``batch`` rows over ``states``: row 0 and row 1 share observation 0 (draws 0 and 1), row r >= 2 reads
    observation r - 1 (draw r). Frames are keyed uint8 noise at the registered camera size. With ``split``
    (LeRobot's keys, for a policy reading them) each packed state becomes its two parts."""
    values = []
    keys = []
    for r in range(batch):
        i = 0 if r < 2 else r - 1
        state = np.asarray(states[i], dtype=np.float32)
        row: dict[str, Any] = (
            {OBSERVATION_STATE: state}
            if split is None
            else {k: v[0] for k, v in split.parts(state[None]).items()}
        )
        for key in declared:
            camera = camera_of(key)
            if camera is not None:
                size = observation.camera(camera)
                rng = numpy_generator(run_key, _FRAME_TAG, int(seeds[i]), sorted(declared).index(key))
                row[key] = rng.integers(0, 256, size=(size.height, size.width, 3), dtype=np.uint8)
            elif key == TASK:
                row[key] = observation.task
        values.append(row)
        keys.append(RowKey(run_key, int(seeds[i]), 0, r))
    return Rows(declared, head, tuple(values), tuple(keys))


@dataclass
class Call:
    """One ``act`` call: its rows, and either the output's parts or the exception it raised."""

    rows: tuple[int, ...]
    actions: Any = None
    diagnostics: Any = None
    error: BaseException | None = None
    output: Any = None


@contextmanager
def global_rngs_kept() -> Iterator[None]:
    """Restore torch's, numpy's and Python's global RNG states on exit (the check seeds them)."""
    import torch

    py_state = random.getstate()
    np_state = np.random.get_state()  # noqa: NPY002 - the global state the check reseeds
    torch_state = torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)  # noqa: NPY002
        torch.set_rng_state(torch_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)


def _seed_globals(seed: int) -> None:
    """Seed the global RNGs a policy might draw from: Python's, numpy's, torch's CPU one, and CUDA's when a
    policy already initialized CUDA (seeding it otherwise would queue a seed for whoever initializes it)."""
    import torch

    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - the check sets the legacy global state on purpose
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def call_act(
    policy: Policy,
    rows: Rows,
    which: Sequence[int],
    mode: SamplingMode,
    global_seed: int,
    draws: Sequence[int] | None = None,
) -> Call:
    """Call ``act`` on rows ``which`` (optionally with other draws) with the global RNGs set to a seed."""
    keys = [rows.keys[r] for r in which]
    if draws is not None:
        keys = [replace(k, draw=d) for k, d in zip(keys, draws, strict=True)]
    _seed_globals(global_seed)
    call = Call(tuple(which))
    try:
        out = policy.act(rows.batch(which), keys, mode)  # type: ignore[arg-type]
    except Exception as exc:  # the checker reports whatever a user's act raises
        call.error = exc
        return call
    call.output = out
    call.actions = getattr(out, "actions", None)
    call.diagnostics = getattr(out, "diagnostics", None)
    return call
