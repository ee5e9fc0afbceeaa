"""decision.md's first screen, on the default design's registered decision: what limits the go, in one
screen of 80 columns x 40 lines."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from grpo_probe.analysis.cells.reads import STATISTICS
from grpo_probe.analysis.page.decision_md import NOT_RECORDED, VALIDATION_PAGE, render_decision_md
from grpo_probe.prereg.vocabulary import READS, ReadSpec

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "grpo_signal_probe.decision.json"


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(REFERENCE.read_text())


def _top(decision: dict) -> str:
    return render_decision_md(decision).split("\n---\n", 1)[0]


def test_the_default_first_screen_fits_one_screen_and_names_the_validation_study(reference: dict) -> None:
    top = _top(reference)
    lines = top.splitlines()
    assert len(lines) <= 40, f"{len(lines)} lines above the fold"
    assert max(len(line) for line in lines) <= 80
    assert f"validation study, `{VALIDATION_PAGE}`" in " ".join(top.split())  # wrapped at a space
    assert (REFERENCE.parents[2] / VALIDATION_PAGE).is_file()
    assert f"]({reference['figures']['rule']})" in top


def test_a_read_registered_after_the_record_was_written_leaves_the_first_screen_as_it_was(
    reference: dict,
) -> None:
    """The reference record predates any read registered now (docs/extending.md's example adds one): the
    page still renders, the first screen is the one the record gives, and the new row below says "not
    recorded"."""
    late = ReadSpec(
        "late_widest_std_cm", "widest std", "widest std over seeds (cm) [CI]", "cm", interval=True
    )
    assert all(late.name not in cell["reads"] for cell in reference["cells"])
    before = _top(reference)
    with READS.registered(late.name, late), STATISTICS.registered(late.name, lambda c, index: index):
        page = render_decision_md(reference)
    assert page.split("\n---\n", 1)[0] == before
    row = next(line for line in page.splitlines() if line.startswith(f"| {late.label} |"))
    assert row.count(NOT_RECORDED) == len(reference["cells"])


def _go_on(decision: dict, cell_id: str) -> dict:
    """The same record with one cell qualifying and the outcome naming its arm (its head's go)."""
    go = copy.deepcopy(decision)
    cell = next(c for c in go["cells"] if c["id"] == cell_id)
    cell["verdict"]["qualifies"] = True
    head = cell["head"]
    go["outcome"].update(
        kind=f"phase2_{head}",
        headline="Phase 2 is on.",
        ar_arm=cell["arm"] if head == "ar" else None,
        flow_arm=cell["arm"] if head == "flow" else None,
        ranking={"ar": [cell_id] if head == "ar" else [], "flow": [cell_id] if head == "flow" else []},
    )
    return go


def test_a_go_on_an_ode_cell_says_phase_2_samples_with_the_sde_sampler_and_why(reference: dict) -> None:
    ode = next(c for c in reference["cells"] if c["mode"]["kind"] == "flow_ode")
    top = " ".join(_top(_go_on(reference, ode["id"])).split())
    assert f"Phase 2 trains the flow arm `{ode['arm']}`" in top
    assert "The probe read it with the ODE sampler; phase 2 samples it with the SDE sampler, because" in top


def test_a_go_on_a_cell_read_with_the_training_sampler_says_nothing_more(reference: dict) -> None:
    sde = next(c for c in reference["cells"] if c["mode"]["kind"] == "flow_sde")
    top = " ".join(_top(_go_on(reference, sde["id"])).split())
    assert f"Phase 2 trains the flow arm `{sde['arm']}`" in top
    assert "The probe read it with" not in top


def _served(decision: dict, arm: str, capabilities: dict | None) -> dict:
    """The record as the workflow's decision step leaves it when ``arm`` is bound to a policy server."""
    return {**decision, "served_arms": {arm: {"capabilities": capabilities}}}


def test_a_go_on_a_served_ode_only_arm_recommends_no_sde_sampler_it_does_not_declare(reference: dict) -> None:
    """A served arm that declares only ``flow_ode`` cannot be sampled with the SDE sampler, and phase 2
    trains only checkpoints it holds: the page says both instead of recommending Flow-GRPO's sampler."""
    ode = next(c for c in reference["cells"] if c["mode"]["kind"] == "flow_ode")
    declared = {"kinds": ["flow_ode"], "logprobs": None, "trainable": False}
    page = _top(_served(_go_on(reference, ode["id"]), ode["arm"], declared))
    top = " ".join(page.split())
    assert f"The rule names the flow arm `{ode['arm']}`" in top
    assert "Phase 2 trains the flow arm" not in top and "phase 2 samples it with" not in top
    assert (
        "The probe read it with the ODE sampler. It is served and declares `flow_ode` only; GRPO's ratio "
        "needs the SDE sampler (`flow_sde`) with per-step log-probs, which it does not declare."
    ) in top
    assert (
        "Phase 2 trains only checkpoints it holds, not a served arm" in top and "`source: checkpoint`" in top
    )
    assert max(len(line) for line in page.splitlines()) <= 80


def test_a_served_arm_declaring_the_sde_sampler_or_nothing_is_said_so(reference: dict) -> None:
    sde = next(c for c in reference["cells"] if c["mode"]["kind"] == "flow_sde")
    full = {"kinds": ["flow_ode", "flow_sde"], "logprobs": "per_step", "trainable": False}
    top = " ".join(_top(_served(_go_on(reference, sde["id"]), sde["arm"], full)).split())
    assert "It is served and declares the SDE sampler (`flow_sde`) with per-step log-probs, which" in top
    assert "Phase 2 trains only checkpoints it holds, not a served arm" in top
    silent = " ".join(_top(_served(_go_on(reference, sde["id"]), sde["arm"], None)).split())
    assert "It is served and declares no capabilities; GRPO's ratio needs the SDE sampler" in silent


def test_an_arm_bound_in_process_keeps_the_page_it_had(reference: dict) -> None:
    """Only a served arm changes the words: another arm served beside it leaves this arm's line alone."""
    ode = next(c for c in reference["cells"] if c["mode"]["kind"] == "flow_ode")
    go = _go_on(reference, ode["id"])
    assert render_decision_md(_served(go, "some_other_arm", None)) == render_decision_md(go)


DDPM = {
    "name": "DDPM",
    "text": "LeRobot's DDPM sampler: fresh initial noise and a stochastic denoising step at every one of the "
    "mode's steps, each drawn from the draw's key",
}
DIFFUSION_SHA = "5f" * 32


def _served_diffusion(decision: dict, arm: str) -> dict:
    """The record as the decision step leaves it for a LeRobot Diffusion checkpoint served as ``arm``."""
    served = {
        "capabilities": {"kinds": ["flow_ode"], "logprobs": None, "trainable": False},
        "policy": "grpo_probe.serve.lerobot.adapter:LeRobotAdapter",
        "type": "diffusion",
        "checkpoint_sha256": DIFFUSION_SHA,
        "sampler": DDPM,
    }
    return {**decision, "served_arms": {arm: served}}


@pytest.mark.parametrize("outcome", ["park", "go"])
def test_a_served_diffusion_arm_is_named_with_ddpm_and_its_checkpoint_on_park_and_go(
    reference: dict, outcome: str
) -> None:
    """Go or park, the first screen says the arm is served, what it is (LeRobot Diffusion, its
    checkpoint's sha256) and that its draws are DDPM steps, not the ODE sampler its cell's description
    (copied from an arm the probe samples itself) names; the description is flagged."""
    ode = next(c for c in reference["cells"] if c["mode"]["kind"] == "flow_ode")
    assert reference["outcome"]["kind"] == "park"
    decision = reference if outcome == "park" else _go_on(reference, ode["id"])
    page = _top(_served_diffusion(decision, ode["arm"]))
    top = " ".join(page.split())
    assert (
        f"**{ode['id']}** reads the served arm `{ode['arm']}`: a LeRobot `diffusion` policy, checkpoint "
        f"sha256 `{DIFFUSION_SHA[:16]}`. Its draws are its server's sampler, DDPM:"
    ) in top
    assert (
        "ODE" in ode["description"] and f'description ("{ode["description"]}") names another sampler' in top
    )
    if outcome == "go":
        assert "The probe read it with its server's own sampler, DDPM." in top
        assert "The probe read it with the ODE sampler" not in top
    assert max(len(line) for line in page.splitlines()) <= 80


def test_a_served_arm_declaring_no_sampler_reads_as_the_designs_mode(reference: dict) -> None:
    ode = next(c for c in reference["cells"] if c["mode"]["kind"] == "flow_ode")
    served = {"capabilities": None, "policy": "lab.policies:Mine", "type": None, "checkpoint_sha256": None}
    top = " ".join(_top({**reference, "served_arms": {ode["arm"]: {**served, "sampler": None}}}).split())
    assert f"reads the served arm `{ode['arm']}`: `lab.policies:Mine`, no checkpoint sha256 declared." in top
    assert f"its draws are the design's mode `{ode['mode_text']}` as the server runs it" in top
    assert "names another sampler" not in top


def test_a_served_arms_description_is_flagged_for_the_words_it_names_not_for_parts_of_words(
    reference: dict,
) -> None:
    """ "episode" holds the letters of ODE and "mode" of it too; only a description that names a sampler
    the server does not declare is flagged."""
    ode = next(c for c in reference["cells"] if c["mode"]["kind"] == "flow_ode")

    def flagged(text: str) -> bool:
        decision = _served_diffusion(copy.deepcopy(reference), ode["arm"])
        next(c for c in decision["cells"] if c["id"] == ode["id"])["description"] = text
        return f'description ("{text}") names another sampler' in " ".join(_top(decision).split())

    assert not flagged("LeRobot Diffusion checkpoint, one chunk per episode mode")
    assert flagged("flow arm, one chunk per episode, Heun steps")
