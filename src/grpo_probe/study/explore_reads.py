"""The candidate reads of the exploratory re-analysis (:mod:`grpo_probe.study.explore`), and the tables
each arm's reads are computed from.

Why a fixed registry, written before any table is read: the re-analysis is chosen after seeing a study's
answer, so the least it can do is fix its list of candidates in code first and report every one of them,
not only the one that happens to win. Each candidate is a named function of one arm's :class:`ArmTables`
(its cell's reads in decision.json, its cell table and its deterministic anchor's table); its docstring
says what it measures and in which unit. A read the member did not record (a gradient read of a design
that registers none, a success column an older table lacks) is None, never zero.

Why scale-free versions: GRPO divides each group's advantages by the group's own standard deviation, so
the size of a scene in centimetres cannot be what it learns from. A read in cm that ranks arms across
scenes may only rank the scenes' sizes. Two scene scales are offered: the anchor's mean initial distance
d0 (the size of the task; the arms of a design meet the same seeds, so within a design it is nearly
constant and a read over it ranks as the read in cm does) and the anchor's between-seed standard
deviation of progress (how much the outcome varies from spawn to spawn under the deployed policy, which
differs between arms).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from grpo_probe.parquet_io import read_table_file

__all__ = [
    "CANDIDATE_READS",
    "COMPETENCE",
    "ArmTables",
    "CandidateRead",
    "arm_tables",
    "candidate_names",
]

_TABLE_COLUMNS = ("seed", "d0_cm", "progress_final_cm", "success")
_REQUIRED = ("seed", "d0_cm", "progress_final_cm")


@dataclass(frozen=True)
class ArmTables:
    """What one arm's candidate reads are computed from: its cell in decision.json and two tables."""

    reads: Mapping[str, Any]
    """The cell's reads as decision.json holds them (``cells[].reads``)."""
    seeds: NDArray[np.int64]
    """The cell table's seed per sampled episode (K draws a seed)."""
    progress: NDArray[np.float64]
    """The cell table's ``progress_final_cm`` per sampled episode."""
    success: NDArray[np.float64] | None
    """The cell table's ``success`` per sampled episode (0/1); None where the table has no such column."""
    anchor_seeds: NDArray[np.int64]
    anchor_progress: NDArray[np.float64]
    """The anchor table's ``progress_final_cm`` per episode (one a seed)."""
    anchor_d0: NDArray[np.float64]
    """The anchor table's ``d0_cm`` per episode: the object's initial distance to its goal."""
    anchor_success: NDArray[np.float64] | None


