"""The registered analysis numbers and decision rule: two typed sections of the prereg.

Why here and not in the analysis: every number the decision depends on is registered (the prereg's
``analysis:`` and ``decision_rule:`` sections, their shape fixed by
``prereg/schemas/prereg.analysis.schema.yaml``), so these sections are parsed and checked with the rest
of the design, once, and the analysis only reads them. Each section validates itself: the schema fragment
for the field shapes, then what a schema cannot say (every criterion named in ``qualifies`` is defined).
Errors name the prereg and the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.schema import analysis_fragment_path, validate_against

__all__ = [
    "HEADS",
    "AnalysisNumbers",
    "BootstrapSpec",
    "Condition",
    "Criterion",
    "DecisionRule",
    "RankKey",
    "analysis_schema",
    "parse_analysis_sections",
]

HEADS: tuple[str, ...] = ("ar", "flow")
"""Heads the decision rule routes to a phase-2 path; a cell of any other head is reported, never routed."""


def analysis_schema(schema_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The JSON-schema fragment for the ``analysis:`` and ``decision_rule:`` sections."""
    return read_yaml(analysis_fragment_path(schema_dir))


@dataclass(frozen=True)
class BootstrapSpec:
    """Percentile bootstrap over seeds: B = ``resamples``, RNG keyed by ``seed``, two-sided ``confidence``."""

    resamples: int
    seed: int
    confidence: float


@dataclass(frozen=True)
class AnalysisNumbers:
    """The ``analysis:`` section: registered numbers in cm and m/s, and the bootstrap over seeds."""

    group_std_ddof: int
    signal_bar_cm: float
    degenerate_tol_cm: float
    competence_tol_cm: float
    away_tail_cm: float
    swat_speed_m_s: float
    bootstrap: BootstrapSpec

    @classmethod
    def from_dict(cls, analysis: Mapping[str, Any]) -> AnalysisNumbers:
        """The section from its schema-valid mapping."""
        boot = analysis["bootstrap"]
        return cls(
            group_std_ddof=int(analysis["group_std_ddof"]),
            signal_bar_cm=float(analysis["signal_bar_cm"]),
            degenerate_tol_cm=float(analysis["degenerate_tol_cm"]),
            competence_tol_cm=float(analysis["competence_tol_cm"]),
            away_tail_cm=float(analysis["away_tail_cm"]),
            swat_speed_m_s=float(analysis["swat_speed_m_s"]),
            bootstrap=BootstrapSpec(int(boot["resamples"]), int(boot["seed"]), float(boot["confidence"])),
        )

    def to_dict(self) -> dict[str, Any]:
        """The section as parsed, for decision.json and the design table."""
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
    """The ``decision_rule:`` section: criteria, the criteria each head must pass, how an arm is named."""

    criteria: tuple[Criterion, ...]
    qualifies: tuple[tuple[str, tuple[str, ...]], ...]
    rank_by: tuple[RankKey, ...]

    def criteria_for(self, head: str) -> tuple[str, ...]:
        """Names of the criteria a cell of ``head`` must pass to qualify."""
        return dict(self.qualifies)[head]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], analysis: Mapping[str, Any], where: str) -> DecisionRule:
        """The rule from its schema-valid mapping; thresholds may refer to ``analysis:`` numbers."""
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
        return cls(tuple(criteria), tuple(qualifies), rank_by)


def _threshold(raw: Any, analysis: Mapping[str, Any]) -> tuple[float, str]:
    if isinstance(raw, Mapping):
        key = raw["analysis"]
        scale = float(raw.get("scale", 1.0))
        value = float(analysis[key]) * scale
        source = f"analysis.{key}" if scale == 1.0 else f"{scale:g} x analysis.{key}"
        return value + 0.0, source
    return float(raw), "registered value"


def parse_analysis_sections(
    raw: Mapping[str, Any], where: str, schema_dir: str | os.PathLike[str] | Path | None = None
) -> tuple[AnalysisNumbers, DecisionRule]:
    """Validate the ``analysis:`` and ``decision_rule:`` sections of ``raw`` and return them typed.

    A ``ValueError`` names ``where`` (the prereg file) and the failing field.
    """
    validate_against(
        {k: raw.get(k) for k in ("analysis", "decision_rule")},
        analysis_schema(schema_dir),
        where,
        shipped=schema_dir is None,
    )
    return (
        AnalysisNumbers.from_dict(raw["analysis"]),
        DecisionRule.from_dict(raw["decision_rule"], raw["analysis"], where),
    )
