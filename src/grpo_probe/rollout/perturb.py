"""Which replay an episode is, and the keyed perturbation the engine applies to it.

Why keyed like every other stream: a replay must be reproducible byte for byte, on the sequential and
the parallel path, in a fresh process or not, and a replay must not share its perturbation with any
other. Its noise comes from generators keyed by (run key, stream, seed, draw, replay, perturbation[,
replan]); the policy's own noise keys stay the draw's (``RowKey(run_key, seed, replan, draw)``), so a
replay makes the same choices as its draw until the perturbed physics shows the policy something else.

A perturbation of size zero moves nothing (no noise is added, the spawn is not shifted): that replay
must reproduce its draw's row bit for bit, which is the unperturbed replay oracle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.prereg.replay import Perturbation

__all__ = ["Replay", "action_noise", "state_generator"]


@dataclass(frozen=True)
class Replay:
    """Replay ``index`` (1..M) of every draw of a job under the design's perturbation number ``slot``."""

    index: int
    slot: int
    """The perturbation's position in ``replay.perturbations`` (a key part: two registered perturbations
    of one kind never share noise)."""
    perturbation: Perturbation

    def __post_init__(self) -> None:
        for name in ("index", "slot"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"replay {name} must be an integer >= 0, got {value!r}")

    def label(self) -> str:
        """``replay 1, action noise std 0.001``: for progress lines and reports."""
        return f"replay {self.index}, {self.perturbation.text()}"

    def to_dict(self) -> dict[str, object]:
        """The replay as an oracle report records it."""
        return {"index": self.index, "slot": self.slot, **self.perturbation.to_dict()}


def state_generator(run_key: int, seed: int, draw: int, replay: Replay) -> np.random.Generator:
    """The generator an environment's ``perturb_state`` draws its direction from."""
    return numpy_generator(run_key, tag("replay_state"), seed, draw, replay.index, replay.slot)


def action_noise(
    run_key: int, seed: int, draw: int, replay: Replay, replan: int, shape: tuple[int, int]
) -> np.ndarray:
    """float64 [executed, action_dims] noise of the registered std for one replan's executed actions."""
    rng = numpy_generator(run_key, tag("replay_action"), seed, draw, replay.index, replay.slot, replan)
    return replay.perturbation.scale * rng.standard_normal(shape)
