"""The prereg's ``replay:`` section: which draws are replayed, how often, under which perturbations.

Why: a group's reward spread is made of two things, the draws' own choices (what GRPO can learn from)
and the scene's sensitivity to tiny differences (chaos: the same choices, replayed, land elsewhere).
Replaying a draw with the same noise keys and a tiny registered perturbation measures the second
(docs/signal-or-chaos.md). The perturbations are part of the design: their kind and size change
every replay read, so they are registered and locked like the cells.

```yaml
replay:
  replays_per_draw: 1            # M: replays of each draw under each perturbation
  seeds: all                     # or a list: the registered seeds whose groups are replayed
  perturbations:
    - {kind: action, std: 1.0e-3}      # keyed Gaussian noise on every executed action (normalized units)
    - {kind: state, scale_m: 1.0e-4}   # the environment's spawn shifted (needs env.perturb_state)
  divergence_m: 1.0e-3           # a replay has diverged once its object is this far from the draw's
  oracle: {seeds: [1000]}        # the unperturbed replay oracle's seeds (all K draws of each)
```

Each draw gets ``replays_per_draw`` replays under each perturbation: M x P replays in all, of which the
within-draw variance is taken (at least two, so that variance has ddof 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["PERTURBATION_KINDS", "Perturbation", "ReplaySection", "parse_replay", "replay_problems"]

PERTURBATION_KINDS: tuple[str, ...] = ("action", "state")
"""``action``: the engine adds keyed noise to executed actions (any environment); ``state``: the
environment shifts its spawn (``perturb_state``, only where its spec offers one)."""

_SCALE_KEY = {"action": "std", "state": "scale_m"}
"""The field holding a perturbation's size, per kind."""


@dataclass(frozen=True)
class Perturbation:
    """One registered perturbation: its kind and its size (``std`` of action noise in the normalized
    action units, or ``scale_m`` of the spawn shift in metres)."""

    kind: Literal["action", "state"]
    scale: float

    def __post_init__(self) -> None:
        if self.kind not in PERTURBATION_KINDS:
            raise ValueError(f"perturbation kind must be one of {PERTURBATION_KINDS}, got {self.kind!r}")
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, float)) or not self.scale >= 0:
            raise ValueError(f"perturbation {self.kind}: its size must be a number >= 0, got {self.scale!r}")

    @property
    def scale_key(self) -> str:
        """``std`` or ``scale_m``: the prereg field of its size."""
        return _SCALE_KEY[self.kind]

    def text(self) -> str:
        """``action noise std 0.001`` or ``state shift 0.0001 m``: how decision.md names it."""
        if self.kind == "action":
            return f"action noise std {self.scale:g}"
        return f"state shift {self.scale:g} m"

    def zeroed(self) -> Perturbation:
        """The same perturbation at size 0: the unperturbed replay oracle's."""
        return Perturbation(self.kind, 0.0)

    def to_dict(self) -> dict[str, Any]:
        """The prereg form, ``{kind: action, std: 0.001}``."""
        return {"kind": self.kind, self.scale_key: self.scale}


@dataclass(frozen=True)
class ReplaySection:
    """The registered replay design (see the module docstring)."""

    replays_per_draw: int
    seeds: tuple[int, ...]
    """The replayed seeds, in registered order (all of them for ``seeds: all``)."""
    perturbations: tuple[Perturbation, ...]
    divergence_m: float
    oracle_seeds: tuple[int, ...]

    @property
    def replays(self) -> int:
        """Replays of each draw: ``replays_per_draw`` x the number of perturbations."""
        return self.replays_per_draw * len(self.perturbations)

    @property
    def needs_state(self) -> bool:
        """True when a perturbation asks the environment to shift its state."""
        return any(p.kind == "state" for p in self.perturbations)

    def to_dict(self) -> dict[str, Any]:
        """The section as parsed, for decision.json; seeds ascending, since which seeds are replayed is
        what a result depends on, never the order they are listed in."""
        return {
            "replays_per_draw": self.replays_per_draw,
            "seeds": sorted(self.seeds),
            "perturbations": [p.to_dict() for p in self.perturbations],
            "divergence_m": self.divergence_m,
            "oracle_seeds": sorted(self.oracle_seeds),
        }


def replay_problems(raw: Mapping[str, Any], registered_seeds: Sequence[int]) -> list[str]:
    """Cross-field problems of a schema-valid ``replay:`` section, each ``"replay.<field>: ..."``."""
    section = raw.get("replay")
    if section is None:
        return []
    problems = []
    seeds = section["seeds"]
    replayed = list(registered_seeds) if seeds == "all" else list(seeds)
    unknown = [s for s in replayed if s not in set(registered_seeds)]
    if unknown:
        problems.append(f"replay.seeds: {unknown} are not registered seeds")
    if len(set(replayed)) != len(replayed):
        problems.append("replay.seeds: a seed is listed twice")
    outside = [s for s in section["oracle"]["seeds"] if s not in set(replayed)]
    if outside:
        problems.append(f"replay.oracle.seeds: {outside} are not replayed seeds (replay.seeds)")
    total = section["replays_per_draw"] * len(section["perturbations"])
    if total < 2:
        problems.append(
            f"replay.replays_per_draw: {section['replays_per_draw']} replay(s) under "
            f"{len(section['perturbations'])} perturbation(s) give {total} replay of each draw; the "
            "within-draw variance needs at least 2"
        )
    return problems


def parse_replay(raw: Mapping[str, Any], registered_seeds: Sequence[int]) -> ReplaySection | None:
    """The typed section of a schema-valid, problem-free design; None when it registers no replays."""
    section = raw.get("replay")
    if section is None:
        return None
    seeds = tuple(registered_seeds) if section["seeds"] == "all" else tuple(section["seeds"])
    return ReplaySection(
        replays_per_draw=int(section["replays_per_draw"]),
        seeds=seeds,
        perturbations=tuple(
            Perturbation(p["kind"], float(p[_SCALE_KEY[p["kind"]]])) for p in section["perturbations"]
        ),
        divergence_m=float(section["divergence_m"]),
        oracle_seeds=tuple(section["oracle"]["seeds"]),
    )
