"""The registered analysis numbers and decision rule: two typed sections of the prereg.

Why here and not in the analysis: every number the decision depends on is registered (the prereg's
``analysis:`` and ``decision_rule:`` sections, their shape fixed by
``prereg/schemas/prereg.analysis.schema.yaml``), so these sections are parsed and checked with the rest
of the design, once, and the analysis only reads them. Each section validates itself: the schema fragment
for the field shapes, then what a schema cannot say (every criterion named in ``qualifies`` is defined).
Errors name the prereg and the field.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.schema import analysis_fragment_path, validate_against, with_read_vocabulary
from grpo_probe.prereg.vocabulary import BOUND_SUFFIXES

__all__ = [
    "ANALYSIS_NUMBERS",
    "BOUNDS",
    "CHAOS_FLOOR",
    "HEADS",
    "OPS",
    "SPLITS",
    "THRESHOLD_ROLES",
    "AnalysisNumbers",
    "BootstrapSpec",
    "Condition",
    "Criterion",
    "DecisionRule",
    "OperatingSpec",
    "RankKey",
    "ReadRef",
    "SignalBar",
    "analysis_schema",
    "parse_analysis_sections",
    "routed_cells",
    "threshold_role",
]

OPS: dict[str, Callable[[Any, Any], Any]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}
"""A condition's comparison operators (on floats, or elementwise on arrays of resampled reads)."""

HEADS: tuple[str, ...] = ("ar", "flow")
"""Heads the decision rule routes to a phase-2 path; a cell of any other head is reported, never routed."""


