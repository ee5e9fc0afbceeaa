"""The boat scene as an :class:`~grpo_probe.envs.protocol.Environment`: BoatPushEnv with its spec.

Why a subclass rather than a wrapper: the simulator stays at the bottom of the package (it knows
nothing of specs or registries), and the protocol's members (``reset``, ``execute``, ``done``,
``replan_index``, ``record``) are BoatPushEnv's own, so an episode run through the protocol is the same
code, and the same bytes, as one run on BoatPushEnv directly.
"""

from __future__ import annotations

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.boat.simulator import BoatPushEnv
from grpo_probe.envs.boat.spec import boat_spec
from grpo_probe.envs.protocol import EnvSpec

__all__ = ["BoatPush"]


class BoatPush(BoatPushEnv):
    """The boat-push tabletop as a protocol environment (the simulator,
    :class:`~grpo_probe.envs.boat.simulator.BoatPushEnv`, with its spec)."""

    spec: EnvSpec

    def __init__(self, params: SimParams | None = None, camera: bool = False) -> None:
        super().__init__(params, camera=camera)
        self.spec = boat_spec(self.params)
