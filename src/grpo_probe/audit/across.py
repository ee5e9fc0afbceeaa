"""Compare two decision records (decision.json) that may come from different environments.

Why: bytes are the proof only where the two environments promised the same bytes
(:func:`grpo_probe.provenance.environments.same_numerics_environment`). On another machine a rerun's
floats can differ in their last bits, every table hash with them, and an auditor comparing bytes cannot
tell that from tampering. So the comparison first asks whether the environments are byte-compatible:

- same environment: the records must be equal, every table hash in ``provenance`` and every value (the
  ``environment`` block aside, which may name another CPU model of the same class); any difference is
  a finding, and is named;
- another environment: only what holds across machines is compared. The design and the code must be
  equal (prereg hash, design files, the registered settings the record restates): those are real
  differences in any environment. The decision must be the same (outcome kind, qualifying cells, the
  arms chosen), and every interval a cell reads must overlap its counterpart. Each rule clause whose read
  sits within half an interval width of its threshold is flagged as machine-sensitive: there, a change
  in the last bits of the numbers can flip the clause, and with it possibly the decision.

Standard library only: an auditor can compare two records without the rollout stack installed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from grpo_probe.provenance.environments import (
    environment_line,
    environment_value_lines,
    same_numerics_environment,
)

__all__ = [
    "DESIGN_KEYS",
    "DecisionComparison",
    "Interval",
    "IntervalCheck",
    "SensitiveClause",
    "compare_decisions",
    "format_comparison",
    "keyed_record",
    "record_differences",
]

DESIGN_KEYS: tuple[str, ...] = (
    "prereg",
    "design_files",
    "code",
    "format",
    "analysis",
    "decision_rule",
    "env",
)
"""Top-level keys of decision.json that the design and the code fix, so no machine may change them: the
prereg and its files by hash, the code (when the record names it), and the registered settings the record
restates (the analysis numbers, the rule, the environment's identity)."""

OUTCOME_KEYS: tuple[str, ...] = ("kind", "qualifying", "ar_arm", "flow_arm")
"""What makes two decisions the same: the outcome, the cells that qualify, and the arms phase 2 trains
(the ranking behind an arm may reorder without changing it)."""

_CI_LOW, _CI_HIGH = "_ci_low", "_ci_high"
_BOUND_KEYS = {"lower": _CI_LOW, "upper": _CI_HIGH}
"""How a rule names an end of a read's interval (``chaos_share.upper``) and how the reads hold it
(``chaos_share_ci_high``), as :class:`grpo_probe.prereg.rule.ReadRef` parses it."""

_SHOWN = 12


@dataclass(frozen=True)
class Interval:
    """A read's value and its bootstrap interval in one record; None where the record leaves it undefined."""

    point: float | None
    low: float | None
    high: float | None

    @property
    def defined(self) -> bool:
        return self.low is not None and self.high is not None

    def __str__(self) -> str:
        if not self.defined:
            return "undefined"
        point = "" if self.point is None else f"{self.point:.4g} "
        return f"{point}[{self.low:.4g}, {self.high:.4g}]"


@dataclass(frozen=True)
class IntervalCheck:
    """One read of one cell, its interval in either record, and whether the two intervals overlap."""

    cell: str
    read: str
    intervals: tuple[Interval, Interval]

    @property
    def overlaps(self) -> bool:
        """Closed intervals that share a point; undefined in both counts as agreeing, in one only not."""
        a, b = self.intervals
        if not a.defined and not b.defined:
            return True
        if not a.defined or not b.defined:
            return False
        assert a.low is not None and a.high is not None and b.low is not None and b.high is not None
        return max(a.low, b.low) <= min(a.high, b.high)


@dataclass(frozen=True)
class SensitiveClause:
    """A rule clause whose read, in either record, sits within half its interval's width of the threshold."""

    cell: str
    criterion: str
    read: str
    op: str
    threshold: float
    values: tuple[float | None, float | None]
    """The clause's read in either record (None where that record does not flag or lacks it)."""
    half_widths: tuple[float | None, float | None]


@dataclass(frozen=True)
class DecisionComparison:
    """Two decision records compared as their environments allow; ``labels`` name the two sides."""

    labels: tuple[str, str]
    environment_differs: tuple[str, ...]
    """Keys of :data:`~grpo_probe.provenance.environments.NUMERICS_KEYS` that differ or are unknown."""
    environments: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]
    differences: tuple[str, ...]
    """Every path at which the records differ (``environment`` aside): a finding in the same environment."""
    design_differences: tuple[str, ...]
    """Design and code that differ: a real difference in any environment."""
    outcome_differences: tuple[str, ...]
    intervals: tuple[IntervalCheck, ...]
    sensitive: tuple[SensitiveClause, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def same_environment(self) -> bool:
        return not self.environment_differs

    @property
    def identical(self) -> bool:
        """Byte-compatible environments and equal records."""
        return self.same_environment and not self.differences

    @property
    def disjoint(self) -> tuple[IntervalCheck, ...]:
        """Reads whose two intervals do not overlap."""
        return tuple(check for check in self.intervals if not check.overlaps)

    @property
    def consistent(self) -> bool:
        """Same design and code, same decision, every interval overlapping: all another machine can show."""
        return not self.design_differences and not self.outcome_differences and not self.disjoint

    @property
    def passed(self) -> bool:
        """Identical in the same environment; consistent in another one."""
        return self.identical if self.same_environment else self.consistent

    @property
    def headline(self) -> str:
        """One line: the verdict an auditor reads first."""
        if self.same_environment:
            if not self.differences:
                return "same environment: identical"
            return f"same environment: different: {_listed([_path_of(d) for d in self.differences], 6)}"
        if self.consistent:
            return "another environment: same decision, every interval overlaps"
        parts = []
        if self.design_differences:
            parts.append(
                f"different design or code: {_listed([_path_of(d) for d in self.design_differences], 4)}"
            )
        if self.outcome_differences:
            parts.append(f"different decision: {_listed([_path_of(d) for d in self.outcome_differences], 4)}")
        if self.disjoint:
            reads = [f"{check.cell} {check.read}" for check in self.disjoint]
            parts.append(f"{len(reads)} intervals do not overlap: {_listed(reads, 4)}")
        return "another environment: " + "; ".join(parts)


def _listed(items: Sequence[str], shown: int) -> str:
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more} more" if more > 0 else "")


