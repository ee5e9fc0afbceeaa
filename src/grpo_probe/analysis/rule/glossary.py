"""What decision.md's words mean, with the registered numbers behind them.

Why: a reader who did not write the prereg meets "reset strike", "away tail" or "expert only" on the
page and must not have to open the code to learn what tripped a guard or what phase 2 would train.
Every threshold named here is read from the registered design, so the glossary changes with it.

How the page writes a number (:func:`number`) lives here too, so the clauses, the tables and the outcome
sentence print the same value the same way.
"""

from __future__ import annotations

import math
from typing import Any

from grpo_probe.envs.protocol import EnvSpec
from grpo_probe.envs.registry import env_spec
from grpo_probe.prereg import Prereg

__all__ = [
    "HEADS",
    "NEAR_ALWAYS",
    "SIGNIFICANT",
    "count_words",
    "flagged_guards",
    "glossary",
    "guard_flags",
    "number",
    "qualification_notes",
]

HEADS = {"ar": "AR", "flow": "flow"}
"""How the page names a head."""

SIGNIFICANT = 3
"""Significant figures of a float on decision.md (decision.json keeps every digit the rule read)."""

_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")

NEAR_ALWAYS = 0.9
"""A qualifying cell whose sampled trip rate of a guard reaches this share is flagged on the page.

A reading aid, not part of the registered rule: the rule decides from the registered criteria alone."""


def number(value: Any, significant: int = SIGNIFICANT) -> str:
    """A value as decision.md prints it: a float at ``significant`` figures without trailing zeros
    (``-34.1486`` -> ``-34.1``, ``0.2500`` -> ``0.25``, ``1234.5`` -> ``1230``), an integer as it is, a
    boolean as yes or no, an undefined read (None) as n/a.

    Why 3 figures: the page is read, not computed from; four decimals on a 34 cm spread are noise to the
    eye, and the digits the rule compared are in decision.json. A value whose rounding would hide which
    side of a threshold it lies on is printed with more figures where the clause states it
    (:func:`grpo_probe.analysis.rule.decision_rule.condition_text`).
    """
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    x = float(value)
    if x == 0.0 or not math.isfinite(x):
        return "0" if x == 0.0 else str(x)
    decimals = significant - 1 - math.floor(math.log10(abs(x)))
    rounded = round(x, decimals) + 0.0
    if decimals <= 0:
        return f"{rounded:.0f}"
    return f"{rounded:.{decimals}f}".rstrip("0").rstrip(".")


def count_words(n: int) -> str:
    """A count in a sentence: words up to ten (``five``), digits above.

    Why words: every digit on decision.md is then a value decision.json holds, which a test checks."""
    return _WORDS[n] if 0 <= n < len(_WORDS) else str(n)


def glossary(prereg: Prereg, env: EnvSpec | None = None) -> list[dict[str, str]]:
    """The guards with their registered thresholds, and the page's other terms, in reading order.

    The guards are the environment's (``env``: its spec; the design's environment when not given), each
    worded by the environment with the registered numbers behind it.
    """
    env = env if env is not None else env_spec(prereg.env)
    analysis = prereg.analysis
    numbers = analysis.to_dict()
    return [
        *({"term": guard.name, "meaning": guard.describe(numbers)} for guard in env.guards),
        {
            "term": "anchor",
            "meaning": (
                "the arm's deterministic rerun on the same seeds (arms.<id>.anchor: AR greedy, flow draw 0 "
                "of the keyed noise); each cell's competence and guard rates are read against it"
            ),
        },
        {
            "term": "non-degenerate group",
            "meaning": (
                f"a seed whose K draws differ in progress by a std above analysis.degenerate_tol_cm = "
                f"{analysis.degenerate_tol_cm:g} cm: a group GRPO's dynamic-sampling filter would keep"
            ),
        },
        {
            "term": "expert only",
            "meaning": (
                "Flow-GRPO updates the flow head (the action expert) alone, with the observation trunk "
                "frozen, as piRL trains it; the AR head is not trained"
            ),
        },
    ]


def qualification_notes(verdicts: list[dict[str, Any]], required: dict[str, list[str]]) -> list[str | None]:
    """Per cell, why it qualifies although a criterion failed (the rule asks its head for fewer).

    ``verdicts``: each cell's ``{"head", "qualifies", "criteria": {name: {"passed"}}}``; ``required``:
    head -> the criteria ``decision_rule.qualifies`` lists for it.
    """
    notes: list[str | None] = []
    for verdict in verdicts:
        failed = [name for name, c in verdict["criteria"].items() if not c["passed"]]
        need = required.get(verdict["head"], [])
        if verdict["qualifies"] and failed:
            notes.append(
                f"qualifies although {', '.join(failed)} fails: the registered rule "
                f"(decision_rule.qualifies.{verdict['head']}) asks a {verdict['head']} cell to pass only "
                f"{', '.join(need) or 'nothing'}"
            )
        else:
            notes.append(None)
    return notes


def flagged_guards(guards: list[dict[str, Any]], qualifies: bool | None) -> list[dict[str, Any]]:
    """The guards a qualifying cell is flagged for: those its sampled episodes trip at or near always."""
    if not qualifies:
        return []
    return [g for g in guards if g["sampled_rate"] is not None and g["sampled_rate"] >= NEAR_ALWAYS]


def guard_flags(guards: list[dict[str, Any]], qualifies: bool | None) -> list[str]:
    """Plain flags for a qualifying cell: every guard its sampled episodes trip at or near always."""
    return [
        f"{g['guard']} trips in {g['sampled_count']}/{g['sampled_n']} sampled episodes "
        f"(anchor {g['anchor_count']}/{g['anchor_n']})"
        for g in flagged_guards(guards, qualifies)
    ]
