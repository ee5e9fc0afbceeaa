"""Can the reward's guard penalties act? Within-group variance of each penalised guard, in the probe's groups.

Why: a guard's penalty is charged once per episode (:func:`grpo_probe.phase2.reward.shaped_rewards`), and
GRPO's advantage is normalised within a group of K rollouts of one spawn, A_i = (r_i - mean(r)) / std(r)
(:func:`grpo_probe.phase2.reward.grpo_outcome_advantages`). In a group where every episode trips guard g
the penalty lowers every reward by the same amount and cancels from every A_i: the update carries nothing
against the trips, and the memo's mitigation (a penalty per guard) cannot act. The same holds where no
episode trips it, harmlessly: there is nothing to act on. The penalty pushes against g only in groups
where some but not all episodes trip it.

The probe has already sampled such groups: the cell that samples the trained arm (:func:`trained_cell`)
holds K draws of every probe seed. Before phase 2 trains an arm, :func:`check_guard_variance` counts, per
penalised guard, the groups in which some but not all draws trip it (``varying``), every draw trips it
(``always``) and none does (``never``). A guard is **saturated** when the varying groups are fewer than
the registered share (``phase2.reward.min_guard_variance_share``) and the groups that trip it in every
episode outnumber those that never trip it: nearly every group then pays the same penalty in every
episode. A guard that almost never trips is not saturated, however little it varies: its penalty has
nothing to correct. Phase 2 then refuses to train the arm, and the plan says so (nothing is trained; or,
for a pilot on every arm, that arm is not).

What it is not: the probe's groups are the probe's K draws of the probe's sampler, not phase 2's K
rollouts of its own; the check reads the cell whose sampler is the one phase 2 trains under when the
design has one, and with fewer draws per group (phase 2's K below the probe's) every-episode trips are
only more likely, so a saturated guard in the probe stays saturated in the pilot.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from grpo_probe.envs.protocol import Guard
from grpo_probe.phase2.reward import guard_trips
from grpo_probe.prereg import Prereg
from grpo_probe.prereg.phase2 import MIN_GUARD_VARIANCE_FIELD

__all__ = ["GuardCheck", "GuardVariance", "check_guard_variance", "guard_variance", "trained_cell"]


@dataclass(frozen=True)
class GuardVariance:
    """One penalised guard in one cell's groups: how many groups vary in it, and how many do not."""

    guard: str
    penalty_cm: float
    groups: int
    varying: int
    """Groups in which some but not all episodes trip the guard: where its penalty reaches the advantage."""
    always: int
    """Groups in which every episode trips it: the penalty is the same constant in every reward."""
    never: int
    """Groups in which no episode trips it."""
    episodes: int
    trips: int

    @property
    def share(self) -> float:
        """varying / groups: the share of groups whose advantage carries the guard's penalty."""
        return self.varying / self.groups

    def saturated(self, min_share: float) -> bool:
        """Fewer varying groups than ``min_share`` of them, and more groups trip it in every episode than
        never trip it: the penalty is the same in nearly every group, and mostly charged."""
        return self.share < min_share and self.always > self.never

    def to_dict(self) -> dict[str, Any]:
        """The counts as phase2.json records them, with the share."""
        return {**asdict(self), "share": self.share}


