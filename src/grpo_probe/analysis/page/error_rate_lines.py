"""The page's words on how often the rule is wrong: the first screen's error-rates line, the worst point of
the null's boundary below the fold, and the per-cell table of simulated rates.

Why its own module: these read only decision.json's ``operating`` block
(:mod:`grpo_probe.analysis.error_rates.operating`) and say it in one voice, percent with Wilson intervals,
wherever decision.md states a rate; the rest of the page reads the cells and the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grpo_probe.analysis.rule.glossary import HEADS, number

__all__ = ["error_rate_rows", "error_rates_line", "percent", "worst_point_line"]


def percent(rate: Mapping[str, Any] | None) -> str:
    """``4.2 % [3.1 %, 5.6 %]``: a simulated rate with its Wilson interval, in percent."""
    if rate is None:
        return "not simulated"
    return f"{number(rate['percent'])} % [{number(rate['low_percent'])} %, {number(rate['high_percent'])} %]"


def _false_go_text(design: Mapping[str, Any]) -> str:
    """The design's false go where the target bounds it: at the bar, the larger of the normal and the
    data-resampled rate, with the other beside it; pure chaos where the design has no bar to sit at."""
    worst = design.get("at_bar_worst")
    if worst is None:
        return f"under pure chaos it says go in {percent(design['false_go'])}"
    normal, data = design.get("at_bar"), design.get("at_bar_data")
    searched = design.get("searched_worst")
    other = (
        ""
        if data is None
        else f" (normal chaos {percent(normal)}, chaos from the run's residuals {percent(data)}"
        + ("" if searched is None else f", the worst searched point {percent(searched)}")
        + ")"
    )
    return (
        f"with every cell's true value at its bar, the null's least favourable point, it says go in "
        f"{percent(worst)}{other}; under pure chaos in {percent(design['false_go'])}"
    )


_WORST_POINT_WORDS = {
    "at_bar": "the share at its bar in every seed",
    "at_bar_data": "the share at its bar in every seed, residuals resampled",
    "at_bar_seeds": "chaos differing between seeds",
    "at_bar_seeds_data": "chaos resampled per seed",
    "at_bar_draws_data": "chaos resampled per draw",
}
"""The first screen's short name of each point of the null's boundary the operating simulation searches."""


def worst_point_line(decision: Mapping[str, Any]) -> str | None:
    """Below the fold, in the section on error rates: which point of the null's boundary is worst, its
    rate, and why (:mod:`grpo_probe.analysis.error_rates.operating`)."""
    op = decision.get("operating") or {}
    worst = op.get("worst_point")
    if worst is None or (op.get("design") or {}).get("searched_worst") is None:
        return None
    return (
        f"The worst point of the null's boundary is {worst['point']} ({percent(worst['rate'])}), "
        f"because {worst['why']}; with the share at its bar in every seed the rule says go in "
        f"{percent(op['design'].get('at_bar'))} (normal chaos) and "
        f"{percent(op['design'].get('at_bar_data'))} (chaos from the run's residuals)."
    )


def error_rates_line(decision: Mapping[str, Any]) -> str | None:
    """The rule's false-go rate where the target bounds it (at the bar) and its go and arm rates at the
    measured levels, as the page states them beside the outcome
    (:mod:`grpo_probe.analysis.error_rates.operating`); how they are simulated is in the section below."""
    op = decision.get("operating")
    if not op or op["design"]["false_go"] is None:
        return None
    design = op["design"]
    target = f"{number(op['false_go_target_percent'])} %"
    within = "within" if op["within_target"] else "**above**"
    defaults = "" if op["registered"] else " (the defaults: the design registers no simulation)"
    worst = op.get("worst_point")
    if worst is not None and design.get("searched_worst") is not None:
        # one screen: the worst point's rate and the target here; which point it is and why, below
        # (:func:`worst_point_line`, in the section on error rates)
        short = _WORST_POINT_WORDS.get(worst.get("scenario"), "its worst point")
        text = (
            f"**How often this rule is wrong**: in {op['simulations']} simulated runs of this design's "
            f"size{defaults}, at the worst point of the null's boundary ({short}) it says go in "
            f"{percent(worst['rate'])}: {within} the {target} it accepts; under pure chaos in "
            f"{percent(design['false_go'])}"
        )
    else:
        text = (
            f"**How often this rule is wrong**: in {op['simulations']} simulated runs of this design's "
            f"size{defaults}, {_false_go_text(design)}: {within} the {target} it accepts"
        )
    if design["go_at_measured"] is None:
        return text + "; its power is not simulated: without replays choice and chaos are not separated."
    outcome = decision["outcome"]
    if outcome["kind"] == "not_decided":
        return text + (
            f"; at the measured levels it says go in {percent(design['go_at_measured'])}, a go this size "
            "cannot stand on ([how](#error-rates))."
        )
    if outcome["kind"] == "park":
        return text + (
            f"; at the measured levels it says go in {percent(design['go_at_measured'])} and parks in "
            f"{percent(design['same_kind_at_measured'])} ([how](#error-rates))."
        )
    arms = " and ".join(
        f"the {HEADS[h]} arm `{outcome[f'{h}_arm']}`" for h in HEADS if outcome.get(f"{h}_arm") is not None
    )
    return text + (
        f"; at the measured levels it says go in {percent(design['go_at_measured'])} and names {arms} "
        f"in {percent(design['same_arm_at_measured'])}, the number to act on ([how](#error-rates))."
    )


def error_rate_rows(decision: Mapping[str, Any]) -> list[list[str]]:
    """Per cell: its sizes, its false-go rates under pure chaos and at its bar (normal and from the
    run's residuals, with the bar's levels), and its power at the measured levels."""
    op = decision.get("operating")
    if not op:
        return []
    rows = []
    for cell in op["cells"]:
        levels = cell["levels"]
        null, measured, bar = levels["pure_chaos"], levels["measured"], levels.get("at_bar")
        rows.append(
            [
                cell["id"],
                cell["size_text"],
                f"{percent(cell['false_go'])} at sigma_w {number(null['chaos_std_cm'])} cm",
                "not simulated"
                if bar is None
                else f"{percent(cell.get('at_bar'))} at {number(bar['choice_std_cm'])}, "
                f"{number(bar['chaos_std_cm'])} cm",
                percent(cell.get("at_bar_data")),
                "not simulated"
                if measured is None
                else f"{percent(cell['power'])} at {number(measured['choice_std_cm'])}, "
                f"{number(measured['chaos_std_cm'])} cm",
            ]
        )
    return rows
