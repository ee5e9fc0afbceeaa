"""``grpo-probe study explore``: an exploratory re-analysis of a study's tables, labelled as such.

Why it exists: the calibrated study answered "yes" pooled over scenes and "not shown" within them, and a
pooled ordering in cm can be an ordering of scene sizes (GRPO normalises advantages by the group's std,
so the unit cannot be its signal). This command asks, of every read the probe has and of scale-free
versions (:data:`grpo_probe.study.explore_reads.CANDIDATE_READS`), whether it orders the arms *within* a
design, and whether it does so beyond the arms' competence. It was chosen after seeing that answer, so
it is exploration: its page says so on its first line, and a read it finds is a hypothesis for a study
locked before it runs, not a result.

Which arms: the study's counted subject arms (:func:`grpo_probe.study.inference.counted`), read from the
members' records by :func:`grpo_probe.study.rows.arm_rows`, with the study's own gain. Outputs, each
written atomically under ``<results>/studies/<study>/``: ``explore_reads.parquet`` (one row per counted
arm, one column per candidate), ``explore.json`` and ``explore.md``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from grpo_probe.atomic_io import atomic_path, atomic_write_json, atomic_write_text, read_json
from grpo_probe.provenance.manifest import relative_to_root
from grpo_probe.study.design import Study
from grpo_probe.study.explore_reads import CANDIDATE_READS, COMPETENCE, arm_tables
from grpo_probe.study.inference import counted
from grpo_probe.study.nested import nested_rank_correlation
from grpo_probe.study.rows import arm_rows
from grpo_probe.study.within_stats import MIN_ARMS, MIN_ARMS_PARTIAL, beyond_competence, within_design

__all__ = [
    "CONFIDENCE",
    "EXPLORATORY_LABEL",
    "PERMUTATIONS",
    "RESAMPLES",
    "analyse",
    "build_explore",
    "explore_markdown",
    "explore_rows",
    "write_explore",
]

CONFIDENCE = 0.95
RESAMPLES = 4000
"""Bootstrap resamples of every interval (designs, or designs then arms for the pooled rho)."""
PERMUTATIONS = 4999
"""Within-design permutations of the test (p resolves down to 1 / 5000)."""
EXPLORATORY_LABEL = (
    "**EXPLORATORY.** This re-analysis was chosen after seeing the calibrated validation study's answer "
    "(pooled over scenes yes, within a scene not shown); it tests no registered hypothesis, and any read "
    "it singles out must be confirmed by a study locked before it runs."
)
_IDENTITY = ("design", "arm", "head", "cell")


def explore_rows(study: Study, results: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One row per counted subject arm: identity, the study's gain, and every candidate read (None where
    the member did not record it). Reads ``<results>/<member>/decision.json``, ``phase2.json`` and the
    cell and anchor tables they name; a missing file is an error that names it."""
    folders = [Path(results) / m.design.name for m in study.members]
    rows = counted(
        arm_rows(study, [f / "decision.json" for f in folders], [f / "phase2.json" for f in folders])
    )
    folder_of = {m.design.name: f for m, f in zip(study.members, folders, strict=True)}
    cells: dict[str, dict[str, Any]] = {}
    out = []
    for row in rows:
        folder = folder_of[row.design]
        if row.design not in cells:
            record = read_json(folder / "decision.json", "decision record", ValueError)
            cells[row.design] = {c["id"]: c for c in record["cells"]}
        tables = arm_tables(folder, cells[row.design][row.cell])
        reads = {}
        for candidate in CANDIDATE_READS:
            value = candidate.read(tables)
            # + 0.0 writes a negative zero (a product with -0.0) as 0.0, the same bytes for the same rank
            reads[candidate.name] = value + 0.0 if value is not None and math.isfinite(value) else None
        identity = {"design": row.design, "arm": row.arm, "head": row.head, "cell": row.cell}
        out.append({**identity, "gain": row.gain, **reads})
    return out


def _pooled(
    read: str, values: list[float], gains: list[float], designs: list[str], seed: int
) -> dict[str, Any]:
    if len(values) < 3:
        return {"rho": None, "ci_low": None, "ci_high": None, "n": len(values), "degenerate_resamples": 0}
    c = nested_rank_correlation(
        read, values, gains, designs, seed=seed, resamples=RESAMPLES, confidence=CONFIDENCE
    )
    return {
        k: v for k, v in asdict(c).items() if k in ("rho", "ci_low", "ci_high", "n", "degenerate_resamples")
    }


