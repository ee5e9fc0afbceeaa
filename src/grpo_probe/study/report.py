"""validation.md, validation.json, its per-arm table and the figure "probe read against pilot gain".

Why the page reads in this order: a lab deciding whether to trust the probe needs, first, how often a
study of this size would see a real ordering (the power, from the registered simulation), then the answer
with its nested interval, then the numbers it acts on (of the arms the probe calls go, how many gained; of
those it calls no, how many did not), and only then the controls, the figure and the per-arm evidence.
The page says it plainly when the study is underpowered or did not reach its registered size, and whether
each control behaved as a control must (a positive control whose gain is not resolved cannot tell a probe
that fails from a pilot that cannot learn). A study whose registered answer is within designs leads with
that answer's line (it states its power in it), then the power, then each design's own rho, then the
pooled rho as a secondary (:mod:`grpo_probe.study.answer_text` words them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from grpo_probe.atomic_io import atomic_path, atomic_write_bytes, atomic_write_json, atomic_write_text
from grpo_probe.provenance.manifest import relative_to_root
from grpo_probe.study.answer_text import (
    answer_text,
    pct,
    per_design_text,
    pooled_secondary,
    power_text,
    within_answer_text,
    within_text,
)
from grpo_probe.study.design import Study
from grpo_probe.study.figure import study_figure
from grpo_probe.study.inference import StudyInference, counted, infer
from grpo_probe.study.power import StudyPower
from grpo_probe.study.rows import ArmRow, arm_rows

__all__ = ["build_study_report", "study_markdown"]

_ROLE_TEXT = {
    "subject": "subject",
    "positive_control": "positive control",
    "negative_control": "negative control",
}
_POLICY_TEXT = {"anchor": "anchor (deployed)", "sampled": "sampled policy (trained)"}
_INFERENCE_TEXT = {
    "arms": "percentile bootstrap over arms",
    "designs_then_arms": "two-stage percentile bootstrap (designs, then arms within each drawn design)",
}


def _controls(rows: Sequence[ArmRow]) -> list[str]:
    """One sentence per control member: did it behave as a control must?"""
    lines = []
    for design in dict.fromkeys(r.design for r in rows if r.role != "subject"):
        arms = [r for r in rows if r.design == design]
        role = arms[0].role
        gained = [r.arm for r in arms if r.pilot_verdict == "held"]
        unmoved = [r.arm for r in arms if not r.moved]
        if role == "positive_control":
            lines.append(
                f"Positive control {design}: "
                + (
                    f"the pilot resolved a gain above zero on {', '.join(gained)}, so the pilot can learn at "
                    "this compute."
                    if gained
                    else "the pilot resolved no gain above zero on any arm, so at this compute the study "
                    "cannot tell a probe that fails from a pilot that cannot learn."
                )
            )
        else:
            said_yes = [r.arm for r in arms if r.qualifies]
            probe = (
                f"the probe qualified {', '.join(said_yes)} (it must not)"
                if said_yes
                else "the probe qualified no arm, as it must"
            )
            pilot = (
                f"the pilot resolved a gain on {', '.join(gained)} (it must not)"
                if gained
                else "the pilot resolved no gain, as it must not"
            )
            lines.append(f"Negative control {design}: {probe}; {pilot}.")
        if unmoved:
            lines[-1] += (
                f" The pilot did not move {', '.join(unmoved)}, so the held-out change there is the draws' "
                'luck, not learning ("not tested"; left out of the rank correlation).'
            )
    return lines


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}g}"


def _classification_lines(inference: StudyInference) -> list[str]:
    c = inference.classification
    conf = f"{c.confidence:.0%} Wilson intervals"

    def share(x: float | None, low: float | None, high: float | None) -> str:
        return "n/a" if x is None else f"{pct(x)} [{pct(low)}, {pct(high)}]"

    return [
        f"The probe as a classifier, over the {inference.counted} counted subject arms (gained: the "
        f"pilot's held-out interval lies above zero; {conf}):",
        "",
        "| | pilot gained | pilot did not gain | share |",
        "|---|---|---|---|",
        f"| probe says go | {c.go_gained} | {c.go_not} | gained: "
        f"{share(c.go_gained_share, c.go_gained_ci_low, c.go_gained_ci_high)} |",
        f"| probe says no | {c.no_gained} | {c.no_not} | did not gain: "
        f"{share(c.no_not_share, c.no_not_ci_low, c.no_not_ci_high)} |",
        "",
        f"Agreement: {share(c.accuracy, c.accuracy_ci_low, c.accuracy_ci_high)}. "
        + (
            "Fisher's exact test (one-sided, go arms gain more often than no arms): "
            + (
                "not defined, a margin of the table is empty."
                if c.fisher_p is None
                else f"p = {c.fisher_p:.3g}."
            )
        ),
    ]


def _left_out(rows: Sequence[ArmRow], arms: Sequence[ArmRow]) -> list[str]:
    kept = {id(r) for r in arms}
    out = []
    for r in rows:
        if r.role != "subject" or id(r) in kept:
            continue
        why = []
        if not r.engages:
            why.append(f"did not engage (engagement {_fmt(r.engagement)})")
        if not r.moved:
            why.append("the pilot did not move it")
        out.append(f"- {r.design}/{r.arm}: {'; '.join(why)}")
    return out


def _table(study: Study, rows: Sequence[ArmRow], arms: Sequence[ArmRow]) -> pa.Table:
    """One row per arm: identity, each registered read, engagement, whether it counts, the verdicts."""
    kept = {id(r) for r in arms}
    schema = pa.schema(
        [
            *(pa.field(n, pa.string(), nullable=False) for n in ("design", "role", "arm", "head", "cell")),
            *(pa.field(read, pa.float64()) for read in study.reads),
            pa.field("engagement", pa.float64()),
            pa.field("engages", pa.bool_(), nullable=False),
            pa.field("counted", pa.bool_(), nullable=False),
            pa.field("qualifies", pa.bool_(), nullable=False),
            pa.field("predicted", pa.bool_(), nullable=False),
            *(pa.field(n, pa.float64(), nullable=False) for n in ("gain", "gain_ci_low", "gain_ci_high")),
            pa.field("gain_se", pa.float64()),
            pa.field("pilot_verdict", pa.string(), nullable=False),
            pa.field("moved", pa.bool_(), nullable=False),
        ]
    )

    def value(r: ArmRow, name: str) -> Any:
        if name in study.reads:
            return r.reads[name]
        return id(r) in kept if name == "counted" else getattr(r, name)

    return pa.Table.from_pydict({n: [value(r, n) for r in rows] for n in schema.names}, schema=schema)


def _reliability_text(rel: Mapping[str, Any]) -> str:
    """How reliable the gains are, in the words of the method the run used (replicates or standard errors)."""
    if "replicates" not in rel:
        return (
            "Reliability = 1 - mean(se^2) / var(gains) over the counted subject arms (classical test theory: "
            "true-gain variance over observed-gain variance), se = s_d / sqrt(n) of each arm's paired "
            f"held-out differences: {_fmt(rel['reliability'], 2)} over {rel['n']} arms (var(gains) "
            f"{_fmt(rel['observed_var'])}, mean se^2 {_fmt(rel['mean_error_var'])}). A rank correlation "
            "with the true gains is attenuated by measurement error; the power above is simulated at this "
            "reliability too."
        )
    k = rel["replicates"]
    return (
        f"Reliability of each arm's gain, the mean of its {k} pilot replicates (each trained from the same "
        "initial policy on training spawns of its own), from the replicates' own spread: R_k = var_b / "
        "(var_b + var_e / k), var_e the mean over arms of the replicates' variance (one pilot's error: "
        "training luck and held-out noise), var_b = var(arm means) - var_e / k the true gains' variance "
        "(ICC(1,k) of the one-way random-effects model, Shrout & Fleiss 1979; the Spearman-Brown prophecy "
        f"of one replicate's reliability): {_fmt(rel['reliability'], 2)} over {rel['n']} arms (var(arm "
        f"means) {_fmt(rel['observed_var'])}, var_e {_fmt(rel['within_var'])}, var_e / k "
        f"{_fmt(rel['mean_error_var'])}; one replicate's reliability R_1 {_fmt(rel['single_replicate'], 2)}"
        "). A rank correlation with the true gains is attenuated by measurement error; the power above is "
        "simulated at this reliability too."
    )


def _policy_gains_markdown(rows: Sequence[Mapping[str, Any]], read: str) -> list[str]:
    """Per arm, the held-out gain of each policy its member scored: the anchor (what a lab deploys) and
    the sampled policy (what GRPO trains), each the mean over the replicates with its interval and se;
    nothing when no member scored more than the anchor's own change."""
    scored = [r for r in rows if r.get("policy_gains")]
    if not scored:
        return []

    def cell(gains: Mapping[str, Any], policy: str) -> str:
        g = gains.get(policy)
        if g is None:
            return "not scored"
        return f"{g['gain']:+.3g} [{g['ci_low']:+.3g}, {g['ci_high']:+.3g}] (se {_fmt(g['se'], 2)})"

    lines = [
        "",
        "## What GRPO trains and what a lab deploys",
        "",
        f"Held-out gain in {read} of each policy, the mean over the pilot replicates [the paired t interval "
        "of their mean per-seed difference] (se = s_r / sqrt(R) from the replicates' spread): the anchor "
        "(greedy / ODE, what a lab deploys) and the sampled policy (the pilot's sampler, what GRPO trains).",
        "",
        "| design | arm | counted | anchor gain | sampled-policy gain |",
        "|---|---|---|---|---|",
    ]
    for r in scored:
        gains = r["policy_gains"]
        lines.append(
            f"| {r['design']} | {r['arm']} | {'yes' if r['counted'] else 'no'} | {cell(gains, 'anchor')} | "
            f"{cell(gains, 'sampled')} |"
        )
    return lines


