"""decision.md's text, rendered from the decision record (the content of decision.json) alone.

Why: the page is written for a reader who has not seen the design: the outcome in one sentence that says
what every cell passed or failed, the figure that shows each clause the rule reads, and one line of
reasons per cell fit in one screen; the reads, the version history, the registered design and the hashes
follow below. It prints numbers at three significant figures
(:func:`grpo_probe.analysis.rule.glossary.number`); decision.json keeps every digit of the values the rule
read, and nothing here computes a number the record does not hold.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from grpo_probe.analysis.cells.reads import read_rows
from grpo_probe.analysis.page.arm_sampler import sampler_line, served_cell_line
from grpo_probe.analysis.page.error_rate_lines import (
    error_rate_rows,
    error_rates_line,
    worst_point_line,
)
from grpo_probe.analysis.page.gradient_page import gradient_section
from grpo_probe.analysis.rule.decision_rule import rank_text, short_clause
from grpo_probe.analysis.rule.glossary import HEADS, count_words, flagged_guards, number
from grpo_probe.prereg.rule import ANALYSIS_NUMBERS, BOUNDS, Condition

__all__ = [
    "HEADS",
    "NOT_RECORDED",
    "SCREEN_COLUMNS",
    "default_template",
    "reads_tsv_text",
    "render_decision_md",
    "wrap",
]


def default_template() -> Path:
    """The package's ``templates/decision.md.j2``, found through :mod:`importlib.resources`.

    Why package data: a non-editable install renders decision.md without the source tree; a path (not a
    resource handle) because jinja2 loads the template's folder and errors name the file.
    """
    found = resources.files("grpo_probe.analysis.page").joinpath("templates", "decision.md.j2")
    if not isinstance(found, Path):
        raise RuntimeError(f"{found}: the template must be a file on disk (grpo_probe in an archive)")
    return found


def _names(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _criterion_order(decision: Mapping[str, Any]) -> list[str]:
    return [c["name"] for c in decision["decision_rule"]["criteria"]]


def _outcome_summary(decision: Mapping[str, Any]) -> str:
    """The sentence under the headline: which cells qualify for which head, and how many do not.

    E.g. "c4 qualifies for flow, which needs only signal; the other four cells do not." What each cell
    failed is the line of reasons it has just below (:func:`_cell_lines`), so it is not said twice.
    """
    cells = decision["cells"]
    rule = decision["decision_rule"]
    order = _criterion_order(decision)
    qualifying = [c for c in cells if c["verdict"]["qualifies"]]
    left_out = [c["id"] for c in cells if c["verdict"]["qualifies"] is False]
    unrouted = [c for c in cells if c["verdict"]["qualifies"] is None]
    if not qualifying:
        lead = "No cell qualifies" if len(cells) > 1 else "The cell does not qualify"
    else:
        parts = []
        for head, label in HEADS.items():
            ids = [c["id"] for c in qualifying if c["head"] == head]
            if not ids:
                continue
            need = rule["qualifies"].get(head, [])
            only = f", which needs only {_names(need)}" if need and set(need) < set(order) else ""
            parts.append(f"{_names(ids)} {'qualifies' if len(ids) == 1 else 'qualify'} for {label}{only}")
        lead = "; ".join(parts)
        if len(left_out) == 1:
            lead += f"; {left_out[0]} does not"
        elif left_out:
            lead += f"; the other {count_words(len(left_out))} cells do not"
    if unrouted:
        heads = sorted({c["head"] for c in unrouted})
        lead += f"; {_names([c['id'] for c in unrouted])} (head {', '.join(heads)}) not routed by the rule"
    if decision["outcome"]["kind"] == "not_decided":  # why: the rule's go and the rate it would carry
        why = decision["outcome"]["clauses"][-1].removeprefix("not decided at this size: ")
        return f"{lead}. {why[0].upper()}{why[1:]}."
    return lead + "."


def _arm_lines(decision: Mapping[str, Any]) -> list[str]:
    """Per head the outcome names an arm for, why that arm: the qualifying cells as the rule ranked them."""
    outcome, rule = decision["outcome"], decision["decision_rule"]
    by_id = {c["id"]: c for c in decision["cells"]}
    keys = [(k["read"], k["prefer"]) for k in rule["rank_by"]]
    lines = []
    for head, label in HEADS.items():
        arm = outcome[f"{head}_arm"]
        if arm is None:
            continue
        ranked = outcome["ranking"][head]
        # a served arm is named, not trained: phase 2 trains checkpoints it holds
        # (analysis/page/arm_sampler.py)
        names = "The rule names" if arm in decision.get("served_arms", {}) else "Phase 2 trains"
        if len(ranked) == 1:
            line = (
                f"{names} the {label} arm `{arm}`, the arm of {ranked[0]}, the only {label} cell "
                "that qualifies."
            )
        else:
            rows = [(i, by_id[i]["arm"], [by_id[i]["reads"].get(r) for r, _ in keys]) for i in ranked]
            line = (
                f"{names} the {label} arm `{arm}`, the arm of the first qualifying {label} cell "
                f"{rank_text(keys, rows)}."
            )
        sampler = sampler_line(decision, head, ranked[0], arm)
        lines.append(line if sampler is None else f"{line} {sampler}")
    return lines


VALIDATION_PAGE = "docs/validation-study.md"
"""The validation study's page, named from the repository root rather than linked: decision.md's bytes do not
depend on where ``results:`` points, and a relative link from a results folder of any depth cannot be both."""


def _validation_line() -> str:
    """The first screen's word on what a go is worth: whether the probe is shown to predict a pilot's gain
    where a lab decides, among one scene's arms, and what the study shows instead (flow arms only: its
    reads and gains in cm order scenes by their size, which GRPO's normalised advantages cannot see), with
    the link to the study that asks it."""
    return (
        "Not shown: that a go predicts GRPO's gain among one scene's arms (flow head; across scenes, "
        f"reads and gains in cm follow scene size): see the validation study, `{VALIDATION_PAGE}`."
    )


def _short_flags(cell: Mapping[str, Any]) -> str:
    """`` Flags (sampled, anchor): swat 120/120, 0/15.``: the guards the page flags for a cell, with the
    episodes behind each rate (the flag's full sentence is below the fold)."""
    parts = [
        f"{g['guard']} {g['sampled_count']}/{g['sampled_n']}, {g['anchor_count']}/{g['anchor_n']}"
        for g in flagged_guards(cell["guards"], cell["verdict"]["qualifies"])
    ]
    return f" Flags (sampled, anchor): {'; '.join(parts)}." if parts else ""


def _flag_gloss(decision: Mapping[str, Any]) -> str | None:
    """One line naming what each flag on the first screen means (its glossary entry up to the first
    colon or semicolon), so a reader does not meet ``reset_strike 120/120`` without its meaning."""
    flagged = dict.fromkeys(
        g["guard"] for c in decision["cells"] for g in flagged_guards(c["guards"], c["verdict"]["qualifies"])
    )
    if not flagged:
        return None
    meanings = {entry["term"]: entry["meaning"] for entry in decision.get("glossary", [])}
    parts = []
    for guard in flagged:
        meaning = meanings.get(guard)
        short = None if meaning is None else re.split(r"[:;]", meaning, maxsplit=1)[0].strip()
        parts.append(f"{guard}: {short}" if short else guard)
    return "Flags: " + "; ".join(parts) + " ([terms](#terms))."


def _cell_lines(decision: Mapping[str, Any]) -> list[str]:
    """The first screen's reasons, one short item per cell: its verdict, the criteria its head needs that
    it fails (on which clause), and its flags. The full wording of every clause is below the fold."""
    rule = decision["decision_rule"]
    lines = []
    for c in decision["cells"]:
        verdict = c["verdict"]
        need = rule["qualifies"].get(c["head"], [])
        head = HEADS.get(c["head"], c["head"])
        if verdict["qualifies"] is None:
            lines.append(f"- **{c['id']}** ({head}) is not routed by the rule.")
            continue
        failing = []
        for name in need:
            criterion = verdict["criteria"][name]
            if not criterion["passed"]:
                why = "; ".join(short_clause(x) for x in criterion["conditions"] if not x["passed"])
                failing.append(f"`{name}` fails ({why})")
        if verdict["qualifies"]:
            text = f"qualifies: {_names([f'`{n}`' for n in need])} {'holds' if len(need) == 1 else 'hold'}"
        else:
            text = f"does not qualify: {'; '.join(failing)}"
        flags = _short_flags(c)
        lines.append(f"- **{c['id']}** ({head}) {text}.{flags}")
    return lines


def _served_lines(decision: Mapping[str, Any]) -> list[str]:
    """Per cell whose arm is served, what the arm and its draws are (:func:`served_cell_line`)."""
    served = decision.get("served_arms") or {}
    return [served_cell_line(c, served[c["arm"]]) for c in decision["cells"] if c["arm"] in served]


def _arms_text(outcome: Mapping[str, Any]) -> str:
    arms = [f"{HEADS[h]} `{outcome[f'{h}_arm']}`" for h in HEADS if outcome.get(f"{h}_arm") is not None]
    return ", ".join(arms) or "no arm"


def _other_versions(decision: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The registered versions that decide otherwise (as text) and those that cannot be evaluated."""
    # the rule's own outcome under the current version (a go this size cannot stand on is still the rule's)
    current = next((v["outcome"] for v in decision["versions"] if v["current"]), None)
    mine = current or decision["outcome"]
    key = (mine["kind"], mine["ar_arm"], mine["flow_arm"])
    other, unevaluated = [], []
    for v in decision["versions"]:
        if v["current"]:
            continue
        if v["outcome"] is None:
            unevaluated.append(str(v["version"]))
        elif (v["outcome"]["kind"], v["outcome"]["ar_arm"], v["outcome"]["flow_arm"]) != key:
            other.append(
                f"version {v['version']} ({v['label']}) gives {v['outcome']['kind']} with "
                f"{_arms_text(v['outcome'])}"
            )
    return other, unevaluated


_VERSIONS_LINK = "[versions](#what-each-registered-version-decides)"


def _resampled_line(decision: Mapping[str, Any]) -> str | None:
    """How often the outcome holds when the seeds are resampled, and how many versions decide otherwise:
    the first screen's short form (:func:`_versions_line` names them, in their section)."""
    versions = decision["versions"]
    current = next((v for v in versions if v["current"]), None)
    parts = []
    stability = None if current is None else current["stability"]
    if stability is not None and stability["not_resampled"] is None:
        parts.append(
            f"The outcome and its arm hold in {stability['same_outcome']} of {stability['resamples']} "
            f"resamples of the {stability['n_seeds']} seeds"
            + (
                f" (the outcome kind in {stability['same_kind']})"
                if stability["same_kind"] != stability["same_outcome"]
                else ""
            )
            + "."
        )
    elif stability is not None:
        parts.append(f"The outcome is not resampled: {stability['not_resampled']}.")
    other, unevaluated = _other_versions(decision)
    if other:
        many = len(other) > 1
        parts.append(
            f"{count_words(len(other)).capitalize()} earlier registered version{'s' if many else ''} "
            f"decide{'' if many else 's'} otherwise ({_VERSIONS_LINK})."
        )
    elif len(versions) > 1 and not unevaluated:
        parts.append(f"All {count_words(len(versions))} registered versions of the design give the same.")
    if unevaluated:
        parts.append(
            f"Version{'s' if len(unevaluated) > 1 else ''} {_names(unevaluated)} of the design cannot be "
            f"evaluated ({_VERSIONS_LINK})."
        )
    return " ".join(parts) or None


def _versions_line(decision: Mapping[str, Any]) -> str | None:
    """Which registered versions decide otherwise, and what they give: the versions section's lead."""
    other, _ = _other_versions(decision)
    return f"Not every registered version agrees: {'; '.join(other)}." if other else None


def _bar(condition: Mapping[str, Any]) -> str:
    """A recorded condition's threshold as the page prints it: ``0.25``, or ``0.5 x chaos_std_cm``."""
    return Condition.from_record(condition).bar_text(number)


def _conditions(criterion: Mapping[str, Any]) -> str:
    return " and ".join(f"`{x['read']} {x['op']} {_bar(x)}`" for x in criterion["all_of"])


def _rank_keys(rule: Mapping[str, Any]) -> str:
    return ", then ".join(f"`{k['read']}` ({k['prefer']})" for k in rule["rank_by"]) or "registered order"


def _rule_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What a version's rule changes against the version before it, criterion by criterion."""
    was = {c["name"]: c for c in before["criteria"]}
    now = {c["name"]: c for c in after["criteria"]}
    out = []
    for name, criterion in now.items():
        if name not in was:
            out.append(f"adds criterion `{name}`: {_conditions(criterion)}")
        elif criterion["all_of"] != was[name]["all_of"]:
            out.append(f"`{name}` reads {_conditions(criterion)} (was {_conditions(was[name])})")
    out += [f"drops criterion `{name}`" for name in was if name not in now]
    for head in sorted(set(before["qualifies"]) | set(after["qualifies"])):
        old, new = before["qualifies"].get(head, []), after["qualifies"].get(head, [])
        if old != new:
            out.append(
                f"a {head} cell needs {', '.join(new) or 'nothing'} (was {', '.join(old) or 'nothing'})"
            )
    if before["rank_by"] != after["rank_by"]:
        out.append(f"arms ranked by {_rank_keys(after)} (was {_rank_keys(before)})")
    return out


def _first_sentence(text: str) -> str:
    """The first sentence of an amendment's reason: up to a full stop that a capital letter follows (so
    "e.g. the boat" or "1e-4 m. nudge" do not end it)."""
    return re.split(r"(?<=\.)\s+(?=[A-Z])", " ".join(text.split()), maxsplit=1)[0]


_YES_NO = {True: "yes", False: "no", None: "not recorded"}


def _version_rows(decision: Mapping[str, Any]) -> list[list[str]]:
    """decision.md's version table: per registered version only what differs from the version before it
    (the amendment's reason in its first sentence, the paths it changed, how its rule changed), its outcome
    and how often that holds in resamples of the seeds. The hashes are in the page's footer."""
    rows = []
    before: Mapping[str, Any] | None = None
    for v in decision["versions"]:
        amendment = v["amendment"]
        changes = []
        if amendment is None:
            changes.append("As first registered" if v["version"] == 0 else "No amendment recorded")
        else:
            changes.append(_first_sentence(amendment["reason"]).rstrip("."))
            if amendment["replaces"] is not None:
                paths = ", ".join(f"`{c['path']}` ({c['change']})" for c in amendment["replaces"])
                changes.append(f"Changes {paths}")
            if amendment["undeclared"]:
                changes.append(
                    f"Of these, {', '.join(f'`{p}`' for p in amendment['undeclared'])} not named in its "
                    f"fields ({', '.join(amendment['fields'])})"
                )
        if v["rule"] is not None and before is not None:
            changes += [f"Rule: {change}" for change in _rule_changes(before, v["rule"])]
        if v["analysis_recomputed"]:
            changes.append(
                "Its analysis numbers differ from this run's, so every read was recomputed with them"
            )
        if v["problem"] is not None:
            shown = next(w["version"] for w in decision["versions"] if w["problem"] == v["problem"])
            same = f" (as version {shown})" if shown != v["version"] else f": {v['problem']}"
            outcome = f"cannot be evaluated{same}"
        elif v["outcome"] is None:
            outcome = "cannot be evaluated"
        else:
            outcome = f"{v['outcome']['kind']}: {_arms_text(v['outcome'])}"
        stability = v["stability"]
        if stability is None or stability["not_resampled"] is not None:
            held = "n/a"
        else:
            held = f"{stability['same_outcome']}/{stability['resamples']}"
            if stability["same_kind"] != stability["same_outcome"]:
                held += f" (kind {stability['same_kind']}/{stability['resamples']})"
        rows.append(
            [
                f"{v['version']}: {v['label']}" + (" (this run's design)" if v["current"] else ""),
                v["locked"] or "not recorded",
                "n/a" if amendment is None else _YES_NO[amendment["after_results"]],
                "".join(f"{change}. " for change in changes).rstrip(),
                outcome,
                held,
            ]
        )
        if v["rule"] is not None:
            before = v["rule"]
    return rows


def _guard_counts(cell: Mapping[str, Any], read: str) -> tuple[str, str] | None:
    """(``3/120``, ``0/15``) for a guard's rate row: the episodes behind the sampled and anchor rates."""
    found = re.fullmatch(r"sampled_(\w+)_rate", read)
    if found is None:
        return None
    for g in cell["guards"]:
        if g["guard"] == found[1]:
            return f"{g['sampled_count']}/{g['sampled_n']}", f"{g['anchor_count']}/{g['anchor_n']}"
    return None


def _exact(value: Any) -> str:
    """A value as reads.tsv holds it: every digit decision.json holds (the shortest text that reads back as
    the same float), for a spreadsheet."""
    if value is None or isinstance(value, (bool, int)):
        return number(value)
    return repr(float(value))


NOT_RECORDED = "not recorded"
"""A read the vocabulary declares that a cell's record does not hold, as the reads table prints it."""


def _recorded(reads: Mapping[str, Any], read: str, fmt: Callable[[Any], str]) -> str:
    """``read``'s value written by ``fmt``, or :data:`NOT_RECORDED` where the record has no such field.

    Why not a KeyError: the table's rows come from the vocabulary of the code that renders the page, and a
    record written before a read was declared (docs/reference's, an archived decision.json) lacks it; an
    absent read is not an undefined one (None, printed n/a), so the page says which it is.
    """
    return fmt(reads[read]) if read in reads else NOT_RECORDED


def _reads_table(decision: Mapping[str, Any], fmt: Callable[[Any], str] = number) -> list[list[str]]:
    """Rows of decision.md's reads table: one row per read, one column per cell (a guard's rate with the
    episode counts behind it); values written by ``fmt`` (three significant figures on the page), a read
    the cell's record lacks as :data:`NOT_RECORDED`."""
    cells = decision["cells"]
    rows = []
    replay = any(c.get("replay") is not None for c in cells)
    for row in read_rows(tuple(g["guard"] for g in cells[0]["guards"]), replay):
        line = [row.label + (" (primary)" if row.primary else "")]
        for cell in cells:
            reads = cell["reads"]
            text = _recorded(reads, row.read, fmt)
            if row.with_ci and reads.get(row.read) is not None:
                low, high = (_recorded(reads, row.read + end, fmt) for end in BOUNDS.values())
                text += f" [{low}, {high}]"
            if row.read == "nondegenerate_fraction":
                text += f" ({cell['nondegenerate_count']}/{cell['n_seeds']})"
            counts = _guard_counts(cell, row.read)
            if counts is not None:
                text += f" ({counts[0]})"
            if row.versus is not None:
                text += f" vs {_recorded(reads, row.versus, fmt)}"
                if counts is not None:
                    text += f" ({counts[1]})"
            line.append(text)
        rows.append(line)
    for criterion in decision["decision_rule"]["criteria"]:
        name = criterion["name"]
        rows.append(
            [f"criterion {name}"]
            + [("holds" if c["verdict"]["criteria"][name]["passed"] else "fails") for c in cells]
        )
    rows.append(
        ["qualifies for phase 2"]
        + [{True: "yes", False: "no", None: "not routed"}[c["verdict"]["qualifies"]] for c in cells]
    )
    return rows


SCREEN_COLUMNS = 80
"""The first screen's width: its paragraphs are wrapped to it, so the page reads in a terminal as well."""


def wrap(text: str) -> str:
    """``text`` wrapped at :data:`SCREEN_COLUMNS` on spaces (a list item's lines indented under it).

    Markdown renders the wrapped text as the unwrapped (a line break inside a paragraph is a space, inside
    a code span too); words are never split, so a path or a link longer than the width stays whole.
    """
    indent = "  " if text.startswith("- ") else ""
    return textwrap.fill(
        text,
        SCREEN_COLUMNS,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _environment_line(decision: Mapping[str, Any]) -> str:
    """One sentence on the environment the record's bytes hold for ('' for a record that predates it)."""
    env = decision.get("environment")
    if not isinstance(env, Mapping):
        return ""
    numerics = env.get("numerics") or {}
    lock = env.get("lock_sha256")
    locked = f"lock `{lock[:16]}`" if lock else "no lock (an environment installed without requirements.lock)"
    return (
        f" Computed under the numerics setting `{numerics.get('setting')}` with {locked}, Python "
        f"{env.get('python')}, {env.get('libc')} on {env.get('machine')}: a rerun in that environment gives "
        'these bytes on any CPU of the setting\'s class (docs/auditing.md, "On another machine").'
    )


def render_decision_md(decision: Mapping[str, Any], template: str | os.PathLike[str] | None = None) -> str:
    """decision.md's text from the decision record (the content of decision.json) and the jinja2 template."""
    path = Path(template) if template is not None else default_template()
    if not path.exists():
        raise FileNotFoundError(f"{path}: decision.md template not found")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(path.parent),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["num"] = number
    env.filters["bar"] = _bar
    env.filters["wrap"] = wrap
    env.filters["cellsafe"] = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    return env.get_template(path.name).render(
        d=decision,
        heads=HEADS,
        reads_table=_reads_table(decision),
        summary=_outcome_summary(decision),
        environment_line=_environment_line(decision),
        arm_lines=_arm_lines(decision),
        resampled=_resampled_line(decision),
        versions_line=_versions_line(decision),
        cell_lines=_cell_lines(decision),
        served_lines=_served_lines(decision),
        flag_gloss=_flag_gloss(decision),
        validation_line=_validation_line(),
        error_rates=error_rates_line(decision),
        worst_point_line=worst_point_line(decision),
        error_rate_rows=error_rate_rows(decision),
        version_rows=_version_rows(decision),
        gradient_section=gradient_section(decision),
        analysis_numbers=[key for key in ANALYSIS_NUMBERS if key in decision["analysis"]],
    )


def reads_tsv_text(decision: Mapping[str, Any]) -> str:
    """The reads table of decision.md as tab-separated text (one row per read, one column per cell), for
    readers who want it in a spreadsheet or Snakemake's report: with every digit decision.json holds."""
    header = ["read", *(c["id"] for c in decision["cells"])]
    rows = [header, *_reads_table(decision, _exact)]
    return "".join("\t".join(cell.replace("\t", " ") for cell in row) + "\n" for row in rows)
