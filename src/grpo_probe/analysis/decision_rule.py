"""The registered decision rule, evaluated on the per-cell reads.

Why: the memo's rule (section 4) decides what phase 2 is, so it must be applied exactly as registered and
say why. The thresholds and criteria are data (``decision_rule:`` in the prereg, parsed by
:mod:`grpo_probe.prereg.rule`); this module only evaluates them. Its fixed part is the memo's routing:

- no AR or flow cell qualifies -> ``park`` (GRPO-on-sim parks);
- AR cells qualify, flow cells do not -> ``phase2_ar`` (token-GRPO on the AR head, the SimpleVLA-RL mapping);
- flow cells qualify, AR cells do not -> ``phase2_flow`` (Flow-GRPO SDE on the engaging flow arm; AR waits);
- both -> ``ar_then_flow`` (AR first for its cheaper infrastructure, flow second).

A cell qualifies when it passes every criterion ``decision_rule.qualifies`` lists for its head. The arm
phase 2 trains is the arm of the first qualifying cell of that head after sorting by
``decision_rule.arm_choice.rank_by`` (e.g. highest anchor engagement); remaining ties go to the cell
registered first. A read that is undefined for a cell (entropy of a flow cell) fails its condition.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grpo_probe.prereg import Cell
from grpo_probe.prereg.rule import HEADS, DecisionRule, RankKey

__all__ = ["OUTCOMES", "CellVerdict", "ConditionResult", "Outcome", "evaluate_rule"]

OUTCOMES: dict[str, str] = {
    "park": "Park GRPO-on-sim: no cell shows usable group-relative signal.",
    "phase2_ar": "Phase 2 is token-GRPO on the AR head (the SimpleVLA-RL mapping).",
    "phase2_flow": (
        "Phase 2 is Flow-GRPO with the SDE sampler on the engaging flow arm, expert only; the AR head waits."
    ),
    "ar_then_flow": (
        "Phase 2 is token-GRPO on the AR head first, then Flow-GRPO SDE on the engaging flow arm."
    ),
}
"""Outcome kind -> the sentence decision.md states."""

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}


@dataclass(frozen=True)
class ConditionResult:
    """One condition on one cell: the read's value against the threshold."""

    read: str
    value: float | None
    op: str
    threshold: float
    source: str
    passed: bool

    def text(self) -> str:
        """``median_group_std_progress_cm = 0.31 >= 0.25 (analysis.signal_bar_cm): pass``."""
        shown = "undefined" if self.value is None else f"{self.value:.4f}"
        verdict = "pass" if self.passed else "fail"
        return f"{self.read} = {shown} {self.op} {self.threshold:.4f} ({self.source}): {verdict}"


@dataclass(frozen=True)
class CellVerdict:
    """A cell's criteria results and whether it qualifies for its head's phase-2 path."""

    cell: str
    arm: str
    head: str
    criteria: tuple[tuple[str, bool, tuple[ConditionResult, ...]], ...]
    qualifies: bool | None
    """None for a head the rule does not route (neither ``ar`` nor ``flow``)."""

    def passed(self, criterion: str) -> bool:
        """Whether the cell passed ``criterion``."""
        return next(ok for name, ok, _ in self.criteria if name == criterion)


@dataclass(frozen=True)
class Outcome:
    """The rule's outcome, the arms it names, and the clauses that fired, in order."""

    kind: str
    headline: str
    ar_arm: str | None
    flow_arm: str | None
    qualifying: tuple[tuple[str, tuple[str, ...]], ...]
    ranking: tuple[tuple[str, tuple[str, ...]], ...]
    clauses: tuple[str, ...]


def _condition(cond: Any, reads: Mapping[str, float | None]) -> ConditionResult:
    value = reads.get(cond.read)
    passed = value is not None and _OPS[cond.op](value, cond.threshold)
    return ConditionResult(cond.read, value, cond.op, cond.threshold, cond.source, passed)


