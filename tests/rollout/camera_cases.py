"""Camera-fed test cases: a policy that peeks at a key it did not declare, and a boat whose camera moves
by a millimetre in worker processes only (the parallel path), so frames differ between the two paths.

Workers import these by ``module:function``, as they do the keyed test policies.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence

import numpy as np

from grpo_probe.envs.boat.environment import BoatPush
from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.boat.simulator import OBS_DIM
from grpo_probe.policies.protocol import PolicyOutput, RowDiagnostics, RowKey, SamplingMode

CAMERA_SHIFT_M = 0.001


class PeekingPolicy:
    """Declares the state and the overhead frame, then reads ``observation.images.wrist`` as well."""

    head = "flow"
    obs_dim = OBS_DIM
    input_keys = ("observation.state", "observation.images.overhead")

    def act(self, obs: object, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        obs["observation.images.wrist"]  # type: ignore[index]
        return PolicyOutput(np.zeros((len(keys), 50, 6), np.float32), [RowDiagnostics(None) for _ in keys])


def make_peeking_policy(device: str = "cpu") -> PeekingPolicy:
    del device
    return PeekingPolicy()


class MovedCameraBoat(BoatPush):
    """The boat scene; in a worker process its overhead camera sits ``CAMERA_SHIFT_M`` to the side."""

    def __init__(self, params: SimParams) -> None:
        super().__init__(params)
        if multiprocessing.parent_process() is not None:
            self.model.cam_pos[self.model.camera("overhead").id, 0] += CAMERA_SHIFT_M


def moved_camera_boat(replans: int = 2, executed_actions: int = 10) -> MovedCameraBoat:
    """Factory for ``env: {id: rollout.camera_cases:moved_camera_boat, params: {...}}``."""
    return MovedCameraBoat(SimParams(replans=replans, executed_actions=executed_actions))