def _path_of(difference: str) -> str:
    return difference.partition(": ")[0]


def _number(value: Any) -> float | None:
    """A finite float, or None for what a record leaves undefined (null, NaN, a non-number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def keyed_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record with its lists of named things keyed by name (tables and design files by path, cells by
    id), so a difference names the table or cell rather than a position; without ``environment``."""
    keyed = {key: value for key, value in record.items() if key != "environment"}
    for key, name in (("provenance", "path"), ("design_files", "path"), ("cells", "id")):
        items = keyed.get(key)
        if isinstance(items, list) and all(isinstance(item, Mapping) and name in item for item in items):
            keyed[key] = {f"[{item[name]}]": item for item in items}
    return keyed


def record_differences(a: Any, b: Any, labels: tuple[str, str] = ("a", "b"), path: str = "") -> list[str]:
    """Every path at which ``a`` and ``b`` differ: a key on one side only, or unequal leaves.

    A key written ``[name]`` (how :func:`keyed_record` keys tables and cells) is joined without a dot:
    ``provenance[anchors/ar.parquet].sha256``."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            where = f"{path}{key}" if str(key).startswith("[") or not path else f"{path}.{key}"
            if key not in a or key not in b:
                out.append(f"{where}: only in {labels[0] if key in a else labels[1]}")
            else:
                out += record_differences(a[key], b[key], labels, where)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in record_differences(x, y, labels, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {labels[0]} {a!r}, {labels[1]} {b!r}"[:300]]


def _design_differences(a: Mapping[str, Any], b: Mapping[str, Any], labels: tuple[str, str]) -> list[str]:
    keyed_a, keyed_b = keyed_record(a), keyed_record(b)
    out = []
    for key in DESIGN_KEYS:
        if key in keyed_a or key in keyed_b:
            out += record_differences({key: keyed_a.get(key)}, {key: keyed_b.get(key)}, labels)
    cells_a, cells_b = list(_cells(a)), list(_cells(b))
    if cells_a != cells_b:
        out.append(f"cells: {labels[0]} {cells_a!r}, {labels[1]} {cells_b!r}")
    versions = [
        [(version.get("version"), version.get("sha256")) for version in _versions(record)]
        for record in (a, b)
    ]
    if versions[0] != versions[1]:
        out.append(f"versions.sha256: {labels[0]} {versions[0]!r}, {labels[1]} {versions[1]!r}")
    return out


def _versions(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The registered versions the record recomputed (amendments), oldest first."""
    return [version for version in record.get("versions") or () if isinstance(version, Mapping)]