def analyse(rows: Sequence[Mapping[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Per candidate read: the within-design answer, the pooled one and the one beyond competence, over
    the rows that record the read (and, for the partial, the competence read)."""
    answers = []
    for candidate in CANDIDATE_READS:
        name = candidate.name
        have = [r for r in rows if r[name] is not None]
        values, gains = [float(r[name]) for r in have], [float(r["gain"]) for r in have]
        designs = [str(r["design"]) for r in have]
        within = within_design(
            name,
            values,
            gains,
            designs,
            seed=seed,
            resamples=RESAMPLES,
            confidence=CONFIDENCE,
            permutations=PERMUTATIONS,
        )
        beyond = None
        if name != COMPETENCE:
            both = [r for r in have if r[COMPETENCE] is not None]
            beyond = beyond_competence(
                name,
                [float(r[name]) for r in both],
                [float(r["gain"]) for r in both],
                [float(r[COMPETENCE]) for r in both],
                [str(r["design"]) for r in both],
                seed=seed,
                resamples=RESAMPLES,
                confidence=CONFIDENCE,
            )
        answers.append(
            {
                "read": name,
                "unit": candidate.unit,
                "description": candidate.description,
                "arms": len(have),
                "within": asdict(within),
                "pooled": _pooled(name, values, gains, designs, seed),
                "beyond_competence": None if beyond is None else asdict(beyond),
            }
        )
    return answers


def _above(answer: Mapping[str, Any] | None) -> bool:
    return answer is not None and answer["ci_low"] is not None and answer["ci_low"] > 0


WINNER_ALPHA = 0.05
"""A winner's within-design permutation p must lie below this as well as its interval above zero: with few
designs the design bootstrap has few distinct resamples and can clear zero by chance, while the
permutation test's level holds at any number of designs."""


def _wins(answer: Mapping[str, Any]) -> bool:
    within = answer["within"]
    return _above(within) and within["p_value"] is not None and within["p_value"] < WINNER_ALPHA


def _winner(answers: Sequence[Mapping[str, Any]]) -> str:
    """The read whose within-design interval lies above zero and whose permutation p is below
    ``WINNER_ALPHA``, with the largest mean within rho. The line counts the reads tried: each is tested at
    5 %, so among that many reads with no within-design signal about one in twenty would pass by chance."""
    tried = sum(1 for a in answers if a["within"] is not None and a["within"]["mean"] is not None)
    above = [a for a in answers if _wins(a)]
    if not above:
        return f"Winner: none. No read orders arms within a design ({tried} reads tried)."
    best = max(above, key=lambda a: a["within"]["mean"])
    w, b = best["within"], best["beyond_competence"]
    if best["read"] == COMPETENCE:
        beyond = "it is the competence read itself"
    elif b is None or b["mean"] is None:
        beyond = "beyond competence not estimable"
    else:
        holds = "above zero" if _above(b) else "not above zero"
        beyond = f"beyond competence {_num(b['mean'])} {_ci(b)}, {holds}"
    return (
        f"Winner (exploratory, to be confirmed by a locked study): {best['read']}, mean within-design rho "
        f"{_num(w['mean'])} {_ci(w)} over {len(w['designs'])} designs, permutation p = {w['p_value']:.3g}; "
        f"{beyond}; {tried} reads tried, each at 5 %."
    )


def _competence_line(answers: Sequence[Mapping[str, Any]]) -> str:
    w = next(a for a in answers if a["read"] == COMPETENCE)["within"]
    if w["mean"] is None:
        return f"Competence ({COMPETENCE}): no design has {MIN_ARMS} arms with it, so it is not estimated."
    if _above(w):
        verdict = "competence alone orders the arms within designs"
    elif w["ci_high"] is not None and w["ci_high"] < 0:
        verdict = "competence alone orders the arms within designs, against the gain"
    else:
        verdict = "competence alone does not order the arms within designs"
    return (
        f"Competence ({COMPETENCE}, the anchor's mean progress): mean within-design rho {_num(w['mean'])} "
        f"{_ci(w)}, p = {w['p_value']:.3g}; {verdict}."
    )


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f}"


def _ci(answer: Mapping[str, Any]) -> str:
    if answer["ci_low"] is None:
        return "[no interval]"
    return f"[{answer['ci_low']:+.2f}, {answer['ci_high']:+.2f}]"


def explore_markdown(record: Mapping[str, Any]) -> str:
    """explore.md from explore.json alone: the label first, the winner line last."""
    s = record["study"]
    lines = [
        EXPLORATORY_LABEL,
        "",
        f"# Which read orders arms within a design? Study {s['name']} (exploratory)",
        "",
        f"{record['arms']} counted subject arms over {len(record['arms_per_design'])} designs ("
        + (", ".join(f"{d} {n}" for d, n in record["arms_per_design"].items()) or "none")
        + f"); gain: {s['gain']}. Intervals at {record['confidence']:.0%}, {record['resamples']} resamples; "
        f"{record['permutations']} within-design permutations; seed {record['seed']}.",
        "",
        "| read | unit | arms | within-design rho [CI] | within p | pooled rho [CI] "
        "| beyond competence [CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in record["reads"]:
        w, p, b = a["within"], a["pooled"], a["beyond_competence"]
        within = "n/a" if w["mean"] is None else f"{_num(w['mean'])} {_ci(w)} ({len(w['designs'])} designs)"
        p_value = "n/a" if w["p_value"] is None else f"{w['p_value']:.3g}"
        pooled = "n/a" if p["rho"] is None else f"{_num(p['rho'])} {_ci(p)}"
        if b is None:
            beyond = "(the covariate)"
        else:
            beyond = (
                "n/a" if b["mean"] is None else f"{_num(b['mean'])} {_ci(b)} ({len(b['designs'])} designs)"
            )
        lines.append(
            f"| {a['read']} | {a['unit']} | {a['arms']} | {within} | {p_value} | {pooled} | {beyond} |"
        )
    lines += [
        "",
        "## How to read it",
        "",
        "- Within-design rho: each design's Spearman rho of the read against the gain (designs with at "
        f"least {MIN_ARMS} arms recording the read; a design where the read is constant counts as 0), their "
        "unweighted mean over designs, with a percentile interval from resampling designs with replacement "
        "and a one-sided p from permuting the gains within each design, p = (1 + #{T_b >= T}) / (1 + B).",
        "- Pooled rho: Spearman over all counted arms, with the two-stage bootstrap (designs, then arms "
        "within each drawn design) of the study's page.",
        f"- Beyond competence: the mean over designs (at least {MIN_ARMS_PARTIAL} arms) of the partial rank "
        "correlation r_xy.z = (r_xy - r_xz r_yz) / sqrt((1 - r_xz^2)(1 - r_yz^2)) of read x and gain y "
        f"given z = {COMPETENCE}; a design where it is undefined counts as 0; the same design bootstrap.",
        "- With few designs the design bootstrap has few distinct resamples and its interval can clear zero "
        "by chance; read the permutation p beside it.",
        "",
        "## The candidate reads",
        "",
        *[f"- `{a['read']}` ({a['unit']}): {a['description']}" for a in record["reads"]],
        "",
        record["competence"],
        "",
        record["winner"],
        "",
    ]
    return "\n".join(lines)


def _table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    schema = pa.schema(
        [
            *(pa.field(n, pa.string(), nullable=False) for n in _IDENTITY),
            pa.field("gain", pa.float64(), nullable=False),
            *(pa.field(c.name, pa.float64()) for c in CANDIDATE_READS),
        ]
    )
    return pa.Table.from_pydict({n: [r[n] for r in rows] for n in schema.names}, schema=schema)


def write_explore(
    study: Study, rows: Sequence[Mapping[str, Any]], folder: str | os.PathLike[str]
) -> dict[str, Any]:
    """Analyse ``rows`` and write explore_reads.parquet, explore.json and explore.md into ``folder``
    (each atomically); returns the record."""
    folder = Path(folder)
    answers = analyse(rows, study.seed)
    per_design: dict[str, int] = {}
    for r in rows:
        per_design[r["design"]] = per_design.get(r["design"], 0) + 1
    record: dict[str, Any] = {
        "exploratory": True,
        "label": EXPLORATORY_LABEL,
        "study": {
            "name": study.name,
            "path": relative_to_root(study.path),
            "sha256": study.sha256,
            "gain": study.gain,
            **({} if study.gain_policy is None else {"gain_policy": study.gain_policy}),
        },
        "arms": len(rows),
        "arms_per_design": per_design,
        "seed": study.seed,
        "generators": "numpy_generator(seed, tag('study'), tag('explore'), "
        "tag(<within|permutation|partial>), tag(read)); pooled: numpy_generator(seed, tag('study'), "
        "tag('nested'), tag(read))",
        "confidence": CONFIDENCE,
        "resamples": RESAMPLES,
        "permutations": PERMUTATIONS,
        "competence_read": COMPETENCE,
        "reads": answers,
        "table": "explore_reads.parquet",
    }
    record["competence"] = _competence_line(answers)
    record["winner"] = _winner(answers)
    with atomic_path(folder / "explore_reads.parquet") as tmp:
        pq.write_table(_table(rows), tmp, compression="zstd", write_statistics=False)
    atomic_write_json(folder / "explore.json", record)
    atomic_write_text(folder / "explore.md", explore_markdown(record))
    return record


def build_explore(study: Study, results: str | os.PathLike[str]) -> Path:
    """The whole command: rows from ``results``, then the three files; returns the page's path."""
    folder = study.folder(results)
    write_explore(study, explore_rows(study, results), folder)
    return folder / "explore.md"
