"""decision.md's first screen, on the default design's registered decision: what limits the go, in one
screen of 80 columns x 40 lines."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from grpo_probe.analysis.page import VALIDATION_PAGE, render_decision_md

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
