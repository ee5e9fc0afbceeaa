"""decision.md's section of the gradient reads, beside the choice std: how many episodes a GRPO step
needs before it points the same way twice.

Why its own module: the section exists only for a design that registers the gradient reads
(``analysis.gradient_reads``), so the page of every other design is left as it was; it prints only what
the decision record holds (each cell's ``reads`` and ``gradient``), like the rest of the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grpo_probe.analysis.rule.glossary import number

__all__ = ["gradient_section", "noise_scale_text"]

_INTRO = (
    "Per cell, each episode's GRPO gradient A_e grad log pi(actions_e | obs_e) (A_e the group-normalised "
    "advantage of progress_final_cm, the log-probs phase 2 recomputes) over every parameter of the head, "
    "mapped to {dims} coordinates by a keyed CountSketch (inner products, norms and so tr(Sigma) and |G|^2 "
    "are preserved in expectation). A group is the example (its episodes share a spawn and their advantages "
    "sum to zero): B_simple = K tr(Sigma) / |G|^2 from the per-group gradients (McCandlish et al. 2018, "
    "eq. 2.8, unbiased estimates of both parts), with its percentile-bootstrap interval over seeds; the "
    "agreement is the cosine of the mean gradients of two disjoint halves of the seeds, the median over "
    "random splits."
)


def _end(value: float | None) -> str:
    return "unbounded" if value is None else number(value)


def noise_scale_text(cell: Mapping[str, Any]) -> str:
    """``277 [2.97, 277]``, ``unbounded [41.2, unbounded]``, or ``not available`` (the cell's sentence
    says why)."""
    gradient = cell["gradient"]
    if not gradient["available"]:
        return "not available"
    reads = cell["reads"]
    value = reads.get("gradient_noise_scale")
    shown = "unbounded" if value is None and gradient.get("noise_scale_unbounded") else number(value)
    low, high = reads.get("gradient_noise_scale_ci_low"), reads.get("gradient_noise_scale_ci_high")
    return f"{shown} [{_end(low)}, {_end(high)}]"


def _choice(reads: Mapping[str, Any]) -> str:
    if "choice_std_cm" not in reads:
        return "n/a (no replays)"
    low, high = reads.get("choice_std_cm_ci_low"), reads.get("choice_std_cm_ci_high")
    return f"{number(reads['choice_std_cm'])} cm [{number(low)}, {number(high)}]"


def _sentence(cell: Mapping[str, Any]) -> str:
    gradient, reads = cell["gradient"], cell["reads"]
    if not gradient["available"]:
        return f"- cell {cell['id']}: {gradient['reason']}."
    value = reads.get("gradient_noise_scale")
    if value is None:
        return (
            f"- cell {cell['id']}: no mean gradient shows above its noise on these {cell['n_seeds']} seeds: "
            "a GRPO step of any size points a way its next batch need not repeat."
        )
    return (
        f"- cell {cell['id']}: a GRPO step needs about {number(value)} episodes before it points the same "
        f"way twice (B_simple {noise_scale_text(cell)}; two halves of its {cell['n_seeds']} seeds agree with "
        f"cosine {number(reads.get('gradient_half_cosine'))})."
    )


def gradient_section(decision: Mapping[str, Any]) -> str | None:
    """The section's markdown, or None for a design without the gradient reads."""
    cells = [c for c in decision["cells"] if "gradient" in c]
    if not cells:
        return None
    dims = next(
        (c["gradient"]["sketch"]["dims"] for c in cells if c["gradient"]["available"]), "a few thousand"
    )
    rows = [
        "| cell | choice std | gradient noise scale B_simple (episodes) [CI] | half-batch cosine |",
        "|---|---|---|---|",
        *(
            f"| {c['id']} | {_choice(c['reads'])} | {noise_scale_text(c)} | "
            f"{number(c['reads'].get('gradient_half_cosine')) if c['gradient']['available'] else 'n/a'} |"
            for c in cells
        ),
    ]
    return "\n".join(
        [
            "## Does a GRPO step point the same way twice?",
            "",
            _INTRO.format(dims=dims),
            "",
            *rows,
            "",
            *(_sentence(c) for c in cells),
        ]
    )
