"""The policy loss and advantage estimator a design names, checked against phase 2's registries.

Why here and not where the design is parsed: the registries live beside their math
(:mod:`grpo_probe.phase2.losses`, which needs torch, and :mod:`grpo_probe.phase2.reward`), and the
prereg package sits below phase 2 and loads without torch, because Snakemake reads the design while it
parses the rules. So the prereg package parses the names and words the error
(:func:`grpo_probe.prereg.phase2.choice_problems`), and this module passes it the registries from
above. The workflow's first rule (``prereg_check``) runs the check, so a misspelt name stops the run
before the probe's hours are spent; the phase-2 jobs that train and score run it again as they load the
design.
"""

from __future__ import annotations

from grpo_probe.phase2 import losses, reward
from grpo_probe.prereg import Prereg, PreregError
from grpo_probe.prereg.phase2 import Phase2, choice_problems

__all__ = ["check_pilot_choices", "pilot_choice_problems"]


def pilot_choice_problems(phase2: Phase2) -> list[str]:
    """Each name of ``phase2`` (``policy_loss``, ``advantage``) that no function is registered under, as
    ``"phase2.<field>: ..."`` with the registered names and the closest one."""
    return choice_problems(
        phase2, losses.POLICY_LOSSES, reward.ADV_ESTIMATORS
    )  # read now: a test scopes them


def check_pilot_choices(prereg: Prereg) -> None:
    """Raise :class:`grpo_probe.prereg.PreregError` naming the design file and the field when its
    ``phase2:`` names a loss or estimator that is not registered; a design without phase 2 passes."""
    if prereg.phase2 is None:
        return
    problems = pilot_choice_problems(prereg.phase2)
    if problems:
        raise PreregError("\n".join(f"{prereg.path}: {p}" for p in problems))
