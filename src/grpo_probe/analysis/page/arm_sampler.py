"""The sampler phase 2 trains an arm under, in the words decision.md gives it beside the arm it names.

Why its own module: GRPO's ratio divides by each action's log-probability, which only the head's trainable
sampler records (temperature sampling for AR, the SDE sampler for flow), so the arm the probe read with
another sampler, or a served arm that may not declare that sampler at all, needs a sentence of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grpo_probe.prereg.cell_descriptions import sampler_words

__all__ = ["sampler_line", "served_cell_line"]


def sampler_line(decision: Mapping[str, Any], head: str, cell_id: str, arm: str) -> str | None:
    """Why phase 2 samples the arm under another sampler than the cell that named it was read with: GRPO's
    ratio divides by each action's log-probability, which only the head's trainable sampler records
    (temperature sampling for AR, the SDE sampler for flow; an ODE draw is deterministic given its noise).

    A served arm (``served_arms``, added by the workflow's decision step from the arm's binding) is told
    apart: whether it declares that sampler with its log-probs, and that phase 2 does not train it."""
    mode = next(c for c in decision["cells"] if c["id"] == cell_id)["mode"]
    trains = _TRAINS_UNDER[head]
    served = decision.get("served_arms", {}).get(arm)
    if served is not None:
        return _served_line(head, mode["kind"], served.get("capabilities"), served.get("sampler"))
    if mode["kind"] == trains[0]:
        return None
    return (
        f"The probe read it with the {_SAMPLER_WORDS.get(mode['kind'], mode['kind'])}; phase 2 samples it "
        f"with {trains[1]}, because GRPO's ratio divides by each action's log-probability, which only "
        "that sampler records."
    )


_LOGPROBS = {"ar": "per_token", "flow": "per_step"}
"""Per head, the log-probs GRPO's ratio reads (``PolicyCapabilities.logprobs``)."""


def _served_line(
    head: str, read_kind: str, declared: Mapping[str, Any] | None, sampler: Mapping[str, Any] | None = None
) -> str:
    """What the page can honestly say of training a served arm: what the server declares against what
    GRPO's ratio needs (the head's trainable sampler and its log-probs), and that phase 2 trains only
    checkpoints it holds. The sampler the probe read it with is the server's own where it declares one
    (a LeRobot Diffusion checkpoint draws DDPM steps whatever mode the design names)."""
    kind, words = _TRAINS_UNDER[head]
    if sampler and sampler.get("name"):
        read = f"The probe read it with its server's own sampler, {sampler['name']}. "
    else:
        read = f"The probe read it with the {_SAMPLER_WORDS.get(read_kind, read_kind)}. "
    needs = f"{words} (`{kind}`) with {_LOGPROBS[head].replace('_', '-')} log-probs"
    if declared is None:
        said = f"It is served and declares no capabilities; GRPO's ratio needs {needs}."
    elif kind in declared.get("kinds", ()) and declared.get("logprobs") == _LOGPROBS[head]:
        said = f"It is served and declares {needs}, which GRPO's ratio needs."
    else:
        kinds = ", ".join(f"`{k}`" for k in declared.get("kinds", ())) or "no sampler"
        said = (
            f"It is served and declares {kinds} only; GRPO's ratio needs {needs}, which it does not declare."
        )
    return (
        f"{read}{said} Phase 2 trains only checkpoints it holds, not a served arm: a pilot binds the arm "
        "to its checkpoint (`source: checkpoint`) or runs in the lab's own trainer."
    )


_TRAINS_UNDER = {"ar": ("temperature", "temperature sampling"), "flow": ("flow_sde", "the SDE sampler")}
"""Per head, the sampler phase 2 trains under (its kind, in words): the one that records the log-probs."""

_SAMPLER_WORDS = {"flow_ode": "ODE sampler", "temperature": "temperature sampler", "flow_sde": "SDE sampler"}


def served_cell_line(cell: Mapping[str, Any], served: Mapping[str, Any]) -> str:
    """One line of the first screen for a cell whose arm is served, on every outcome: what the arm is
    (the served policy, its type, its checkpoint's sha256, as the server declares them) and what its
    draws are (the sampler the server declares, or the design's mode where it declares none).

    Why: a served arm's stochasticity is the server's, not the mode the design names for a checkpoint it
    holds: a LeRobot Diffusion checkpoint draws DDPM steps, ACT one latent per chunk. A description the
    design registered for another arm (``fresh ODE noise per draw (Heun, 10 steps)``) is flagged when it
    names a sampler the server does not declare."""
    policy, kind = served.get("policy"), served.get("type")
    if kind and policy and "lerobot" in str(policy).lower():
        what = f"a LeRobot `{kind}` policy"
    elif kind:
        what = f"`{policy}` (type `{kind}`)"
    else:
        what = f"`{policy}`" if policy else "a policy"
    sha = served.get("checkpoint_sha256")
    what += f", checkpoint sha256 `{str(sha)[:16]}`" if sha else ", no checkpoint sha256 declared"
    sampler = served.get("sampler")
    if sampler and sampler.get("name"):
        draws = f"Its draws are its server's sampler, {sampler['name']}: {sampler.get('text', '')}."
        description = str(cell.get("description") or "")
        named = sampler_words(description)  # whole words: not the "ode" of "episode"
        if named and not any(w.lower() in str(sampler["name"]).lower() for w in named):
            draws += (
                f' The cell\'s registered description ("{description}") names another sampler; '
                "it was written for an arm the probe samples itself."
            )
    else:
        draws = (
            f"Its server declares no sampler of its own: its draws are the design's mode "
            f"`{cell.get('mode_text', cell['mode']['kind'])}` as the server runs it."
        )
    return f"- **{cell['id']}** reads the served arm `{cell['arm']}`: {what}. {draws}"
