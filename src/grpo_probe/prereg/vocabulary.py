"""The reads a decision rule may name: one declaration per read, from which everything else is derived.

Why one declaration: a read is named by the registered rule, validated by the design's schema, shown in
decision.md's reads table and clauses, stored in decision.json and recomputed on every resample of the seeds.
Each of those reads this registry (the schema's enums are filled from it when the schema loads,
:func:`grpo_probe.prereg.schema.load_prereg_schema`), and the analysis computes each read with the one
statistic registered under its name (:data:`grpo_probe.analysis.cells.reads.STATISTICS`, which refuses,
before it computes a read, a declared read it has no statistic for, or a statistic no read declares). A
new read is its declaration here (:func:`register_read`, at the bottom) and its statistic there, and its
test.

This module is the vocabulary only (names, words, units, whether a read has an interval): the design is
checked against it before anything is computed, in a process that has not imported the analysis.
A guard's rates (``sampled_<guard>_rate``, ``anchor_<guard>_rate``) are not listed: they exist for the
guards the design's environment declares (:func:`guard_reads`), and the design check reads them off its
spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from grpo_probe.name_registry import Registry

__all__ = [
    "BOUND_SUFFIXES",
    "READS",
    "ReadSpec",
    "guard_reads",
    "interval_bounds",
    "read_names",
    "read_spec",
    "register_read",
]

BOUND_SUFFIXES: dict[str, str] = {"lower": "_ci_low", "upper": "_ci_high"}
"""How decision.json names the ends of a read's interval (``chaos_share_ci_high``)."""


@dataclass(frozen=True)
class ReadSpec:
    """One read: its name, how the page names it, its unit, and what it comes with."""

    name: str
    words: str
    """How a clause names it (``choice std``): by what it measures, not by the code's name."""
    label: str
    """Its row in decision.md's reads table (``[CI]``: the row shows the interval)."""
    unit: Literal["cm", "nats", "episodes", ""] = ""
    interval: bool = False
    """Whether it has a percentile-bootstrap interval over seeds (``<name>.lower``, ``<name>.upper``)."""
    primary: bool = False
    versus: str | None = None
    """A read shown after "vs" on this read's row (the anchor's engagement, the first-contact tick)."""
    scope: Literal["cell", "replay", "earlier_replay", "ar", "shown_with", "gradient"] = "cell"
    """``cell``: every cell; ``replay``: designs that register replays; ``earlier_replay``: the first replay
    reads (shown where a registered version's rule names one); ``ar``: AR cells (undefined for others);
    ``shown_with``: shown only after "vs" on another read's row; ``gradient``: designs that register the
    gradient reads (``analysis.gradient_reads``), computed by their own job and shown in their own
    section, not in the reads table."""
    replayed_seeds: bool = False
    """Whether its interval resamples the replayed seeds (the replay reads) rather than every seed."""
    unbounded: bool = False
    """Whether its statistic may be +inf (a noise scale where no mean gradient shows above the noise): a
    resample's +inf then counts in the interval, whose ends are resample values (the inverted empirical
    CDF, which needs no interpolation), instead of being dropped as undefined."""


READS: Registry[ReadSpec] = Registry("read")
"""Every read every cell has, by name, in decision.md's reads table order (the guard rows come after
``engagement_delta``). A name is one read: a second declaration under a taken name is refused."""


def register_read(spec: ReadSpec) -> ReadSpec:
    """Declare ``spec`` under its name, after the reads declared before it (its row's place in the reads
    table); a name declared by another :class:`ReadSpec` is an error naming both."""
    return READS.register(spec.name, spec)


_GUARD_READ = re.compile(r"(sampled|anchor)_([a-z][a-z0-9_]*)_rate")


def guard_reads(guard: str) -> tuple[ReadSpec, ReadSpec]:
    """The two rates of a guard the environment declares: sampled episodes, and the anchor's."""
    words = guard.replace("_", " ")
    return (
        ReadSpec(
            f"sampled_{guard}_rate",
            f"sampled {words} rate",
            f"{words} rate, sampled vs anchor",
            versus=f"anchor_{guard}_rate",
        ),
        ReadSpec(
            f"anchor_{guard}_rate", f"anchor {words} rate", f"{words} rate of the anchor", scope="shown_with"
        ),
    )


def read_spec(name: str) -> ReadSpec | None:
    """The declaration of ``name``: a listed read, or a guard's rate (whatever guard it names: whether the
    environment declares it is the design check's question); None for any other name."""
    if name in READS:
        return READS.get(name)
    matched = _GUARD_READ.fullmatch(name)
    if matched is None:
        return None
    sampled, anchor = guard_reads(matched[2])
    return sampled if matched[1] == "sampled" else anchor


def read_names() -> tuple[str, ...]:
    """Every listed read and every end of an interval under decision.json's names (``<read>_ci_low``,
    ``<read>_ci_high``): the schema's ``rule_fixed_read_name`` enum."""
    return tuple(
        name
        for spec in READS.values()
        for name in (spec.name, *((spec.name + s for s in BOUND_SUFFIXES.values()) if spec.interval else ()))
    )