def analysis_schema(schema_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The JSON-schema fragment for the ``analysis:`` and ``decision_rule:`` sections, with the read names
    of :mod:`grpo_probe.prereg.vocabulary` filled in."""
    return with_read_vocabulary(read_yaml(analysis_fragment_path(schema_dir)))


SPLITS: tuple[str, ...] = ("bonferroni",)
"""How a design's registered confidence may be split over the cells the rule reads."""


@dataclass(frozen=True)
class BootstrapSpec:
    """Percentile bootstrap over seeds: B = ``resamples``, RNG keyed by ``seed``, two-sided ``confidence``.

    Why a split: the rule says go when *any* of m routed cells qualifies, so a cell-wise test at level
    alpha gives a design-wise false go near m x alpha at the null's boundary (five cells at one-sided
    2.5 % go about 12 % of the time). With ``split: bonferroni`` the registered ``confidence`` c is the
    design's, and each cell's intervals are read at

        c_cell = 1 - (1 - c) / m                       (Bonferroni, 1936; Holm, 1979, Sec. 1)

    so each end of a cell's interval misses with probability (1 - c) / (2m) and the design's any-cell
    false go stays at or below (1 - c) / 2 by the union bound, where the bootstrap's coverage is nominal.
    Where it is not (15 seeds, heavy-tailed chaos), the operating simulation measures the design's rate
    at the boundary (:mod:`grpo_probe.analysis.error_rates.operating`), and the page prints it.
    """

    resamples: int
    seed: int
    confidence: float
    """The registered two-sided confidence: each interval's, or, with a split, the design's."""
    split: str | None = None
    """None, or ``bonferroni``: ``confidence`` is split over the ``cells`` the rule routes."""
    cells: int = 1
    """m: the enabled cells of a head the rule routes (the split's divisor)."""
    pooled_interval: str = "percentile"
    """``percentile``, or ``studentized``: the pooled chaos share's interval is the bootstrap-t one
    (:mod:`grpo_probe.analysis.cells.studentized`), which covers where the chaos differs between seeds."""

    @property
    def interval_confidence(self) -> float:
        """The two-sided confidence at which each of the probe's intervals is read (the registered one,
        or its Bonferroni share per cell)."""
        if self.split is None or self.cells <= 1:
            return self.confidence
        return 1.0 - (1.0 - self.confidence) / self.cells

    def to_dict(self) -> dict[str, Any]:
        """As decision.json holds it: the registered numbers and the per-interval confidence they give."""
        out: dict[str, Any] = {"resamples": self.resamples, "seed": self.seed, "confidence": self.confidence}
        if self.split is not None:
            out |= {"split": self.split, "cells": self.cells, "interval_confidence": self.interval_confidence}
        if self.pooled_interval != "percentile":  # records made before the choice existed keep their bytes
            out["pooled_interval"] = self.pooled_interval
        return out


@dataclass(frozen=True)
class OperatingSpec:
    """``analysis.operating_characteristics``: S = ``simulations`` simulated runs per scenario, their RNG
    keyed by ``seed``; ``false_go_target`` the highest false-go rate the design accepts."""

    simulations: int = 1000
    seed: int = 20261205
    false_go_target: float = 0.05
    registered: bool = True
    """False for the defaults a design without the section is simulated with."""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> OperatingSpec:
        """The section, or the defaults (``registered`` False) where the design has none."""
        if raw is None:
            return cls(registered=False)
        return cls(int(raw["simulations"]), int(raw["seed"]), float(raw.get("false_go_target", 0.05)))

    def to_dict(self) -> dict[str, Any]:
        """The section as decision.json holds it: every field, ``registered`` included."""
        return dataclasses.asdict(self)


_NUMBER_TYPES: dict[str, type] = {"int": int, "float": float}
"""The annotation of a registered number of the ``analysis:`` section, and the type it is read as."""


def _number_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of ``cls`` that are registered numbers (annotated ``int`` or ``float``), in order."""
    return [f for f in dataclasses.fields(cls) if f.type in _NUMBER_TYPES]


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
    operating: OperatingSpec = OperatingSpec(registered=False)
    """How the rule's error rates are simulated (the defaults where the design registers none)."""
    gradient_reads: bool = False
    """Whether the design registers the gradient reads (``gradient_noise_scale``, ``gradient_half_cosine``):
    a job per cell differentiates the arm's log-probs on the probe's rollouts. Off by default, and then
    absent from decision.json, so a design that does not ask keeps its bytes."""

    @classmethod
    def from_dict(cls, analysis: Mapping[str, Any], routed_cells: int = 1) -> AnalysisNumbers:
        """The section from its schema-valid mapping; ``routed_cells``: the enabled cells of a routed head
        (a split confidence's divisor)."""
        boot = analysis["bootstrap"]
        return cls(
            **{f.name: _NUMBER_TYPES[f.type](analysis[f.name]) for f in _number_fields(cls)},
            bootstrap=BootstrapSpec(
                int(boot["resamples"]),
                int(boot["seed"]),
                float(boot["confidence"]),
                boot.get("split"),
                max(1, routed_cells),
                str(boot.get("pooled_interval", "percentile")),
            ),
            operating=OperatingSpec.from_dict(analysis.get("operating_characteristics")),
            gradient_reads=bool(analysis.get("gradient_reads", False)),
        )

    def to_dict(self) -> dict[str, Any]:
        """The section as parsed, for decision.json and the design table."""
        return {
            **{name: getattr(self, name) for name in ANALYSIS_NUMBERS},
            "bootstrap": self.bootstrap.to_dict(),
            "operating_characteristics": self.operating.to_dict(),
            **({"gradient_reads": True} if self.gradient_reads else {}),
        }


ANALYSIS_NUMBERS: tuple[str, ...] = tuple(f.name for f in _number_fields(AnalysisNumbers))
"""The registered numbers of the ``analysis:`` section, in the section's order (``group_std_ddof`` first):
what the page lists as the design's analysis numbers, from decision.json's ``analysis``, without naming
any of them."""

THRESHOLD_ROLES: dict[str, str] = {
    "signal_bar_cm": "signal bar",
    "competence_tol_cm": "tolerance",
    "degenerate_tol_cm": "degenerate tolerance",
}
"""Registered analysis numbers by their role in a clause (others: the key, underscores as spaces)."""

_SIGNAL_BAR = "signal_bar_cm"

CHAOS_FLOOR = "chaos_std_cm"
"""The read a bar relative to the chaos floor names: the chaos std sigma_w, every draw replayed."""

BOUNDS: dict[str, str] = BOUND_SUFFIXES
"""A condition may read a bound of a read's interval: ``chaos_share.upper`` is the upper end of the chaos
share's percentile-bootstrap interval over seeds, which the reads hold as ``chaos_share_ci_high`` (the
spelling the earliest registered rules used, still read the same)."""


@dataclass(frozen=True)
class ReadRef:
    """A read a condition names: the read, or one end of its bootstrap interval."""

    name: str
    """The read (``chaos_share``)."""
    bound: str | None = None
    """None for the read's value, ``lower`` or ``upper`` for an end of its interval."""

    @classmethod
    def parse(cls, text: str) -> ReadRef:
        """``chaos_share.upper`` or ``chaos_share_ci_high`` -> (chaos_share, upper); else the read itself."""
        name, dot, bound = text.partition(".")
        if dot:
            return cls(name, bound)
        for end, suffix in BOUNDS.items():
            if text.endswith(suffix):
                return cls(text.removesuffix(suffix), end)
        return cls(text)

    @property
    def key(self) -> str:
        """The name the reads hold it under (``chaos_share_ci_high``)."""
        return self.name if self.bound is None else self.name + BOUNDS[self.bound]

    def __str__(self) -> str:
        return self.name if self.bound is None else f"{self.name}.{self.bound}"


@dataclass(frozen=True)
class Condition:
    """``read op threshold``; ``source`` says where the threshold came from, for the clause text.

    The threshold is a registered number (``threshold``), or ``scale`` times another read of the same
    cell (``threshold_read``, e.g. ``choice_std_cm.lower >= 0.5 x chaos_std_cm``: a bar relative to the
    chaos floor), resolved on each cell's reads when the rule is evaluated (:meth:`threshold_on`).
    """

    read: str
    op: str
    threshold: float | None
    """The registered number; None for a threshold relative to another read."""
    source: str
    threshold_read: ReadRef | None = None
    scale: float = 1.0

    @property
    def ref(self) -> ReadRef:
        """The read as parsed (a bound of an interval, or the read)."""
        return ReadRef.parse(self.read)

    @property
    def key(self) -> str:
        """The name the cell's reads hold the value under."""
        return self.ref.key

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys of every read the condition compares: its own, and the read its threshold is relative
        to (``chaos_std_cm`` in ``choice_std_cm.lower >= 0.5 x chaos_std_cm``)."""
        relative = self.threshold_read
        return (self.key,) if relative is None else (self.key, relative.key)

    @property
    def read_names(self) -> tuple[str, ...]:
        """The reads of :attr:`keys`, an end of an interval taken as its read (``chaos_share``)."""
        relative = self.threshold_read
        return (self.ref.name,) if relative is None else (self.ref.name, relative.name)

    def threshold_on(self, reads: Mapping[str, Any]) -> Any:
        """The threshold on one cell's reads (a float, or an array of them on resampled reads); None where
        the read it is relative to is undefined for the cell."""
        if self.threshold_read is None:
            return self.threshold
        value = reads.get(self.threshold_read.key)
        return None if value is None else self.scale * value

    def compare(self, reads: Mapping[str, Any]) -> tuple[Any, Any, Any]:
        """(value, threshold, passed) of the condition on one cell's reads.

        The one place a read meets its threshold: the rule on the run's reads, the stability resampling
        on [B] arrays of resampled reads and the operating simulation on [R] arrays of simulated ones all
        call it. An undefined read or threshold (None, or NaN in an array) fails.
        """
        value = reads.get(self.key)
        threshold = self.threshold_on(reads)
        if value is None or threshold is None:
            return value, threshold, False
        with np.errstate(invalid="ignore"):
            return value, threshold, OPS[self.op](value, threshold)

    def passes(self, reads: Mapping[str, Any]) -> Any:
        """Whether the condition holds on ``reads`` (a bool, or an array of them): :meth:`compare`."""
        return self.compare(reads)[2]

    def bar_text(
        self, number: Callable[[float], str], read_name: Callable[[str], str] = str, unit: str = ""
    ) -> str:
        """The threshold as a clause prints it: ``0.5`` (with ``unit``), or ``[scale x ]read`` for a bar
        relative to another read, that read named by ``read_name``."""
        if self.threshold_read is None:
            assert self.threshold is not None
            return number(self.threshold) + (f" {unit}" if unit else "")
        other = read_name(str(self.threshold_read))
        return other if self.scale == 1.0 else f"{number(self.scale)} x {other}"

    def to_record(self) -> dict[str, Any]:
        """The condition as decision.json records it: read, operator, threshold (a number, or None beside
        ``threshold_read`` times ``scale`` for a bar relative to another read) and its source."""
        record: dict[str, Any] = {
            "read": self.read,
            "op": self.op,
            "threshold": self.threshold,
            "source": self.source,
        }
        if self.threshold_read is not None:
            record |= {"threshold_read": str(self.threshold_read), "scale": self.scale}
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Condition:
        """The condition back from :meth:`to_record`'s mapping (a page drawn from decision.json alone)."""
        relative = record.get("threshold_read")
        return cls(
            record["read"],
            record["op"],
            record.get("threshold"),
            record.get("source", "registered value"),
            None if relative is None else ReadRef.parse(relative),
            float(record.get("scale", 1.0)),
        )


_ANALYSIS_SOURCE = re.compile(r"(?:(?P<scale>\S+) x )?analysis\.(?P<key>\w+)")


def threshold_role(source: str) -> tuple[str, str] | None:
    """(scale, role) of a threshold taken from a registered analysis number (``source`` as a
    :class:`Condition` records it: ``-1 x analysis.competence_tol_cm`` -> ("-1", "tolerance")); None for a
    threshold that is a number of its own or another read. ``scale`` is "" where the source has none."""
    found = _ANALYSIS_SOURCE.fullmatch(source)
    if found is None:
        return None
    key = found["key"]
    return found["scale"] or "", THRESHOLD_ROLES.get(key, key.removesuffix("_cm").replace("_", " "))


@dataclass(frozen=True)
class SignalBar:
    """The bar a cell's spread must reach to show signal, as the registered rule sets it: the condition
    that sets it, and what the bar is (``signal bar``: a registered number, the same for every cell;
    ``chaos floor``: the cell's own chaos std, :data:`CHAOS_FLOOR`).

    Why from the rule and not from ``analysis:``: the figures and the page draw the bar the rule compares
    with. A design whose rule compares the choice std with each cell's chaos floor (the Pusher and
    MetaWorld designs) still registers ``analysis.signal_bar_cm``, which its rule never reads; a line at
    that number would show a bar no verdict was decided against.
    """

    condition: Condition
    role: str
    """``signal bar`` or ``chaos floor``: what the bar is, in the page's words."""
    scale: str = ""
    """The registered scale the role is multiplied by, as the clause prints it ("" for none)."""

    @property
    def name(self) -> str:
        """The bar in words, with its scale (``signal bar``, ``0.5 x chaos floor``)."""
        return f"{self.scale} x {self.role}" if self.scale else self.role

    @property
    def fixed(self) -> float | None:
        """The bar where it is one registered number for every cell; None where each cell has its own."""
        return self.condition.threshold

    def on(self, reads: Mapping[str, Any]) -> float | None:
        """The bar of one cell, from the cell's reads: the registered number, or the read it is relative
        to times its scale; None where that read is undefined for the cell (a cell without replays)."""
        value = self.condition.threshold_on(reads)
        return None if value is None else float(value)

    def label(self, value: str, unit: str = "cm") -> str:
        """The legend's words for the bar at ``value`` (``signal bar 0.25 cm``; with a scale,
        ``0.5 x chaos floor (0.62 cm)``, so the number is not read as the scale's factor)."""
        shown = f"{value} {unit}" if unit else value
        return f"{self.name} ({shown})" if self.scale else f"{self.name} {shown}"

    @classmethod
    def of(cls, condition: Condition) -> SignalBar | None:
        """The bar ``condition`` sets, if it sets one: a spread that must reach (``>=``, ``>``) the
        registered signal bar or the cell's chaos floor; None for any other condition."""
        if condition.op not in (">=", ">"):
            return None
        relative = condition.threshold_read
        if relative is not None:
            if relative.name != CHAOS_FLOOR:
                return None
            return cls(condition, "chaos floor", "" if condition.scale == 1.0 else f"{condition.scale:g}")
        found = _ANALYSIS_SOURCE.fullmatch(condition.source)
        if found is None or found["key"] != _SIGNAL_BAR:
            return None
        return cls(condition, THRESHOLD_ROLES[_SIGNAL_BAR], found["scale"] or "")


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

    def conditions_for(self, head: str) -> tuple[Condition, ...]:
        """Every condition a cell of ``head`` must pass to qualify, in registered order (none for a head
        the rule does not route)."""
        if head not in HEADS:
            return ()
        needed = set(self.criteria_for(head))
        return tuple(c for criterion in self.criteria if criterion.name in needed for c in criterion.all_of)

    @property
    def signal_bar(self) -> SignalBar | None:
        """The bar the rule's spread must reach: the first condition, criteria in registered order, that
        compares a spread with the registered signal bar or with the cell's chaos floor
        (:meth:`SignalBar.of`); None for a rule with no such condition, whose figures draw no bar."""
        for criterion in self.criteria:
            for condition in criterion.all_of:
                found = SignalBar.of(condition)
                if found is not None:
                    return found
        return None

    def to_record(self) -> dict[str, Any]:
        """The rule as decision.json records it: each criterion's conditions (:meth:`Condition.to_record`),
        the criteria each head needs and the ranking that names an arm."""
        return {
            "criteria": [
                {"name": c.name, "description": c.description, "all_of": [x.to_record() for x in c.all_of]}
                for c in self.criteria
            ],
            "qualifies": {head: list(names) for head, names in self.qualifies},
            "rank_by": [{"read": k.read, "prefer": k.prefer} for k in self.rank_by],
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], analysis: Mapping[str, Any], where: str) -> DecisionRule:
        """The rule from its schema-valid mapping; thresholds may refer to ``analysis:`` numbers."""
        criteria = []
        for name in raw["criteria"]:
            body = raw["criteria"][name]
            conditions = []
            for cond in body["all_of"]:
                conditions.append(_condition(cond, analysis))
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


