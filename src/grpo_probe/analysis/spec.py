"""The registered analysis and decision rule, parsed from the prereg into frozen objects.

Why: every number the decision depends on is registered (the prereg's ``analysis:`` and ``decision_rule:``
sections, shape fixed by ``workflow/schemas/prereg.analysis.schema.yaml``), so code holds no thresholds.
:meth:`AnalysisSpec.from_prereg` validates the two sections against that schema file, then checks what a
schema cannot: that criteria named in ``qualifies`` exist, that each enabled cell's arm is registered with
a head. Errors name the prereg and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.schema import ANALYSIS_FRAGMENT, default_schema_dir, validate_against

__all__ = [
    "HEADS",
    "AnalysisSpec",
    "BootstrapSpec",
    "CellSpec",
    "Condition",
    "Criterion",
    "DecisionRule",
    "RankKey",
    "analysis_schema",
]

HEADS: tuple[str, ...] = ("ar", "flow")
"""Heads the decision rule routes to a phase-2 path; a cell of any other head is reported, never routed."""


def analysis_schema(schema_dir: str | Path | None = None) -> dict[str, Any]:
    """The JSON-schema fragment for the ``analysis:`` and ``decision_rule:`` sections."""
    base = Path(schema_dir) if schema_dir is not None else default_schema_dir()
    return read_yaml(base / ANALYSIS_FRAGMENT)


@dataclass(frozen=True)
class BootstrapSpec:
    """Percentile bootstrap over seeds: B = ``resamples``, RNG keyed by ``seed``, two-sided ``confidence``."""

    resamples: int
    seed: int
    confidence: float


@dataclass(frozen=True)
class Condition:
    """``read op threshold``; ``source`` says where the threshold came from, for the clause text."""

    read: str
    op: str
    threshold: float
    source: str


@dataclass(frozen=True)
class Criterion:
    """A named conjunction of conditions on one cell's reads."""

    name: str
    description: str
    all_of: tuple[Condition, ...]


@dataclass(frozen=True)
class RankKey:
    """Sort qualifying cells by ``read``, best first (``prefer`` = ``max`` or ``min``)."""

    read: str
    prefer: str


@dataclass(frozen=True)
class DecisionRule:
    """The registered rule: criteria, the criteria each head must pass, and how an arm is named."""

    criteria: tuple[Criterion, ...]
    qualifies: tuple[tuple[str, tuple[str, ...]], ...]
    rank_by: tuple[RankKey, ...]

    def criteria_for(self, head: str) -> tuple[str, ...]:
        """Names of the criteria a cell of ``head`` must pass to qualify."""
        return dict(self.qualifies)[head]


@dataclass(frozen=True)
class CellSpec:
    """An enabled prereg cell with its arm's head resolved."""

    id: str
    arm: str
    head: str
    mode: tuple[tuple[str, Any], ...]
    optional: bool
    description: str

    def mode_text(self) -> str:
        """``temperature (temperature=1.6)``: the sampling mode as decision.md prints it."""
        mode = dict(self.mode)
        params = ", ".join(f"{k}={mode[k]}" for k in sorted(mode) if k != "kind")
        return f"{mode.get('kind', '?')} ({params})" if params else str(mode.get("kind", "?"))


@dataclass(frozen=True)
class AnalysisSpec:
    """Registered analysis numbers (cm, m/s), the bootstrap, the decision rule, and the enabled cells."""

    group_std_ddof: int
    signal_bar_cm: float
    degenerate_tol_cm: float
    competence_tol_cm: float
    away_tail_cm: float
    swat_speed_m_s: float
    bootstrap: BootstrapSpec
    rule: DecisionRule
    cells: tuple[CellSpec, ...]
    arms: tuple[tuple[str, str], ...]
    """(arm id, head) of every registered arm."""

    @classmethod
    def from_prereg(
        cls, prereg: Mapping[str, Any], where: str, schema_dir: str | Path | None = None
    ) -> AnalysisSpec:
        """Parse and validate; a ValueError names ``where`` (the prereg file) and the failing field."""
        if not isinstance(prereg, Mapping):
            raise ValueError(f"{where}: the prereg must be a mapping, got {type(prereg).__name__}")
        validate_against(
            {k: prereg.get(k) for k in ("analysis", "decision_rule")}, analysis_schema(schema_dir), where
        )
        analysis = prereg["analysis"]
        boot = analysis["bootstrap"]
        arms = _arms(prereg, where)
        return cls(
            group_std_ddof=int(analysis["group_std_ddof"]),
            signal_bar_cm=float(analysis["signal_bar_cm"]),
            degenerate_tol_cm=float(analysis["degenerate_tol_cm"]),
            competence_tol_cm=float(analysis["competence_tol_cm"]),
            away_tail_cm=float(analysis["away_tail_cm"]),
            swat_speed_m_s=float(analysis["swat_speed_m_s"]),
            bootstrap=BootstrapSpec(int(boot["resamples"]), int(boot["seed"]), float(boot["confidence"])),
            rule=_rule(prereg["decision_rule"], analysis, where),
            cells=_cells(prereg, arms, where),
            arms=tuple(sorted(arms.items())),
        )

    def cell(self, cell_id: str) -> CellSpec:
        """The enabled cell ``cell_id``."""
        for cell in self.cells:
            if cell.id == cell_id:
                return cell
        raise KeyError(cell_id)

    def registered_numbers(self) -> dict[str, Any]:
        """The ``analysis:`` section as parsed, for decision.json and the design table."""
        return {
            "group_std_ddof": self.group_std_ddof,
            "signal_bar_cm": self.signal_bar_cm,
            "degenerate_tol_cm": self.degenerate_tol_cm,
            "competence_tol_cm": self.competence_tol_cm,
            "away_tail_cm": self.away_tail_cm,
            "swat_speed_m_s": self.swat_speed_m_s,
            "bootstrap": {
                "resamples": self.bootstrap.resamples,
                "seed": self.bootstrap.seed,
                "confidence": self.bootstrap.confidence,
            },
        }