def _power_record(power: StudyPower | None) -> dict[str, Any] | None:
    """A power simulation for the record; ``answer`` and ``permutations`` only for the within-designs
    answer, so a pooled study's record keeps its bytes."""
    if power is None:
        return None
    fields = asdict(power)
    if power.answer == "pooled":
        del fields["answer"], fields["permutations"]
    return fields


def _row_record(row: ArmRow) -> dict[str, Any]:
    """One per-arm row of the record; ``replicate_gains`` only for a gain registered by policy and
    ``policy_gains`` only for members that score both policies, so an earlier study keeps its bytes."""
    fields = asdict(row)
    for name in ("replicate_gains", "policy_gains"):
        if not fields[name]:
            del fields[name]
    return fields


def study_markdown(record: Mapping[str, Any]) -> str:
    """validation.md from validation.json alone (links relative to the study's folder)."""
    study = record["study"]
    reads = study["reads"]
    engagement = study.get("engagement")
    lines = [f"# Does the probe predict? Study {study['name']}", ""]
    if study.get("answer") == "within_designs":  # the registered answer leads; the pooled rho follows it
        lines += [f"**{record['answer']}**", "", record["power"], ""]
    else:
        lines += [record["power"], "", f"**{record['answer']}**", ""]
    if record["within"]:
        lines += [record["within"], ""]
    if record.get("pooled"):
        lines += [record["pooled"], ""]
    lines += [*record["classification"], "", *record["controls"], ""]
    lines += [f"![probe read against pilot gain]({record['figure']})", "", "## Which arms count", ""]
    lines.append(
        "The correlation and the classifier use subject arms only"
        + (f" that engage ({engagement['read']} at least {engagement['min']:g})" if engagement else "")
        + " and whose pilot moved the policy (an unmoved arm's held-out change is the draws' luck, not a "
        f"gain): {record['counted']} of {sum(1 for r in record['rows'] if r['role'] == 'subject')} "
        "subject arms."
    )
    if record["left_out"]:
        lines += ["", "Listed, not counted:", "", *record["left_out"]]
    rel = record["reliability"]
    # a gain registered by policy: which policy, and each replicate's gain beside the mean
    policy = f", {_POLICY_TEXT[study['gain_policy']]}, mean of replicates" if "gain_policy" in study else ""
    replicate_head = " replicate gains |" if policy else ""
    lines += [
        "",
        "## Per arm",
        "",
        "| design | role | arm | cell | "
        + " | ".join(reads)
        + " | engagement | counted | probe | pilot gain in "
        + f"{study['gain']}{policy} [CI] | se |{replicate_head} pilot |",
        "|---|---|---|---|" + "---|" * len(reads) + "---|---|---|---|---|---|" + "---|" * bool(policy),
    ]
    for r in record["rows"]:
        values = " | ".join(_fmt(r["reads"][read]) for read in reads)
        probe = "go" if r["qualifies"] else "no"
        each = f" {', '.join(f'{g:+.3g}' for g in r.get('replicate_gains', []))} |" if replicate_head else ""
        lines.append(
            f"| {r['design']} | {_ROLE_TEXT[r['role']]} | {r['arm']}{' (named)' if r['predicted'] else ''} | "
            f"{r['cell']} | {values} | {_fmt(r['engagement'], 2)} | {'yes' if r['counted'] else 'no'} | "
            f"{probe} | {r['gain']:+.3g} [{r['gain_ci_low']:+.3g}, {r['gain_ci_high']:+.3g}] | "
            f"{_fmt(r['gain_se'], 2)} |{each} {r['pilot_verdict']} |"
        )
    lines += _policy_gains_markdown(record["rows"], study["gain"])
    lines += ["", "## The gains' reliability", "", _reliability_text(rel), ""]
    pooled_note = (
        ", pooled over designs (secondary: the registered answer is within designs)"
        if study.get("answer") == "within_designs"
        else ""
    )
    lines += [
        "## Rank correlation of each read with the gain",
        "",
        f"Spearman's rho over the counted subject arms{pooled_note}, {study['confidence']:.0%} "
        f"{_INFERENCE_TEXT[study['levels']]} ({study['resamples']} resamples, seed {study['seed']}); "
        "resamples with a constant column have no rank correlation and are left out (counted).",
        "",
        "| read | arms | rho | interval | resamples left out |",
        "|---|---|---|---|---|",
    ]
    for c in record["correlations"]:
        mark = " (the registered predictor)" if c["read"] == study["predictor"] else ""
        interval = "n/a" if c["ci_low"] is None else f"{c['ci_low']:+.2f} to {c['ci_high']:+.2f}"
        rho = "n/a" if c["rho"] is None else f"{c['rho']:+.2f}"
        lines.append(f"| {c['read']}{mark} | {c['n']} | {rho} | {interval} | {c['degenerate_resamples']} |")
    lines += [
        "",
        "## Provenance",
        "",
        f"Study `{study['path']}` sha256 `{study['sha256']}`, locked {study['lock_date']}.",
        "",
        "| member | role | design sha256 |",
        "|---|---|---|",
        *[f"| {m['path']} | {_ROLE_TEXT[m['role']]} | `{m['sha256']}` |" for m in record["members"]],
        "",
    ]
    return "\n".join(lines)