def _read_table(path: Path, what: str) -> dict[str, NDArray[Any]]:
    table = read_table_file(path, what, _TABLE_COLUMNS)
    missing = [c for c in _REQUIRED if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: no column {', '.join(missing)}")
    if table.num_rows == 0:
        raise ValueError(f"{path}: no episodes")
    return {name: table.column(name).to_numpy() for name in table.column_names}


def arm_tables(member_dir: str | os.PathLike[str], cell: Mapping[str, Any]) -> ArmTables:
    """One arm's tables: ``cell`` is its cell's entry in ``<member_dir>/decision.json``, whose
    ``probe_table`` and ``anchor_table`` name the tables relative to the member's folder (by default
    ``cells/<cell>.parquet`` and ``anchors/<arm>.parquet``)."""
    folder = Path(member_dir)
    cell_path = folder / str(cell.get("probe_table") or f"cells/{cell['id']}.parquet")
    anchor_path = folder / str(cell.get("anchor_table") or f"anchors/{cell['arm']}.parquet")
    sampled = _read_table(cell_path, "cell table")
    anchor = _read_table(anchor_path, "anchor table")
    missing = sorted(set(sampled["seed"].tolist()) - set(anchor["seed"].tolist()))
    if missing:
        raise ValueError(f"{anchor_path}: no anchor episode of seed {missing[0]} (a seed of {cell_path})")

    def floats(columns: dict[str, NDArray[Any]], name: str) -> NDArray[np.float64] | None:
        return columns[name].astype(np.float64) if name in columns else None

    return ArmTables(
        reads=dict(cell.get("reads", {})),
        seeds=sampled["seed"].astype(np.int64),
        progress=sampled["progress_final_cm"].astype(np.float64),
        success=floats(sampled, "success"),
        anchor_seeds=anchor["seed"].astype(np.int64),
        anchor_progress=anchor["progress_final_cm"].astype(np.float64),
        anchor_d0=anchor["d0_cm"].astype(np.float64),
        anchor_success=floats(anchor, "success"),
    )


# --- the pieces the candidates share ---------------------------------------------------------------


def _recorded(t: ArmTables, name: str) -> float | None:
    value = t.reads.get(name)
    return None if value is None else float(value)


def _ratio(num: float | None, den: float | None) -> float | None:
    """num / den; None where either is unknown or the scale is zero (no scale to divide by)."""
    if num is None or den is None or den == 0.0:
        return None
    return num / den


def _anchor_by_seed(t: ArmTables) -> dict[int, float]:
    """The anchor's progress per seed (the mean, should a table hold a seed twice)."""
    seeds, index = np.unique(t.anchor_seeds, return_inverse=True)
    sums = np.bincount(index, weights=t.anchor_progress)
    counts = np.bincount(index)
    return dict(zip(seeds.tolist(), (sums / counts).tolist(), strict=True))


def _groups(t: ArmTables) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """Each seed of the cell table with the max and min of its K draws' progress."""
    seeds, index = np.unique(t.seeds, return_inverse=True)
    best = np.full(len(seeds), -np.inf)
    worst = np.full(len(seeds), np.inf)
    np.maximum.at(best, index, t.progress)
    np.minimum.at(worst, index, t.progress)
    return seeds, best, worst


def _d0(t: ArmTables) -> float:
    return float(t.anchor_d0.mean())


def _anchor_sd(t: ArmTables) -> float | None:
    per_seed = np.asarray(list(_anchor_by_seed(t).values()))
    return float(per_seed.std(ddof=1)) if len(per_seed) >= 2 else None


# --- the candidates ----------------------------------------------------------------------------------


def choice_std_cm(t: ArmTables) -> float | None:
    """The study's registered read (cm): the spread of the K draws' progress that the draws' choices
    explain, after the replays' chaos floor (decision.json ``choice_std_cm``)."""
    return _recorded(t, "choice_std_cm")


def chaos_share(t: ArmTables) -> float | None:
    """Share of the group variance that is chaos (unitless, 0 to 1): sigma_w^2 / (sigma_w^2 + sigma_b^2)
    of the replays' decomposition (decision.json ``chaos_share``)."""
    return _recorded(t, "chaos_share")


def chaos_fraction(t: ArmTables) -> float | None:
    """The replays' variance over the groups' variance, pooled over the replayed seeds (unitless, can
    exceed 1 where replays spread more than the draws; the earlier chaos read, decision.json
    ``chaos_fraction``)."""
    return _recorded(t, "chaos_fraction")


def nondegenerate_share(t: ArmTables) -> float | None:
    """Share of seeds whose K draws are not all equal in progress (unitless, cell table): a group of
    equal rewards has zero advantages after GRPO's normalisation and adds nothing to its gradient."""
    _, best, worst = _groups(t)
    return float(np.mean(best > worst))


def choice_std_over_anchor_sd(t: ArmTables) -> float | None:
    """The choice std over the anchor's between-seed standard deviation of progress (ddof 1) (unitless):
    the draws' spread measured against how much outcomes vary from spawn to spawn."""
    return _ratio(choice_std_cm(t), _anchor_sd(t))


def choice_std_over_d0(t: ArmTables) -> float | None:
    """The choice std over the anchor's mean initial distance d0 (unitless): the spread as a share of
    the task's size."""
    return _ratio(choice_std_cm(t), _d0(t))


def anchor_progress_cm(t: ArmTables) -> float | None:
    """Competence (cm): the deterministic anchor's mean progress over its episodes (anchor table); the
    covariate of the "beyond competence" partial correlation."""
    return float(t.anchor_progress.mean())


def anchor_progress_over_d0(t: ArmTables) -> float | None:
    """Competence, scale-free (unitless): the anchor's mean progress over its mean d0, the share of the
    initial distance the deployed policy closes."""
    return _ratio(anchor_progress_cm(t), _d0(t))


def sampled_progress_cm(t: ArmTables) -> float | None:
    """Competence of the sampler GRPO trains (cm): the mean progress over the cell's sampled episodes."""
    return float(t.progress.mean())


def anchor_success_rate(t: ArmTables) -> float | None:
    """Share of the anchor's episodes that succeed (unitless); None where the table records no success."""
    return None if t.anchor_success is None else float(t.anchor_success.mean())


def sampled_success_rate(t: ArmTables) -> float | None:
    """Share of the cell's sampled episodes that succeed (unitless); None where not recorded."""
    return None if t.success is None else float(t.success.mean())


def best_of_k_cm(t: ArmTables) -> float | None:
    """Best-of-K over the anchor (cm): mean over seeds of (the largest of the K draws' progress minus the
    anchor's progress on that seed). RL with verifiable rewards mostly sharpens what the base policy's
    samples already contain (Yue et al. 2025, "Does reinforcement learning really incentivize reasoning
    capacity in LLMs beyond the base model?", arXiv 2504.13837), so the headroom its samples show over
    the deployed policy bounds what it can teach."""
    seeds, best, _ = _groups(t)
    anchor = _anchor_by_seed(t)
    return float(np.mean(best - np.asarray([anchor[s] for s in seeds.tolist()])))


def best_of_k_over_d0(t: ArmTables) -> float | None:
    """Best-of-K over the anchor divided by the anchor's mean d0 (unitless)."""
    return _ratio(best_of_k_cm(t), _d0(t))


def best_of_k_over_anchor_sd(t: ArmTables) -> float | None:
    """Best-of-K over the anchor divided by the anchor's between-seed standard deviation (unitless)."""
    return _ratio(best_of_k_cm(t), _anchor_sd(t))


def gradient_noise_scale(t: ArmTables) -> float | None:
    """GRPO's gradient noise scale K tr(Sigma_h) / |G|^2 (episodes; decision.json
    ``gradient_noise_scale``); None where the design registers no gradient reads or the estimate is
    unbounded."""
    return _recorded(t, "gradient_noise_scale")


def gradient_half_cosine(t: ArmTables) -> float | None:
    """Median cosine between the mean group gradients of two random halves of the seeds (unitless,
    decision.json ``gradient_half_cosine``); None where the design registers no gradient reads."""
    return _recorded(t, "gradient_half_cosine")


def spread_and_competence(t: ArmTables) -> float | None:
    """Spread and competence together (unitless): (choice std / d0) x (anchor progress / d0), large only
    where the draws differ and the policy already gets somewhere."""
    spread, competence = choice_std_over_d0(t), anchor_progress_over_d0(t)
    return None if spread is None or competence is None else spread * competence


@dataclass(frozen=True)
class CandidateRead:
    """One candidate read: its column name, its unit, and the function of an arm's tables it is."""

    name: str
    unit: str
    read: Callable[[ArmTables], float | None]

    @property
    def description(self) -> str:
        """What it measures, from the function's docstring (one line)."""
        return " ".join((self.read.__doc__ or "").split())


CANDIDATE_READS: tuple[CandidateRead, ...] = (
    CandidateRead("choice_std_cm", "cm", choice_std_cm),
    CandidateRead("chaos_share", "share", chaos_share),
    CandidateRead("chaos_fraction", "ratio", chaos_fraction),
    CandidateRead("nondegenerate_share", "share", nondegenerate_share),
    CandidateRead("choice_std_over_anchor_sd", "ratio", choice_std_over_anchor_sd),
    CandidateRead("choice_std_over_d0", "ratio", choice_std_over_d0),
    CandidateRead("anchor_progress_cm", "cm", anchor_progress_cm),
    CandidateRead("anchor_progress_over_d0", "ratio", anchor_progress_over_d0),
    CandidateRead("sampled_progress_cm", "cm", sampled_progress_cm),
    CandidateRead("anchor_success_rate", "share", anchor_success_rate),
    CandidateRead("sampled_success_rate", "share", sampled_success_rate),
    CandidateRead("best_of_k_cm", "cm", best_of_k_cm),
    CandidateRead("best_of_k_over_d0", "ratio", best_of_k_over_d0),
    CandidateRead("best_of_k_over_anchor_sd", "ratio", best_of_k_over_anchor_sd),
    CandidateRead("gradient_noise_scale", "episodes", gradient_noise_scale),
    CandidateRead("gradient_half_cosine", "cosine", gradient_half_cosine),
    CandidateRead("spread_and_competence", "ratio", spread_and_competence),
)
"""Every candidate, in the order the page lists them; fixed before any data are read."""

COMPETENCE = "anchor_progress_cm"
"""The competence covariate: the read the "beyond competence" partial correlation holds fixed."""


def candidate_names() -> tuple[str, ...]:
    """The candidates' column names, in registry order."""
    return tuple(c.name for c in CANDIDATE_READS)