def _outcome(outcome: Any) -> dict[str, Any]:
    outcome = outcome if isinstance(outcome, Mapping) else {}
    picked = {key: outcome.get(key) for key in OUTCOME_KEYS}
    if isinstance(picked["qualifying"], Mapping):  # which cells qualify, not the order they are listed in
        picked["qualifying"] = {head: sorted(cells) for head, cells in picked["qualifying"].items()}
    return picked


def _outcome_differences(a: Mapping[str, Any], b: Mapping[str, Any], labels: tuple[str, str]) -> list[str]:
    out = record_differences(
        {"outcome": _outcome(a.get("outcome"))}, {"outcome": _outcome(b.get("outcome"))}, labels
    )
    versions_a, versions_b = _versions(a), _versions(b)
    if len(versions_a) == len(versions_b):  # another count is a design difference, named there
        for index, (old, new) in enumerate(zip(versions_a, versions_b, strict=True)):
            out += record_differences(
                _outcome(old.get("outcome")),
                _outcome(new.get("outcome")),
                labels,
                f"versions[{index}].outcome",
            )
    return out


def _intervals(reads: Mapping[str, Any]) -> dict[str, Interval]:
    out = {}
    for key in reads:
        if key.endswith(_CI_LOW) and key.removesuffix(_CI_LOW) + _CI_HIGH in reads:
            base = key.removesuffix(_CI_LOW)
            low, high = _number(reads[key]), _number(reads[base + _CI_HIGH])
            if low is None or high is None:
                low = high = None
            out[base] = Interval(_number(reads.get(base)), low, high)
    return out


