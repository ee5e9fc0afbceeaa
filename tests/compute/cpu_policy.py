"""A served policy that burns a known amount of CPU in every act() call, as a heavy model would.

Why: compute.md must count a served policy's CPU, which Snakemake's benchmarks never see; a policy whose
cost is known (and spent on the server, never on the client) lets the test hold the counted seconds to
what the operating system counts for the server's process.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from grpo_probe.serve import PolicyOutput
from serve.numpy_policy import NumpyFlowPolicy

BURN_S = 0.4
"""CPU seconds each act() call spends before it answers."""


class BurningPolicy(NumpyFlowPolicy):
    """:class:`NumpyFlowPolicy`'s rows, after spending :data:`BURN_S` CPU seconds of the server's process."""

    def act(self, obs: np.ndarray, keys: Sequence[Any], mode: Any) -> PolicyOutput:
        start = time.process_time()
        spin = 0
        while time.process_time() - start < BURN_S:
            spin += 1
        return super().act(obs, keys, mode)


def make_policy(**_: Any) -> BurningPolicy:
    """The factory ``python -m grpo_probe.serve`` calls."""
    return BurningPolicy()
