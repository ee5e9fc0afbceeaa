"""What every registered version of the design decides, on this run's tables, and how stably.

Why: an amendment can change the decision rule after results exist (the registered probe's first
amendment changed how qualifying flow cells are ranked, after its first full run). A reader must see what
the rule as originally registered decides, and what each amendment's rule decides, side by side, with
whether each amendment came after results. Each version's analysis numbers and rule are rebuilt from the
prereg's amendment record (:attr:`grpo_probe.prereg.Prereg.versions`, checked against the hashes the
lock recorded); here each is applied to the same tables: reads recomputed only when that version's
``analysis:`` numbers differ from this run's, the version's rule evaluated, and the outcome resampled
over seeds (:mod:`grpo_probe.analysis.rule.stability`). A version that cannot be rebuilt or evaluated is
listed with the reason, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grpo_probe.analysis.cells.seed_columns import SeedColumns
from grpo_probe.analysis.rule.decision_rule import Outcome, evaluate_rule
from grpo_probe.analysis.rule.stability import resample_indices, stability
from grpo_probe.prereg import AnalysisNumbers, Cell, DecisionRule, Prereg
from grpo_probe.prereg.amendments import Amendment, RegisteredVersion

__all__ = ["ReadsFor", "outcome_record", "version_records"]

ReadsFor = Callable[
    [AnalysisNumbers], tuple[Mapping[str, Mapping[str, float | None]], Mapping[str, SeedColumns]]
]
"""analysis numbers -> (every cell's reads, every cell's per-seed columns) under those numbers."""


def outcome_record(outcome: Outcome) -> dict[str, Any]:
    """The outcome as decision.json records it."""
    return {
        "kind": outcome.kind,
        "headline": outcome.headline,
        "ar_arm": outcome.ar_arm,
        "flow_arm": outcome.flow_arm,
        "qualifying": {head: list(ids) for head, ids in outcome.qualifying},
        "ranking": {head: list(ids) for head, ids in outcome.ranking},
        "clauses": list(outcome.clauses),
        # only a go the design is too small to stand on has it: other records keep their bytes
        **(
            {}
            if outcome.rule is None
            else {"rule": dict(zip(("kind", "ar_arm", "flow_arm"), outcome.rule, strict=True))}
        ),
    }


def _amendment_record(index: int, amendment: Amendment) -> dict[str, Any]:
    return {
        "number": index,
        "date": amendment.date,
        "reason": amendment.reason,
        "fields": list(amendment.fields),
        "after_results": amendment.after_results,
        "replaces": None
        if amendment.replaces is None
        else [{"path": c.path, "change": "added" if c.added else "replaced"} for c in amendment.replaces],
        "undeclared": list(amendment.undeclared),
    }


def _stability_record(
    rule: DecisionRule,
    cells: Sequence[Cell],
    columns: Mapping[str, SeedColumns],
    outcome: Outcome,
    analysis: AnalysisNumbers,
) -> dict[str, Any]:
    n_seeds = len(next(iter(columns.values())).std_progress_cm)
    index = resample_indices(analysis.bootstrap.seed, analysis.bootstrap.resamples, n_seeds)
    found = stability(rule, cells, columns, outcome, index, analysis.bootstrap)
    b = found.resamples
    return {
        "resamples": b,
        "seed": analysis.bootstrap.seed,
        "n_seeds": n_seeds,
        "same_outcome": found.same_outcome,
        "same_outcome_fraction": found.same_outcome / b,
        "same_kind": found.same_kind,
        "same_kind_fraction": found.same_kind / b,
        "outcomes": [
            {"kind": kind, "ar_arm": ar, "flow_arm": flow, "count": count, "fraction": count / b}
            for kind, ar, flow, count in found.outcomes
        ],
        "not_resampled": found.not_resampled,
    }


def _versions_of(prereg: Prereg) -> tuple[RegisteredVersion, ...]:
    """The prereg's versions; a design built without them is its own single version."""
    if prereg.versions:
        return prereg.versions
    n = len(prereg.amendments)
    return (
        RegisteredVersion(
            index=n,
            sha256=None,
            date=prereg.lock_date,
            amendment=prereg.amendments[-1] if n else None,
            analysis=prereg.analysis,
            decision_rule=prereg.decision_rule,
            differs_in=(),
            verified=False,
            problem=None,
        ),
    )


def version_records(
    prereg: Prereg, cells: Sequence[Cell], reads_for: ReadsFor, current: Outcome
) -> list[dict[str, Any]]:
    """One record per registered version, oldest first: its identity, the amendment that made it, its
    rule, what that rule decides on this run's tables, and how often that holds over seed resamples.

    ``current`` is the outcome of this run's own rule (the last version), already evaluated.
    """
    versions = _versions_of(prereg)
    last = versions[-1].index
    records = []
    for version in versions:
        record: dict[str, Any] = {
            "version": version.index,
            "label": version.label,
            "current": version.index == last,
            "sha256": version.sha256,
            "locked": version.date,
            "verified": version.verified,
            "amendment": None
            if version.amendment is None
            else _amendment_record(version.index, version.amendment),
            "differs_in": list(version.differs_in),
            "problem": version.problem,
            "analysis_recomputed": False,
            "rule": None,
            "outcome": None,
            "stability": None,
        }
        if version.analysis is None or version.decision_rule is None:
            records.append(record)
            continue
        rule = prereg.decision_rule if version.index == last else version.decision_rule
        analysis = prereg.analysis if version.index == last else version.analysis
        reads, columns = reads_for(analysis)
        try:
            outcome = current if version.index == last else evaluate_rule(rule, cells, reads)[1]
        except (KeyError, ValueError) as exc:
            record["problem"] = f"its rule cannot be evaluated on these reads: {exc}"
            records.append(record)
            continue
        record["analysis_recomputed"] = analysis != prereg.analysis
        record["rule"] = rule.to_record()
        record["outcome"] = outcome_record(outcome)
        record["stability"] = _stability_record(rule, cells, columns, outcome, analysis)
        records.append(record)
    return records
