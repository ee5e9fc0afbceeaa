"""The one sampling-mode type: how a head turns its distribution into one action chunk.

Why a module of its own, below both the prereg and the policies: the registered design names the mode
of every cell and oracle, and the policies sample it. One frozen type serves both, and it imports
nothing heavy, so the workflow can read a design without loading torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["HEAD_OF_MODE", "SAMPLING_KINDS", "SamplingMode"]

HEAD_OF_MODE: dict[str, str] = {
    "greedy": "ar",
    "temperature": "ar",
    "flow_ode": "flow",
    "flow_sde": "flow",
    "flow_euler": "flow",
}
"""The head each sampling kind belongs to."""

SAMPLING_KINDS: tuple[str, ...] = tuple(HEAD_OF_MODE)


@dataclass(frozen=True)
class SamplingMode:
    """How a head turns its distribution into one chunk.

    ``greedy`` and ``temperature`` are AR modes (Gumbel-max at ``temperature``); ``flow_ode`` is the
    Heun decode with ``steps`` steps (last step Euler) from keyed noise; ``flow_sde`` is the Flow-GRPO SDE
    sampler with noise scale ``sde_a`` (``sde_a = 0`` reproduces the Euler sampler bit for bit);
    ``flow_euler`` is that deterministic Euler sampler (same grid and keyed noise), the reference of the
    SDE cells' draw-0 oracle.

    ``noise`` switches the Gumbel noise of kind ``temperature`` (default on). With it off, the same
    Gumbel-max code takes argmax(masked_logits / T), which picks greedy's ids (dividing by T > 0 keeps the
    order of the logits) while the recorded log-probs and entropies stay those of softmax(logits / T):
    the AR draw-0 oracle runs a temperature cell this way against the greedy anchor. Only ``temperature``
    takes ``noise=False``; the registered designs never set it.
    """

    kind: Literal["greedy", "temperature", "flow_ode", "flow_sde", "flow_euler"]
    temperature: float | None = None
    sde_a: float | None = None
    steps: int = 10
    noise: bool = True

    def __post_init__(self) -> None:
        if self.kind not in SAMPLING_KINDS:
            raise ValueError(f"SamplingMode.kind must be one of {SAMPLING_KINDS}, got {self.kind!r}")
        if self.kind == "temperature":
            t = self.temperature
            if t is None or isinstance(t, bool) or not isinstance(t, (int, float)):
                raise ValueError(
                    f"SamplingMode.temperature must be a number for kind 'temperature', got {t!r}"
                )
            if not math.isfinite(t) or t <= 0:
                raise ValueError(f"SamplingMode.temperature must be a finite number > 0, got {t!r}")
        elif self.temperature is not None:
            raise ValueError(
                f"SamplingMode.temperature is only allowed for kind 'temperature' (kind={self.kind!r})"
            )
        if self.kind == "flow_sde":
            a = self.sde_a
            if a is None or isinstance(a, bool) or not isinstance(a, (int, float)):
                raise ValueError(f"SamplingMode.sde_a must be a number for kind 'flow_sde', got {a!r}")
            if not math.isfinite(a) or a < 0:
                raise ValueError(f"SamplingMode.sde_a must be a finite number >= 0, got {a!r}")
        elif self.sde_a is not None:
            raise ValueError(f"SamplingMode.sde_a is only allowed for kind 'flow_sde' (kind={self.kind!r})")
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"SamplingMode.steps must be a positive integer, got {self.steps!r}")
        if self.kind == "flow_sde" and self.steps < 2:
            raise ValueError(f"SamplingMode.steps must be >= 2 for kind 'flow_sde', got {self.steps!r}")
        if not isinstance(self.noise, bool):
            raise ValueError(f"SamplingMode.noise must be True or False, got {self.noise!r}")
        if not self.noise and self.kind != "temperature":
            raise ValueError(
                f"SamplingMode.noise=False is only defined for kind 'temperature' (its Gumbel noise), "
                f"got kind {self.kind!r}"
            )

    @property
    def head(self) -> str:
        """The head this mode samples."""
        return HEAD_OF_MODE[self.kind]

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SamplingMode:
        """A mode from its registered mapping (``kind`` plus the fields that kind takes)."""
        return cls(
            kind=values["kind"],
            temperature=values.get("temperature"),
            sde_a=values.get("sde_a"),
            steps=int(values.get("steps", 10)),
        )
