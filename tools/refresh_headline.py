"""Refresh the default's reference decision and the headline blocks the README and the docs render from it.

After the embedded default ran (``bin/probe``), in the same commit as the change that moved its numbers:

    .venv/bin/python tools/refresh_headline.py results/grpo_signal_probe/decision.json

copies the run's decision.json to docs/reference/ (the committed reference) and rewrites every
``<!-- headline:NAME -->`` block of the pages in PAGES from it; tests/test_headline_docs.py fails when a
page's block differs from what the reference renders, or when the reference is not of the design's
current lock. Without an argument the blocks are refreshed from the committed reference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grpo_probe.analysis.page.headline import refresh

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "reference" / "grpo_signal_probe.decision.json"
PAGES = ("README.md", "docs/error-rates.md")


def main(argv: list[str]) -> int:
    if argv:
        source = Path(argv[0])
        text = source.read_text(encoding="utf-8")
        json.loads(text)  # a decision.json, whole
        REFERENCE.parent.mkdir(parents=True, exist_ok=True)
        tmp = REFERENCE.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(REFERENCE)
        print(f"reference: {REFERENCE.relative_to(REPO)} from {source}")
    decision = json.loads(REFERENCE.read_text(encoding="utf-8"))
    for page in PAGES:
        path = REPO / page
        new, changed = refresh(path.read_text(encoding="utf-8"), decision)
        if changed:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(new, encoding="utf-8")
            tmp.replace(path)
        print(f"{page}: {', '.join(changed) or 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