@dataclass(frozen=True)
class GuardCheck:
    """The guard-variance check of one trained arm, on the probe cell that samples it."""

    arm: str
    cell: str | None
    """The probe cell read; None when no enabled cell samples the arm (nothing to check it on)."""
    min_share: float
    guards: tuple[GuardVariance, ...]

    @property
    def saturated(self) -> tuple[GuardVariance, ...]:
        """The penalised guards whose penalty cannot act (:meth:`GuardVariance.saturated`)."""
        return tuple(g for g in self.guards if g.saturated(self.min_share))

    def refusal(self) -> str | None:
        """Why phase 2 refuses to train the arm, naming the cell, each saturated guard and its counts;
        None when every penalised guard varies enough (or is rarely tripped)."""
        saturated = self.saturated
        if not saturated:
            return None
        parts = [
            f"{g.guard} trips in {g.trips}/{g.episodes} sampled episodes of {self.cell} (in every episode "
            f"of {g.always}/{g.groups} groups, in some but not all of {g.varying}: a share of "
            f"{g.share:.3g} against {MIN_GUARD_VARIANCE_FIELD} {self.min_share:g}): its {g.penalty_cm:g} "
            "cm penalty is the same in every episode of nearly every group, so GRPO's advantage carries "
            "nothing against it"
            for g in saturated
        ]
        return f"phase 2 refuses to train arm {self.arm}: " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The check as plan.json and phase2.json record it."""
        return {
            "arm": self.arm,
            "cell": self.cell,
            "min_share": self.min_share,
            "guards": [g.to_dict() for g in self.guards],
            "refused": self.refusal() is not None,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> GuardCheck:
        """A check as :meth:`to_dict` wrote it."""
        guards = tuple(
            GuardVariance(
                str(g["guard"]),
                float(g["penalty_cm"]),
                *(int(g[k]) for k in ("groups", "varying", "always", "never", "episodes", "trips")),
            )
            for g in raw["guards"]
        )
        return cls(str(raw["arm"]), raw["cell"], float(raw["min_share"]), guards)


def guard_variance(
    seeds: Sequence[int] | NDArray[np.int64],
    trips: Mapping[str, NDArray[np.bool_]],
    penalties: Mapping[str, float],
) -> tuple[GuardVariance, ...]:
    """Per penalised guard (in the order of ``trips``, the environment's), its groups' counts.

    ``seeds``: the seed of each episode (a group is one seed's draws); ``trips``: per guard, whether each
    episode tripped it; ``penalties``: the registered penalties (a guard with none, or with 0 cm, charges
    nothing and is not counted).
    """
    seed = np.asarray(seeds)
    groups, group_of = np.unique(seed, return_inverse=True)
    size = np.bincount(group_of, minlength=groups.size)
    out = []
    for name, tripped in trips.items():
        penalty = float(penalties.get(name, 0.0))
        if penalty <= 0:
            continue
        hits = np.bincount(group_of, weights=np.asarray(tripped, dtype=np.float64), minlength=groups.size)
        always, never = int((hits == size).sum()), int((hits == 0).sum())
        out.append(
            GuardVariance(
                guard=name,
                penalty_cm=penalty,
                groups=int(groups.size),
                varying=int(groups.size) - always - never,
                always=always,
                never=never,
                episodes=int(seed.size),
                trips=int(np.asarray(tripped).sum()),
            )
        )
    return tuple(out)


def trained_cell(prereg: Prereg, arm: str, decision: Mapping[str, Any]) -> str | None:
    """The probe cell whose groups stand for the ones phase 2 trains ``arm`` on.

    Among the enabled cells of ``arm``: the one whose sampler is the head's phase-2 sampler (its groups
    are the pilot's, at the probe's K); else the first of the decision's ranking for the head (the cell
    that named the arm); else the first in registered order. None when no enabled cell samples the arm
    (a pilot on every arm may train an arm only the parallel oracle uses).
    """
    cells = [c for c in prereg.enabled_cells if c.arm == arm]
    if not cells:
        return None
    phase2 = prereg.phase2
    head = prereg.arms[arm].head
    if phase2 is not None and head in phase2.heads:
        for cell in cells:
            if cell.mode == phase2.heads[head].mode:
                return cell.id
    ranking = decision.get("outcome", {}).get("ranking", {}).get(head, [])
    ids = [c.id for c in cells]
    ranked = [cell for cell in ranking if cell in ids]
    return ranked[0] if ranked else ids[0]


def check_guard_variance(
    prereg: Prereg,
    arm: str,
    decision: Mapping[str, Any],
    cell_tables: Mapping[str, str | os.PathLike[str]],
    guards: Sequence[Guard],
) -> GuardCheck:
    """The check of ``arm`` on its probe cell's table (``cell_tables[cell]``, the joined cell table the
    decision read); ``guards``: the environment's declarations. A cell without a table is an error naming
    the cell and the tables given."""
    phase2 = prereg.phase2
    if phase2 is None:
        raise ValueError(f"{prereg.path}: the design registers no phase2 section")
    cell = trained_cell(prereg, arm, decision)
    if cell is None:
        return GuardCheck(arm, None, phase2.min_guard_variance_share, ())
    if cell not in cell_tables:
        raise ValueError(
            f"phase 2's guard check needs the probe table of cell {cell!r} (the cell that samples arm "
            f"{arm!r}), but was given tables of: {', '.join(sorted(cell_tables)) or 'none'}"
        )
    from grpo_probe.parquet_io import read_parquet  # pyarrow: not while Snakemake reads the plan

    penalised = [g for g in guards if phase2.penalties.get(g.name, 0.0) > 0]
    columns = ["seed", *dict.fromkeys(g.column for g in penalised)]
    path = cell_tables[cell]
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: probe table of cell {cell!r} not found")
    table = read_parquet(path, columns).to_pydict()
    missing = [c for c in columns if c not in table]
    if missing:
        raise ValueError(
            f"{path}: cell {cell!r} has no column {', '.join(missing)} (the guard check reads them)"
        )
    if not table["seed"]:
        raise ValueError(f"{path}: cell {cell!r} has no rows")
    trips = guard_trips(table, penalised, prereg.analysis.to_dict())
    counted = guard_variance(table["seed"], trips, phase2.penalties)
    return GuardCheck(arm, cell, phase2.min_guard_variance_share, counted)
