"""The default's numbers in the README and the docs are the code's: rendered from a committed reference
decision.json of the design's current lock, never typed by hand.

Why: shipped numbers once came from a tree that was never committed, and nothing noticed. Here a page's
headline block that differs from what the reference renders fails, and so does a reference that is not of
the design's current registered version (a new amendment must come with a new reference run).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from grpo_probe.analysis.page.headline import BLOCKS, render_blocks

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "reference" / "grpo_signal_probe.decision.json"
PAGES = ("README.md", "docs/error-rates.md")
FIX = "run tools/refresh_headline.py (after bin/probe, with results/grpo_signal_probe/decision.json)"


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


def test_the_reference_is_of_the_design_s_current_lock(reference: dict) -> None:
    lock = json.loads((REPO / "prereg" / "grpo_signal_probe.yaml.lock").read_text(encoding="utf-8"))
    assert reference["prereg"]["sha256"] == lock["sha256"], f"the reference is of another version: {FIX}"


@pytest.mark.parametrize("page", PAGES)
def test_every_headline_block_is_what_the_reference_renders(page: str, reference: dict) -> None:
    text = (REPO / page).read_text(encoding="utf-8")
    assert render_blocks(text, reference) == text, (
        f"{page}: a headline block differs from the reference: {FIX}"
    )


def test_the_readme_carries_the_headline_and_an_unknown_block_is_refused(reference: dict) -> None:
    names = set(re.findall(r"<!-- headline:([a-z-]+) -->", (REPO / "README.md").read_text(encoding="utf-8")))
    assert names == set(BLOCKS)
    with pytest.raises(ValueError, match="unknown headline block 'nope'"):
        render_blocks("<!-- headline:nope -->\nx\n<!-- /headline:nope -->", reference)
    # a hand-edited number inside a block is caught
    edited = "<!-- headline:outcome -->\nVersion 1 gives **go**.\n<!-- /headline:outcome -->"
    assert render_blocks(edited, reference) != edited
