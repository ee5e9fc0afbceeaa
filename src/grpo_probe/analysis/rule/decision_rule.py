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

Each condition is also stated in words (:func:`condition_text`), the way decision.md prints it: the read
by what it measures, its value at three significant figures with its bootstrap interval where it has one,
and the threshold by its role (``sampled minus anchor progress -34.1 cm [-40.2, -28] is below the -0.5 cm
tolerance: fails``). decision.json keeps the read's name, value, operator, threshold and source beside it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grpo_probe.analysis.cells.cell_analysis import json_float
from grpo_probe.analysis.rule.glossary import number
from grpo_probe.prereg import Cell
from grpo_probe.prereg.rule import HEADS, Condition, DecisionRule, RankKey, ReadRef, threshold_role
from grpo_probe.prereg.vocabulary import read_spec

__all__ = [
    "OUTCOMES",
    "CellVerdict",
    "ConditionResult",
    "Outcome",
    "condition_text",
    "evaluate_rule",
    "not_decided",
    "rank_cells",
    "rank_text",
    "read_words",
    "short_clause",
]

OUTCOMES: dict[str, str] = {
    "park": (
        "Park GRPO-on-sim: no cell passes what its head needs, so none shows usable group-relative signal."
    ),
    "phase2_ar": "Phase 2 is token-GRPO on the AR head (the SimpleVLA-RL mapping).",
    "phase2_flow": (
        "Phase 2 is Flow-GRPO with the SDE sampler on the engaging flow arm, expert only; the AR head waits."
    ),
    "ar_then_flow": (
        "Phase 2 is token-GRPO on the AR head first, then Flow-GRPO SDE on the engaging flow arm."
    ),
    "not_decided": (
        "Not decided at this size: the rule would go, but at the worst point of the null's boundary it goes "
        "more often than the design's false-go target, so its go is not one to act on."
    ),
}
"""Outcome kind -> the sentence decision.md states. ``not_decided`` is not the rule's: it replaces a go of
a design too small to hold its registered false-go target (:func:`not_decided`)."""


_READ_SOURCE = re.compile(r"(?:(?P<scale>\S+) x )?(?P<read>[a-z][\w.]*)")

# op -> (words when the condition passes, words when it fails)
_COMPARE: dict[str, tuple[str, str]] = {
    ">=": ("is at or above", "is below"),
    ">": ("is above", "is at or below"),
    "<=": ("is at or below", "is above"),
    "<": ("is below", "is at or above"),
}


def read_words(read: str) -> tuple[str, str]:
    """(what ``read`` measures, its unit or ""), as a clause names it.

    Why not the read's name: ``mean_progress_delta_cm = -34.1`` asks the reader to know the code; a
    newcomer reads ``sampled minus anchor progress -34.1 cm``. decision.json keeps the name.
    """
    ref = ReadRef.parse(read)
    if ref.bound is not None:
        words, unit = read_words(ref.name)
        return f"{ref.bound} end of the {words} interval", unit
    spec = read_spec(read)
    if spec is not None:
        return spec.words, spec.unit
    return read.removesuffix("_cm").replace("_", " "), "cm" if read.endswith("_cm") else ""


def _with_unit(text: str, unit: str) -> str:
    return f"{text} {unit}" if unit else text


def _shown(value: float, threshold: float) -> tuple[str, str]:
    """``value`` and ``threshold`` at three significant figures, or with more where three would print
    them alike although they differ (0.2499 against a 0.25 bar), so a clause never reads "0.25 is below
    the 0.25 cm signal bar"."""
    for figures in (3, 4, 5, 6, 7, 8):
        shown = number(value, figures), number(threshold, figures)
        if value == threshold or shown[0] != shown[1]:
            return shown
    return repr(value), repr(threshold)


