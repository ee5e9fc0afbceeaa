"""The per-cell reads: the flat namespace of numbers the decision rule and decision.md refer to by name.

Why: the registered rule names reads (``choice_std_cm.lower >= analysis.signal_bar_cm``), the reads table
in decision.md shows them, and decision.json stores them; one list of names keeps the three in step.
decision.json holds every read at full precision (the value the rule compared); only the page rounds,
to three significant figures, with more where three would hide which side of a threshold a value is on.
"""

from __future__ import annotations

from dataclasses import dataclass

from grpo_probe.envs.boat.spec import boat_spec

__all__ = [
    "CHAOS_ROWS",
    "EARLIER_CHAOS_ROWS",
    "GUARDS",
    "INTERVAL_BOUNDS",
    "READ_NAMES",
    "READ_ROWS",
    "ReadRow",
    "read_rows",
]

GUARDS: tuple[str, ...] = boat_spec().guard_names
"""The boat scene's guard channels, in the order decision.md lists them, read off their declarations
(:func:`grpo_probe.envs.boat.spec.boat_guards`; another environment's are its spec's ``guard_names``)."""


@dataclass(frozen=True)
class ReadRow:
    """One row of decision.md's reads table: a read, optionally with its bootstrap interval or, after
    "vs", the anchor read it is compared with."""

    read: str
    label: str
    with_ci: bool = False
    primary: bool = False
    versus: str | None = None


CHAOS_ROWS: tuple[ReadRow, ...] = (
    ReadRow(
        "choice_std_cm", "choice std sigma_b: the spread the draws' choices explain (cm) [CI]", True, True
    ),
    ReadRow("chaos_std_cm", "chaos std sigma_w: the chaos floor, every draw replayed (cm) [CI]", True),
    ReadRow("chaos_share", "chaos share: sigma_w^2 / (sigma_w^2 + sigma_b^2) [CI]", True),
    ReadRow("rank_stability", "rank stability: Spearman of draws vs replays, median [CI]", True),
    ReadRow(
        "median_divergence_tick",
        "tick replays split from their draws vs first contact (medians)",
        versus="median_first_contact_tick",
    ),
)
"""The replay reads (DESIGN.md, "Signal or chaos"; :mod:`grpo_probe.analysis.variance_components`): shown
for a design that registers replays."""

EARLIER_CHAOS_ROWS: tuple[ReadRow, ...] = (
    ReadRow("median_choice_std_cm", "median over seeds of sqrt(max(0, V_a - V_w)) (cm) [CI]", True),
    ReadRow("replay_std_cm", "replay std sqrt(mean V_w) (cm) [CI]", True),
    ReadRow("chaos_fraction", "chaos fraction sum V_w / sum V_a [CI]", True),
)
"""The first replay reads (the draw alone across draws, the replays alone within), which rules registered
before the decomposition read: shown where a registered version of the design's rule names one."""


def read_rows(
    guards: tuple[str, ...] = GUARDS, replay: bool = True, earlier: bool = True
) -> tuple[ReadRow, ...]:
    """decision.md's reads table for an environment with these guard channels (the boat's by default),
    with the replay reads when the design registers replays (and the first ones with ``earlier``)."""
    return (
        ReadRow("median_group_std_progress_cm", "median group std of progress (cm) [CI]", True, True),
        ReadRow("median_group_std_best_point_cm", "median group std of best point (cm) [CI]", True, True),
        *(CHAOS_ROWS if replay else ()),
        *(EARLIER_CHAOS_ROWS if replay and earlier else ()),
        ReadRow("nondegenerate_fraction", "non-degenerate groups (fraction of seeds)", False, True),
        ReadRow("mean_progress_delta_cm", "sampled minus anchor progress, mean over seeds (cm) [CI]", True),
        ReadRow(
            "sampled_engagement_rate", "engagement rate, sampled vs anchor", versus="anchor_engagement_rate"
        ),
        ReadRow("engagement_delta", "engagement rate, sampled minus anchor, mean over seeds [CI]", True),
        *(
            ReadRow(
                f"sampled_{guard}_rate",
                f"{guard.replace('_', ' ')} rate, sampled vs anchor",
                versus=f"anchor_{guard}_rate",
            )
            for guard in guards
        ),
        ReadRow("mean_token_entropy", "action-token entropy per replan, mean (nats)"),
        ReadRow("mean_tokens_per_chunk", "tokens per chunk, mean"),
    )


READ_ROWS: tuple[ReadRow, ...] = read_rows(GUARDS)
"""The boat scene's reads table."""

_CI_SUFFIXES = ("_ci_low", "_ci_high")

_EVERY_CELL: tuple[ReadRow, ...] = read_rows(guards=())
"""The reads every cell of every environment has: the table less its guard rows (a guard's rates,
``sampled_<guard>_rate`` and ``anchor_<guard>_rate``, exist for the guards the design's environment
declares, and the design check reads them off its spec)."""

READ_NAMES: tuple[str, ...] = tuple(
    name
    for row in _EVERY_CELL
    for name in (
        row.read,
        *((row.read + s for s in _CI_SUFFIXES) if row.with_ci else ()),
        *((row.versus,) if row.versus else ()),
    )
)
"""Every read a decision-rule condition or rank key may name in any environment (the schema's
``rule_fixed_read_name`` enum); a guard's rates are named by the schema's pattern and checked against the
environment's declarations with the design."""

INTERVAL_BOUNDS: tuple[str, ...] = tuple(
    f"{row.read}.{bound}" for row in _EVERY_CELL if row.with_ci for bound in ("lower", "upper")
)
"""Every end of an interval a condition may name (``chaos_share.upper``; the schema's
``rule_interval_bound`` enum)."""