def _cells(record: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    cells = record.get("cells") or ()
    return {cell["id"]: cell for cell in cells if isinstance(cell, Mapping) and "id" in cell}


def _interval_checks(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[IntervalCheck]:
    checks = []
    cells_b = _cells(b)
    for cell_id, cell_a in _cells(a).items():
        if cell_id not in cells_b:
            continue  # a cell in one record only is a design difference
        reads_a, reads_b = _intervals(cell_a.get("reads", {})), _intervals(cells_b[cell_id].get("reads", {}))
        for read in sorted(set(reads_a) | set(reads_b)):
            missing = Interval(None, None, None)
            checks.append(
                IntervalCheck(cell_id, read, (reads_a.get(read, missing), reads_b.get(read, missing)))
            )
    return checks


def _read_interval(read: str, reads: Mapping[str, Any]) -> Interval | None:
    """The interval of the read a clause names (``choice_std_cm.lower`` -> ``choice_std_cm``'s)."""
    name, dot, _ = read.partition(".")
    if not dot:
        for suffix in _BOUND_KEYS.values():
            if read.endswith(suffix):
                name = read.removesuffix(suffix)
    interval = _intervals(reads).get(name)
    return interval if interval is not None and interval.defined else None


def _clause_reads(
    record: Mapping[str, Any],
) -> dict[tuple[str, str, str], tuple[str, float, float, float]]:
    """(cell, criterion, read) -> (op, threshold, value, half width) for each clause of the criteria that
    decide the cell's head whose read lies within half its interval's width of the threshold."""
    rule = record.get("decision_rule") or {}
    qualifies = rule.get("qualifies") or {}
    found = {}
    for cell_id, cell in _cells(record).items():
        reads = cell.get("reads") or {}
        criteria = ((cell.get("verdict") or {}).get("criteria")) or {}
        for name in qualifies.get(cell.get("head"), ()):
            for condition in (criteria.get(name) or {}).get("conditions", ()):
                read = condition.get("read")
                value, threshold = _number(condition.get("value")), _number(condition.get("threshold"))
                interval = _read_interval(read, reads) if isinstance(read, str) else None
                if value is None or threshold is None or interval is None:
                    continue  # a read without an interval has no width to be near its threshold by
                assert interval.low is not None and interval.high is not None
                half = (interval.high - interval.low) / 2
                if abs(value - threshold) <= half:
                    found[(cell_id, name, read)] = (condition.get("op", "?"), threshold, value, half)
    return found


def _sensitive(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[SensitiveClause]:
    near_a, near_b = _clause_reads(a), _clause_reads(b)
    out = []
    for key in sorted(set(near_a) | set(near_b)):
        side_a, side_b = near_a.get(key), near_b.get(key)
        op, threshold, _, _ = side_a or near_b[key]
        cell, criterion, read = key
        out.append(
            SensitiveClause(
                cell,
                criterion,
                read,
                op,
                threshold,
                values=(side_a[2] if side_a else None, side_b[2] if side_b else None),
                half_widths=(side_a[3] if side_a else None, side_b[3] if side_b else None),
            )
        )
    return out


def compare_decisions(
    this: Mapping[str, Any],
    other: Mapping[str, Any],
    labels: tuple[str, str] = ("this", "other"),
    *,
    environments: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] | None = None,
) -> DecisionComparison:
    """Compare two decision records as their environments allow (see the module's docstring).

    ``labels`` name the two records in every line (``("rerun", "recorded")``, ``("run", "reference")``).
    The environments are the records' own ``environment`` blocks unless ``environments`` gives them (an
    audit knows this machine's and the manifest's). A record without an ``environment`` block (written
    before it was recorded) is of an unknown environment, so it is compared as from another one.
    """
    env_a, env_b = environments or (this.get("environment"), other.get("environment"))
    notes = []
    if "code" not in this and "code" not in other:
        notes.append(
            "neither record names its code; `grpo-probe verify` compares the manifests' code.sources_sha256"
        )
    return DecisionComparison(
        labels=labels,
        environment_differs=tuple(same_numerics_environment(env_a, env_b)),
        environments=(env_a, env_b),
        differences=tuple(record_differences(keyed_record(this), keyed_record(other), labels)),
        design_differences=tuple(_design_differences(this, other, labels)),
        outcome_differences=tuple(_outcome_differences(this, other, labels)),
        intervals=tuple(_interval_checks(this, other)),
        sensitive=tuple(_sensitive(this, other)),
        notes=tuple(notes),
    )


def _sensitive_line(clause: SensitiveClause, labels: tuple[str, str]) -> str:
    sides = [
        f"{label} {value:.4g} (half width {half:.3g})"
        for label, value, half in zip(labels, clause.values, clause.half_widths, strict=True)
        if value is not None and half is not None
    ]
    return (
        f"{clause.cell} {clause.criterion}: {clause.read} {clause.op} {clause.threshold:g}: "
        f"{'; '.join(sides)}"
    )


def format_comparison(result: DecisionComparison, *, limit: int = 20) -> str:
    """The report: the headline first, then the environment, and what was compared with what it found.

    ``limit`` caps each list (every difference is in ``result``)."""
    labels = result.labels
    lines = [result.headline, environment_line(result.environment_differs)]
    lines += [
        f"  {line}"
        for line in environment_value_lines(*result.environments, labels, result.environment_differs)
    ]

    def listed(title: str, items: Sequence[str]) -> None:
        lines.append(title)
        lines.extend(f"  {item}" for item in items[:limit])
        if len(items) > limit:
            lines.append(f"  ... and {len(items) - limit} more")

    if result.same_environment:
        if result.differences:
            listed(f"differs ({len(result.differences)} paths; bytes must match here):", result.differences)
    else:
        if result.design_differences:
            listed(
                "design or code differs (a real difference in any environment):", result.design_differences
            )
        else:
            lines.append("design and code: same")
        if result.outcome_differences:
            listed("decision differs:", result.outcome_differences)
        else:
            lines.append("decision: same")
        disjoint = [
            f"{check.cell} {check.read}: {labels[0]} {check.intervals[0]}, {labels[1]} {check.intervals[1]}"
            for check in result.disjoint
        ]
        if disjoint:
            listed(f"intervals that do not overlap ({len(disjoint)} of {len(result.intervals)}):", disjoint)
        else:
            lines.append(f"intervals: all {len(result.intervals)} overlap")
    if result.sensitive and not result.same_environment:  # bytes must match here, near a threshold or not
        listed(
            "machine-sensitive clauses (the read within half its interval's width of the threshold):",
            [_sensitive_line(clause, labels) for clause in result.sensitive],
        )
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)