def build_study_report(
    study: Study,
    decisions: Sequence[str | os.PathLike[str]],
    phase2s: Sequence[str | os.PathLike[str]],
    out_md: str | os.PathLike[str],
    out_json: str | os.PathLike[str],
    out_table: str | os.PathLike[str],
    out_figure: str | os.PathLike[str],
) -> dict[str, Any]:
    """Write the study's page, record, table and figure (each atomically); returns the record."""
    rows = arm_rows(study, decisions, phase2s)
    inference = infer(study, rows)
    arms = counted(rows)
    atomic_write_bytes(out_figure, study_figure(study, rows, inference))
    with atomic_path(out_table) as tmp:
        pq.write_table(_table(study, rows, arms), tmp, compression="zstd", write_statistics=False)
    page_dir = Path(out_md).parent
    kept = {id(r) for r in arms}
    within = study.answer == "within_designs"
    record = {
        "study": {
            "name": study.name,
            "path": relative_to_root(study.path),
            "sha256": study.sha256,
            "lock_date": study.lock_date,
            "description": study.description,
            "predictor": study.predictor,
            "reads": list(study.reads),
            "gain": study.gain,
            "resamples": study.resamples,
            "confidence": study.confidence,
            "seed": study.seed,
            "levels": study.levels,
            "permutations": study.permutations,
            "engagement": None if study.engagement is None else asdict(study.engagement),
            "min_subject_arms": study.min_subject_arms,
            "power": None if study.power is None else asdict(study.power),
            **({} if study.gain_policy is None else {"gain_policy": study.gain_policy}),
            **({"answer": study.answer} if within else {}),
        },
        "members": [
            {
                "path": relative_to_root(m.design.path),
                "name": m.design.name,
                "sha256": m.design.sha256,
                "role": m.role,
            }
            for m in study.members
        ],
        "power": power_text(study, inference),
        "answer": within_answer_text(study, inference) if within else answer_text(study, inference),
        "within": per_design_text(inference) if within else within_text(study, inference),
        **({"pooled": pooled_secondary(study, inference)} if within else {}),
        "classification": _classification_lines(inference),
        "controls": _controls(rows),
        "counted": inference.counted,
        "reached_size": inference.reached_size,
        "left_out": _left_out(rows, arms),
        "inference": {
            "arms_per_design": inference.arms_per_design,
            "permutation": None if inference.permutation is None else asdict(inference.permutation),
            "within_design_rho": inference.within_design_rho,
            "power_registered": _power_record(inference.power_registered),
            "power_measured": _power_record(inference.power_measured),
            "classification": asdict(inference.classification),
            **({"within_answer": asdict(inference.within)} if inference.within is not None else {}),
        },
        "reliability": asdict(inference.reliability),
        "rows": [{**_row_record(r), "counted": id(r) in kept} for r in rows],
        "correlations": [asdict(c) for c in inference.correlations],
        "figure": Path(os.path.relpath(out_figure, page_dir)).as_posix(),
        "table": Path(os.path.relpath(out_table, page_dir)).as_posix(),
    }
    atomic_write_json(out_json, record)
    atomic_write_text(out_md, study_markdown(record))
    return record
