"""What decision.md's words mean, with the registered numbers behind them.

Why: a reader who did not write the prereg meets "reset strike", "away tail" or "expert only" on the
page and must not have to open the code to learn what tripped a guard or what phase 2 would train.
Every threshold named here is read from the registered design, so the glossary changes with it.
"""

from __future__ import annotations

from typing import Any

from grpo_probe.prereg import Prereg

__all__ = ["NEAR_ALWAYS", "glossary", "guard_flags", "qualification_notes"]

NEAR_ALWAYS = 0.9
"""A qualifying cell whose sampled trip rate of a guard reaches this share is flagged on the page.

A reading aid, not part of the registered rule: the rule decides from the registered criteria alone."""


def glossary(prereg: Prereg) -> list[dict[str, str]]:
    """The guards with their registered thresholds, and the page's other terms, in reading order."""
    sim, analysis = prereg.sim, prereg.analysis
    return [
        {
            "term": "reset_strike",
            "meaning": (
                "the safety monitor reset the pusher at least once: it pressed into the table above "
                f"sim.table_force_limit_n = {sim.table_force_limit_n:g} N or left the workspace "
                f"(sim.workspace_half_extent_m = {sim.workspace_half_extent_m:g} m, up to "
                f"sim.workspace_max_height_m = {sim.workspace_max_height_m:g} m); "
                f"sim.strike_cap = {sim.strike_cap} strikes end the episode"
            ),
        },
        {
            "term": "knocked_off",
            "meaning": (
                f"the boat ended more than sim.knocked_off_drop_m = {sim.knocked_off_drop_m:g} m below its "
                "resting height: it left the table"
            ),
        },
        {
            "term": "not_upright",
            "meaning": (
                "the boat's up axis ended more than "
                f"sim.upright_max_tilt_deg = {sim.upright_max_tilt_deg:g} degrees from vertical"
            ),
        },
        {
            "term": "away_tail",
            "meaning": (
                f"progress_final_cm below analysis.away_tail_cm = {analysis.away_tail_cm:g} cm: the boat "
                "ended farther from the disk than it started"
            ),
        },
        {
            "term": "swat",
            "meaning": (
                f"the boat's peak speed exceeded analysis.swat_speed_m_s = {analysis.swat_speed_m_s:g} m/s: "
                "it was struck, not pushed"
            ),
        },
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


def guard_flags(guards: list[dict[str, Any]], qualifies: bool | None) -> list[str]:
    """Plain flags for a qualifying cell: every guard its sampled episodes trip at or near always."""
    if not qualifies:
        return []
    return [
        f"{g['guard']} trips in {g['sampled_count']}/{g['sampled_n']} sampled episodes "
        f"(anchor {g['anchor_count']}/{g['anchor_n']})"
        for g in guards
        if g["sampled_rate"] is not None and g["sampled_rate"] >= NEAR_ALWAYS
    ]