def condition_text(
    read: str,
    value: float | None,
    op: str,
    threshold: float,
    source: str,
    passed: bool,
    interval: tuple[float | None, float | None] | None = None,
    point: float | None = None,
) -> str:
    """One condition in words: ``choice std 13.5 cm [0, 27.1] is at or above the 0.25 cm signal bar:
    passes``, ``chaos fraction 0.72 is above the registered maximum 0.5: fails``, ``token entropy is
    undefined for this cell: fails``; on an end of an interval, ``chaos share 0.505 [0.368, 0.606]: its
    upper end 0.606 is above the registered maximum 0.5: fails``.

    ``source`` says where the threshold came from (a registered analysis number such as ``-1 x
    analysis.competence_tol_cm``, another read such as ``chaos_std_cm``, or ``registered value``) and names
    its role (:func:`grpo_probe.prereg.rule.threshold_role`, the rule's words); ``interval`` is the read's
    bootstrap interval, printed after the value where the read has one; ``point`` is the read's own value
    where the condition reads an end of its interval.
    """
    words, unit = read_words(read)
    verdict = "passes" if passed else "fails"
    if value is None:
        return f"{words} is undefined for this cell: {verdict}"
    if math.isnan(threshold):
        return f"{words}: the {source} it is compared with is undefined for this cell: {verdict}"
    value_text, threshold_text = _shown(value, threshold)
    shown = _with_unit(value_text, unit)
    has_interval = interval is not None and None not in interval
    ref = ReadRef.parse(read)
    if ref.bound is not None and point is not None and has_interval:
        assert interval is not None
        base = read_words(ref.name)[0]
        low, high = number(interval[0]), number(interval[1])
        subject = f"{base} {_with_unit(number(point), unit)} [{low}, {high}]: its {ref.bound} end {shown}"
    else:
        subject = f"{words} {shown}"
        if has_interval and ref.bound is None:
            assert interval is not None
            subject += f" [{number(interval[0])}, {number(interval[1])}]"
    found = threshold_role(source)
    relative = _READ_SOURCE.fullmatch(source) if source != "registered value" else None
    if found is not None:
        bar = f"the {_with_unit(threshold_text, unit)} {found[1]}"
    elif relative is not None:
        times = f"{relative['scale']} x " if relative["scale"] else ""
        bar = f"{times}the {read_words(relative['read'])[0]} ({_with_unit(threshold_text, unit)})"
    else:
        bound = "minimum" if op in (">=", ">") else "maximum"
        bar = f"the registered {bound} {_with_unit(threshold_text, unit)}"
    compare = _COMPARE[op][0 if passed else 1]
    return f"{subject} {compare} {bar}: {verdict}"


def short_clause(condition: Mapping[str, Any]) -> str:
    """``chaos share upper end 0.716 > 0.5``: a failed condition in a few words, for the first screen."""
    ref = ReadRef.parse(condition["read"])
    words, unit = read_words(ref.name)
    end = "" if ref.bound is None else f" {ref.bound} end"
    failed = {">=": "<", "<=": ">", ">": "\u2264", "<": "\u2265"}[condition["op"]]
    unit = f" {unit}" if unit else ""
    if condition["value"] is None:
        return f"{words}{end} undefined"
    return f"{words}{end} {number(condition['value'])} {failed} {number(condition['threshold'])}{unit}"


@dataclass(frozen=True)
class ConditionResult:
    """One condition on one cell: the read's value against the threshold."""

    read: str
    value: float | None
    op: str
    threshold: float
    source: str
    passed: bool
    interval: tuple[float | None, float | None] | None = None
    """The read's bootstrap interval, when it has one (for the words only; the rule reads ``value``)."""
    point: float | None = None
    """The read's own value, where the condition reads an end of its interval (for the words only)."""

    def to_record(self) -> dict[str, Any]:
        """The result as decision.json records it under a cell's verdict, its words beside it."""
        return {
            "read": self.read,
            "value": self.value,
            "op": self.op,
            "threshold": json_float(self.threshold),
            "source": self.source,
            "passed": self.passed,
            "text": self.text(),
        }

    def text(self) -> str:
        """The condition in words (:func:`condition_text`)."""
        return condition_text(
            self.read,
            self.value,
            self.op,
            self.threshold,
            self.source,
            self.passed,
            self.interval,
            self.point,
        )


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
    rule: tuple[str, str | None, str | None] | None = None
    """Of a ``not_decided`` outcome: the rule's own (kind, AR arm, flow arm), the go it replaces."""