def interval_bounds() -> tuple[str, ...]:
    """``<read>.lower`` and ``<read>.upper`` of every read with an interval: the schema's
    ``rule_interval_bound`` enum."""
    return tuple(f"{spec.name}.{end}" for spec in READS.values() if spec.interval for end in BOUND_SUFFIXES)


# The reads, in decision.md's reads table order. A new read goes at the bottom, where its row goes last.

register_read(
    ReadSpec(
        "median_group_std_progress_cm",
        "median group std",
        "median group std of progress (cm) [CI]",
        "cm",
        interval=True,
        primary=True,
    )
)
register_read(
    ReadSpec(
        "median_group_std_best_point_cm",
        "median group std of best point",
        "median group std of best point (cm) [CI]",
        "cm",
        interval=True,
        primary=True,
    )
)
register_read(
    ReadSpec(
        "choice_std_cm",
        "choice std",
        "choice std sigma_b: the spread the draws' choices explain (cm) [CI]",
        "cm",
        interval=True,
        primary=True,
        scope="replay",
        replayed_seeds=True,
    )
)
register_read(
    ReadSpec(
        "chaos_std_cm",
        "chaos std",
        "chaos std sigma_w: the chaos floor, every draw replayed (cm) [CI]",
        "cm",
        interval=True,
        scope="replay",
        replayed_seeds=True,
    )
)
register_read(
    ReadSpec(
        "chaos_share",
        "chaos share",
        "chaos share: sigma_w^2 / (sigma_w^2 + sigma_b^2) [CI]",
        interval=True,
        scope="replay",
        replayed_seeds=True,
    )
)
register_read(
    ReadSpec(
        "rank_stability",
        "rank stability",
        "rank stability: Spearman of draws vs replays, median [CI]",
        interval=True,
        scope="replay",
        replayed_seeds=True,
    )
)
register_read(
    ReadSpec(
        "median_divergence_tick",
        "divergence tick",
        "tick replays split from their draws vs first contact (medians)",
        versus="median_first_contact_tick",
        scope="replay",
        replayed_seeds=True,
    )
)
register_read(
    ReadSpec(
        "median_first_contact_tick",
        "first-contact tick",
        "first-contact tick of the replays (median)",
        scope="shown_with",
        replayed_seeds=True,
    )
)
register_read(
    ReadSpec(
        "median_choice_std_cm",
        "median choice std",
        "median over seeds of sqrt(max(0, V_a - V_w)) (cm) [CI]",
        "cm",
        interval=True,
        scope="earlier_replay",
        replayed_seeds=True,
    )
)
register_read(
    ReadSpec(
        "replay_std_cm",
        "replay std",
        "replay std sqrt(mean V_w) (cm) [CI]",
        "cm",
        interval=True,
        scope="earlier_replay",
        replayed_seeds=True,
    )
)
register_read(
    ReadSpec(
        "chaos_fraction",
        "chaos fraction",
        "chaos fraction sum V_w / sum V_a [CI]",
        interval=True,
        scope="earlier_replay",
        replayed_seeds=True,
    )
)
register_read(
    ReadSpec(
        "nondegenerate_fraction",
        "share of non-degenerate groups",
        "non-degenerate groups (fraction of seeds)",
        primary=True,
    )
)
register_read(
    ReadSpec(
        "mean_progress_delta_cm",
        "sampled minus anchor progress",
        "sampled minus anchor progress, mean over seeds (cm) [CI]",
        "cm",
        interval=True,
    )
)
register_read(
    ReadSpec(
        "sampled_engagement_rate",
        "sampled engagement rate",
        "engagement rate, sampled vs anchor",
        versus="anchor_engagement_rate",
    )
)
register_read(
    ReadSpec(
        "anchor_engagement_rate",
        "anchor engagement rate",
        "engagement rate of the anchor",
        scope="shown_with",
    )
)
register_read(
    ReadSpec(
        "engagement_delta",
        "sampled minus anchor engagement",
        "engagement rate, sampled minus anchor, mean over seeds [CI]",
        interval=True,
    )
)
register_read(
    ReadSpec(
        "mean_token_entropy",
        "token entropy",
        "action-token entropy per replan, mean (nats)",
        "nats",
        scope="ar",
    )
)
register_read(ReadSpec("mean_tokens_per_chunk", "tokens per chunk", "tokens per chunk, mean", scope="ar"))
register_read(
    ReadSpec(
        "gradient_noise_scale",
        "gradient noise scale",
        "gradient noise scale B_simple: episodes a GRPO step needs before it points the same way twice [CI]",
        "episodes",
        interval=True,
        scope="gradient",
        unbounded=True,
    )
)
register_read(
    ReadSpec(
        "gradient_half_cosine",
        "half-batch gradient agreement",
        "cosine of the GRPO gradients of two disjoint halves of the seeds (median over splits)",
        scope="gradient",
    )
)
