"""Whether a cell's registered description names the sampler its arm's draws really come from.

Why: a design is usually a copy of another, and a cell's ``description`` is copied with it. The words
"fresh ODE noise per draw (Heun, 10 steps)" are true of an arm the probe samples itself in ``flow_ode``
mode; bound to a served LeRobot Diffusion checkpoint (``source: server``), the same cell draws DDPM steps
(the server's own sampler), and bound through a lab's adapter it draws however the adapter integrates.
Nothing fails on such a sentence, and decision.md prints it beside the cell. So ``grpo-probe prereg
check`` reads each description against the cell's mode and the arm's binding in the run config, and
warns, naming the file and the field: a description that names the probe's own integrator for an arm
whose draws are not the probe's, or a sampler other than the cell's mode for an arm that is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from grpo_probe.prereg.design import Prereg
from grpo_probe.prereg.run_config import ArmBinding
from grpo_probe.sampling import sampler

__all__ = ["KIND_WORDS", "description_warnings", "sampler_words"]

KIND_WORDS: Mapping[str, tuple[str, ...]] = {
    "greedy": ("greedy", "argmax"),
    "temperature": ("temperature",),
    "flow_ode": ("ODE", "Heun"),
    "flow_sde": ("SDE",),
    "flow_euler": ("Euler",),
}
"""Per built-in sampling kind, the words by which a description names it (a lab's own kind has its own)."""

OTHER_WORDS = ("DDPM", "DDIM", "ACT", "VQ-BeT")
"""Samplers of the policies the probe serves (LeRobot's Diffusion, ACT, VQ-BeT) and never runs itself."""

_INTEGRATOR_WORDS = frozenset(("ODE", "Heun", "SDE", "Euler"))
"""The words that say how the probe integrates a flow arm's draws: true of an arm it samples itself only."""

_WORD = {
    word: re.compile(rf"(?<![\w-]){re.escape(word)}(?![\w-])", 0 if word.isupper() else re.IGNORECASE)
    for word in (*dict.fromkeys(w for words in KIND_WORDS.values() for w in words), *OTHER_WORDS)
}
"""Whole words: an acronym in capitals only ("ODE", not the "ode" of "episode"), a word in any case."""


def sampler_words(text: str) -> list[str]:
    """The sampler words ``text`` names (:data:`KIND_WORDS`, :data:`OTHER_WORDS`), in that order."""
    return [word for word, pattern in _WORD.items() if pattern.search(text)]


def _probe_samples(binding: ArmBinding) -> bool:
    """Whether the probe draws the arm with its own samplers: a reference checkpoint, or a checkpoint of
    this package's format (no adapter). A served arm draws with its server's, an adapter's as it codes."""
    return binding.source == "reference" or (binding.source == "checkpoint" and binding.adapter is None)


_BOUND = {
    "server": (
        "served",
        "source: server",
        "its server's sampler (a LeRobot Diffusion checkpoint draws DDPM steps, ACT one latent per chunk)",
        "it serves one of this package's checkpoints",
    ),
    "checkpoint": ("bound through an adapter", "adapter", "the adapter's", "it calls the probe's samplers"),
}
"""Per binding whose draws are not the probe's: how the arm is bound, the field that says so, whose
sampler its draws are, and when a description of the probe's own sampler may stand."""


def _bound_as(binding: ArmBinding, bound_in: str | None) -> str:
    how, field, whose, unless = _BOUND[binding.source]
    field = f"arms.{binding.arm}.{field}" + (f": {binding.adapter}" if binding.source == "checkpoint" else "")
    where = f"{bound_in}: {field}" if bound_in else field
    return f"{how} ({where}): its draws are {whose}; describe those, unless {unless}"


def description_warnings(
    prereg: Prereg, bindings: Mapping[str, ArmBinding], bound_in: Mapping[str, str] | None = None
) -> list[str]:
    """One warning per cell whose description contradicts where its draws come from, naming the design
    file and the field (``prereg/x.yaml: warning: cells[c1].description: ...``, as prereg check's other
    warnings read). ``bindings``: each arm's binding (an arm left out is the reference);
    ``bound_in``: the config file that binds each arm, for the line to name."""
    lines = []
    for cell in prereg.cells:
        words = sampler_words(cell.description)
        if not words:
            continue
        at = f'{prereg.path}: warning: cells[{cell.id}].description: "{cell.description}"'
        binding = bindings.get(cell.arm)
        if binding is not None and not _probe_samples(binding):
            named = [w for w in words if w in _INTEGRATOR_WORDS]
            if named:
                lines.append(
                    f"{at} names the probe's own sampler ({', '.join(named)}), but arm {cell.arm} is "
                    f"{_bound_as(binding, (bound_in or {}).get(cell.arm))}"
                )
            continue
        own = KIND_WORDS.get(cell.mode.kind)
        if own is None or any(w in own for w in words):
            continue  # a lab's own kind names itself; a description naming the mode's sampler holds
        lines.append(
            f"{at} names {', '.join(words)}, but the cell's mode is {cell.mode.kind} "
            f"({sampler(cell.mode.kind).summary}), the sampler the probe draws arm {cell.arm} with"
        )
    return lines