def not_decided(outcome: Outcome, worst_percent: float, target_percent: float, point: str) -> Outcome:
    """A go the design cannot stand on, as ``not_decided``: the rule's go (the arms it named and why)
    stays in the clauses, the kind names no arm, so phase 2 trains nothing from it (memo section 4: a go
    commits weeks of GRPO, and this one would be false at the worst point of the null's boundary in
    ``worst_percent`` of runs against the registered ``target_percent``). A park stands: it commits
    nothing, and its error is the power the page states."""
    if outcome.kind == "park":
        return outcome
    named = ", ".join(
        f"{head} arm {arm}" for head, arm in (("AR", outcome.ar_arm), ("flow", outcome.flow_arm)) if arm
    )
    clause = (
        f"not decided at this size: the rule gives {outcome.kind} ({named}), but at the worst point of "
        f"the null's boundary ({point}) the design goes in {number(worst_percent)} % of simulated runs, "
        f"above its {number(target_percent)} % target; `grpo-probe plan` sizes a design that holds it"
    )
    return Outcome(
        kind="not_decided",
        headline=OUTCOMES["not_decided"],
        ar_arm=None,
        flow_arm=None,
        qualifying=outcome.qualifying,
        ranking=outcome.ranking,
        clauses=(*outcome.clauses, clause),
        rule=(outcome.kind, outcome.ar_arm, outcome.flow_arm),
    )


def _condition(cond: Condition, reads: Mapping[str, float | None]) -> ConditionResult:
    value, threshold, passed = cond.compare(reads)
    base = cond.ref.name
    low, high = f"{base}_ci_low", f"{base}_ci_high"
    interval = (reads[low], reads[high]) if low in reads and high in reads else None
    shown = float("nan") if threshold is None else float(threshold)
    point = reads.get(base) if cond.ref.bound is not None else None
    return ConditionResult(cond.read, value, cond.op, shown, cond.source, bool(passed), interval, point)


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


def rank_cells(
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


def rank_text(
    keys: Sequence[tuple[str, str]], ranked: Sequence[tuple[str, str, Sequence[float | None]]]
) -> str:
    """The ranking that picks a head's arm, in words: ``ranked by sampled engagement rate (highest
    first), then ... : c3 (arm flow_teacher: 1, 0, -4.09 cm) > c5 (...)``.

    ``keys``: (read, prefer) in turn; ``ranked``: best first, (cell, arm, the cell's value of each key).
    """
    prefer = {"max": "highest first", "min": "lowest first"}
    by = ", then ".join(f"{read_words(read)[0]} ({prefer.get(p, p)})" for read, p in keys)

    def describe(cell: str, arm: str, values: Sequence[float | None]) -> str:
        shown = ", ".join(
            "undefined" if v is None else _with_unit(number(v), read_words(read)[1])
            for (read, _), v in zip(keys, values, strict=True)
        )
        return f"{cell} (arm {arm}{': ' + shown if shown else ''})"

    order = " > ".join(describe(*row) for row in ranked)
    return f"ranked by {by or 'registered order'}, remaining ties by registered order: {order}"


def _rank_clause(head: str, ranked: Sequence[Cell], keys: Sequence[RankKey], reads: Any) -> str:
    rows = [(c.id, c.arm, [reads[c.id].get(k.read) for k in keys]) for c in ranked]
    text = rank_text([(k.read, k.prefer) for k in keys], rows)
    return f"{head} arm: qualifying cells {text}; phase 2 trains arm {ranked[0].arm}"


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
        ranked = rank_cells(qualifying[head], rule.rank_by, reads)
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