def _threshold(raw: Any, analysis: Mapping[str, Any]) -> tuple[float, str]:
    if isinstance(raw, Mapping):
        key = raw["analysis"]
        scale = float(raw.get("scale", 1.0))
        value = float(analysis[key]) * scale
        source = f"analysis.{key}" if scale == 1.0 else f"{scale:g} x analysis.{key}"
        return value + 0.0, source
    return float(raw), "registered value"


def _rule(raw: Mapping[str, Any], analysis: Mapping[str, Any], where: str) -> DecisionRule:
    criteria = []
    for name in raw["criteria"]:
        body = raw["criteria"][name]
        conditions = []
        for cond in body["all_of"]:
            value, source = _threshold(cond["threshold"], analysis)
            conditions.append(Condition(cond["read"], cond["op"], value, source))
        criteria.append(Criterion(name, body["description"], tuple(conditions)))
    known = {c.name for c in criteria}
    qualifies = []
    for head in HEADS:
        names = tuple(raw["qualifies"][head])
        for i, name in enumerate(names):
            if name not in known:
                raise ValueError(
                    f"{where}: decision_rule.qualifies.{head}[{i}] names criterion {name!r}, "
                    f"which decision_rule.criteria does not define (defined: {sorted(known)})"
                )
        qualifies.append((head, names))
    rank_by = tuple(RankKey(k["read"], k["prefer"]) for k in raw["arm_choice"]["rank_by"])
    return DecisionRule(tuple(criteria), tuple(qualifies), rank_by)


def _arms(prereg: Mapping[str, Any], where: str) -> dict[str, str]:
    arms = prereg.get("arms")
    if not isinstance(arms, Mapping) or not arms:
        raise ValueError(f"{where}: arms must be a non-empty mapping of arm id -> {{head: ...}}")
    heads = {}
    for arm_id, body in arms.items():
        head = body.get("head") if isinstance(body, Mapping) else None
        if not isinstance(head, str) or not head:
            raise ValueError(f"{where}: arms.{arm_id}.head must be a non-empty string, got {head!r}")
        heads[str(arm_id)] = head
    return heads


def _cells(prereg: Mapping[str, Any], arms: Mapping[str, str], where: str) -> tuple[CellSpec, ...]:
    raw = prereg.get("cells")
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{where}: cells must be a non-empty list")
    cells: list[CellSpec] = []
    seen: set[str] = set()
    for i, cell in enumerate(raw):
        if not isinstance(cell, Mapping):
            raise ValueError(f"{where}: cells[{i}] must be a mapping, got {type(cell).__name__}")
        for key in ("id", "arm"):
            if not isinstance(cell.get(key), str) or not cell[key]:
                raise ValueError(
                    f"{where}: cells[{i}].{key} must be a non-empty string, got {cell.get(key)!r}"
                )
        if cell["id"] in seen:
            raise ValueError(f"{where}: cells[{i}].id {cell['id']!r} is registered twice")
        seen.add(cell["id"])
        if cell["arm"] not in arms:
            raise ValueError(f"{where}: cells[{i}].arm {cell['arm']!r} is not under arms: {sorted(arms)}")
        if not cell.get("enabled", True):
            continue
        mode = cell.get("mode", {})
        cells.append(
            CellSpec(
                id=cell["id"],
                arm=cell["arm"],
                head=arms[cell["arm"]],
                mode=tuple(sorted(mode.items())) if isinstance(mode, Mapping) else (("kind", str(mode)),),
                optional=bool(cell.get("optional", False)),
                description=str(cell.get("description", "")),
            )
        )
    if not cells:
        raise ValueError(f"{where}: cells: no cell is enabled, so there is nothing to decide")
    return tuple(cells)