def _condition(cond: Mapping[str, Any], analysis: Mapping[str, Any]) -> Condition:
    raw = cond["threshold"]
    if not isinstance(raw, Mapping):
        return Condition(cond["read"], cond["op"], float(raw), "registered value")
    scale = float(raw.get("scale", 1.0))
    times = "" if scale == 1.0 else f"{scale:g} x "
    if "read" in raw:
        ref = ReadRef.parse(raw["read"])
        return Condition(cond["read"], cond["op"], None, f"{times}{ref}", ref, scale)
    key = raw["analysis"]
    value = float(analysis[key]) * scale
    return Condition(cond["read"], cond["op"], value + 0.0, f"{times}analysis.{key}")


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
        AnalysisNumbers.from_dict(raw["analysis"], routed_cells(raw)),
        DecisionRule.from_dict(raw["decision_rule"], raw["analysis"], where),
    )


def routed_cells(raw: Mapping[str, Any]) -> int:
    """The enabled cells of a design whose arm's head the rule routes (``ar`` or ``flow``): the cells
    any of which can make the rule say go, so the family a split confidence is divided over."""
    arms = raw.get("arms") or {}
    count = 0
    for cell in raw.get("cells") or ():
        arm = arms.get(cell.get("arm")) if isinstance(cell, Mapping) else None
        if isinstance(arm, Mapping) and arm.get("head") in HEADS and cell.get("enabled", True):
            count += 1
    return count
