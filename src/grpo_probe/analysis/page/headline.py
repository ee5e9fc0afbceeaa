"""The embedded default's headline numbers, rendered from a decision.json for the README and the docs.

Why: a number printed in the README must be the code's, not a hand-copied one from a tree that was never
committed. The default's decision.json is committed as a reference (``docs/reference/``); the blocks the
README and the docs show between ``<!-- headline:NAME -->`` and ``<!-- /headline:NAME -->`` markers are
rendered from it by :func:`render_blocks`, and a test fails when the committed text differs from what the
reference renders. A slower check reruns the default from a fresh clone and compares its decision with
the reference (``benchmarks/default_reference.py``).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from grpo_probe.analysis.rule.glossary import number

__all__ = ["BLOCKS", "refresh", "render_blocks"]


def _interval(reads: Mapping[str, Any], read: str, unit: str = "") -> str:
    return (
        f"{number(reads[read])}{unit} [{number(reads[read + '_ci_low'])}, {number(reads[read + '_ci_high'])}]"
    )


def _percent(rate: Mapping[str, Any] | None) -> str:
    if rate is None:
        return "not simulated"
    low, high = number(rate["low_percent"]), number(rate["high_percent"])
    return f"{number(rate['percent'])} % [{low} %, {high} %]"


def _chaos_table(decision: Mapping[str, Any]) -> str:
    """Per cell: a reward's spread, the draws' choice, chaos and the chaos share, with intervals."""
    lines = [
        "| cell | a reward's spread | draws' choice | chaos | chaos share | qualifies |",
        "|---|---|---|---|---|---|",
    ]
    for cell in decision["cells"]:
        reads, replay = cell["reads"], cell.get("replay") or {}
        verdict = cell["verdict"]["qualifies"]
        lines.append(
            f"| {cell['id']} | {number(replay.get('total_std_cm'))} cm | "
            f"{_interval(reads, 'choice_std_cm', ' cm')} | {_interval(reads, 'chaos_std_cm', ' cm')} | "
            f"{_interval(reads, 'chaos_share')} | {'yes' if verdict else 'no'} |"
        )
    return "\n".join(lines)


def _larger(*rates: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The larger of simulated rates (by rate, then the upper end of its interval); None when none is."""
    found = [r for r in rates if r is not None]
    return max(found, key=lambda r: (r["rate"], r["high"])) if found else None


def _outcome(decision: Mapping[str, Any]) -> str:
    """The outcome, the version that gives it, and the error rates it carries."""
    outcome = decision["outcome"]
    current = next(v for v in decision["versions"] if v["current"])
    arms = [f"`{outcome[f'{h}_arm']}`" for h in ("ar", "flow") if outcome.get(f"{h}_arm")]
    named = f" on {' and '.join(arms)}" if arms else ""
    op = decision["operating"]["design"]
    boot = decision["analysis"]["bootstrap"]
    confidence = boot.get("interval_confidence", boot["confidence"])
    stability = current["stability"]
    held = (
        f"{stability['same_outcome']} of {stability['resamples']} resamples of the seeds"
        if stability and stability.get("not_resampled") is None
        else "resamples not available"
    )
    measured = op.get("same_arm_at_measured") if arms else op.get("same_kind_at_measured")
    worst = decision["operating"].get("worst_point")
    searched = (
        ""
        if worst is None or op.get("searched_worst") is None
        else f" At its worst point of the null's boundary ({worst['point']}) it says go in "
        f"{_percent(op.get('at_bar_worst'))}: {worst['why']}."
    )
    bar = op.get("at_bar_worst") if not searched else _larger(op.get("at_bar"), op.get("at_bar_data"))
    text = (
        f"Version {current['version']} gives **{outcome['kind']}**{named} (the rule reads each cell's "
        f"{number(100 * confidence)} % intervals). It holds in {held}, and in {_percent(measured)} of "
        f"simulated runs at the measured levels. With every cell's true chaos share at its bar, the rule "
        f"says go in {_percent(bar)} of simulated runs (normal chaos "
        f"{_percent(op.get('at_bar'))}, chaos resampled from the run's residuals "
        f"{_percent(op.get('at_bar_data'))}); under pure chaos in {_percent(op.get('false_go'))}; the "
        f"target is {number(decision['operating']['false_go_target_percent'])} %.{searched}"
    )
    return textwrap.fill(text, width=106, break_long_words=False, break_on_hyphens=False)


BLOCKS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "chaos-table": _chaos_table,
    "outcome": _outcome,
}
"""The blocks a page may hold, by marker name."""

_BLOCK = re.compile(
    r"(<!-- headline:(?P<name>[a-z-]+) -->\n)(?P<body>.*?)(\n<!-- /headline:(?P=name) -->)", re.S
)


def render_blocks(text: str, decision: Mapping[str, Any]) -> str:
    """``text`` with every marked block replaced by its rendering from ``decision``; an unknown block
    name is an error that names it."""

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in BLOCKS:
            raise ValueError(f"unknown headline block {name!r} (known: {sorted(BLOCKS)})")
        return f"{match[1]}{BLOCKS[name](decision)}{match[4]}"

    return _BLOCK.sub(replace, text)


def refresh(text: str, decision: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(the refreshed text, the names of the blocks whose text changed)."""
    refreshed = render_blocks(text, decision)
    before = {m["name"]: m["body"] for m in _BLOCK.finditer(text)}
    after = {m["name"]: m["body"] for m in _BLOCK.finditer(refreshed)}
    return refreshed, [name for name in before if before[name] != after[name]]