def _verdict(rule: DecisionRule, cell: Cell, reads: Mapping[str, float | None]) -> CellVerdict:
    results = []
    for criterion in rule.criteria:
        conditions = tuple(_condition(c, reads) for c in criterion.all_of)
        results.append((criterion.name, all(c.passed for c in conditions), conditions))
    verdict = CellVerdict(cell.id, cell.arm, cell.head, tuple(results), None)
    if cell.head not in HEADS:
        return verdict
    qualifies = all(verdict.passed(name) for name in rule.criteria_for(cell.head))
    return CellVerdict(cell.id, cell.arm, cell.head, tuple(results), qualifies)


def _rank(
    cells: Sequence[Cell], keys: Sequence[RankKey], reads: Mapping[str, Mapping[str, float | None]]
) -> list[Cell]:
    """Best first: each key in turn (an undefined read ranks last), then registered order."""

    def sort_key(indexed: tuple[int, Cell]) -> tuple[Any, ...]:
        position, cell = indexed
        parts: list[Any] = []
        for key in keys:
            value = reads[cell.id].get(key.read)
            if value is None:
                parts.append((1, 0.0))
            else:
                parts.append((0, -value if key.prefer == "max" else value))
        return (*parts, position)

    return [cell for _, cell in sorted(enumerate(cells), key=sort_key)]


def _rank_clause(head: str, ranked: Sequence[Cell], keys: Sequence[RankKey], reads: Any) -> str:
    def shown(value: float | None) -> str:
        return "undefined" if value is None else f"{value:.4f}"

    def describe(cell: Cell) -> str:
        values = ", ".join(f"{k.read}={shown(reads[cell.id].get(k.read))}" for k in keys)
        return f"{cell.id} (arm {cell.arm}{'; ' + values if values else ''})"

    order = " > ".join(describe(c) for c in ranked)
    by = ", then ".join(f"{k.read} ({k.prefer})" for k in keys) or "registered order"
    return (
        f"{head} arm: qualifying cells ranked by {by}, remaining ties by registered order: {order}; "
        f"phase 2 trains arm {ranked[0].arm}"
    )


def evaluate_rule(
    rule: DecisionRule, cells: Sequence[Cell], reads: Mapping[str, Mapping[str, float | None]]
) -> tuple[list[CellVerdict], Outcome]:
    """Apply the registered rule to the reads of each enabled cell (``reads[cell.id][read name]``)."""
    verdicts = [_verdict(rule, cell, reads[cell.id]) for cell in cells]
    clauses: list[str] = []
    for verdict in verdicts:
        for name, ok, conditions in verdict.criteria:
            joined = "; ".join(c.text() for c in conditions)
            clauses.append(f"cell {verdict.cell}: {name} {'holds' if ok else 'fails'} ({joined})")
        if verdict.qualifies is None:
            clauses.append(f"cell {verdict.cell}: head {verdict.head} is not routed by the rule")
        else:
            needed = ", ".join(rule.criteria_for(verdict.head)) or "nothing"
            state = "qualifies" if verdict.qualifies else "does not qualify"
            clauses.append(f"cell {verdict.cell} ({verdict.head}) {state} (needs {needed})")
    qualifying = {
        head: [c for c, v in zip(cells, verdicts, strict=True) if c.head == head and v.qualifies]
        for head in HEADS
    }
    arms: dict[str, str | None] = {}
    ranking: list[tuple[str, tuple[str, ...]]] = []
    for head in HEADS:
        if not qualifying[head]:
            clauses.append(f"no {head} cell qualifies")
            arms[head] = None
            continue
        ranked = _rank(qualifying[head], rule.rank_by, reads)
        ranking.append((head, tuple(c.id for c in ranked)))
        clauses.append(_rank_clause(head, ranked, rule.rank_by, reads))
        arms[head] = ranked[0].arm
    kind = {
        (False, False): "park",
        (True, False): "phase2_ar",
        (False, True): "phase2_flow",
        (True, True): "ar_then_flow",
    }[(arms["ar"] is not None, arms["flow"] is not None)]
    clauses.append(f"outcome {kind}: {OUTCOMES[kind]}")
    outcome = Outcome(
        kind=kind,
        headline=OUTCOMES[kind],
        ar_arm=arms["ar"],
        flow_arm=arms["flow"],
        qualifying=tuple((head, tuple(c.id for c in qualifying[head])) for head in HEADS),
        ranking=tuple(ranking),
        clauses=tuple(clauses),
    )
    return verdicts, outcome
