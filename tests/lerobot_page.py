"""docs/lerobot.md's design and run, as the LeRobot tests follow them: its code blocks in page order, the
design it saves whole, and the run of that design with its arm bound to a served policy.

Why one module: the page is one lab's path, and both the stand-in's test (tests/e2e/test_lerobot_page.py)
and LeRobot's own policies (tests/serve/test_lerobot_venv.py, which runs the page's commands verbatim)
must take the same design and the same run from it, so a change to the page reaches both.

The page marks what a reader saves: a fenced block whose info string carries ``title="<path>"`` is the
whole text of the file ``<path>`` (the design, the run configs); every ``bash`` block is commands to run
in the repository root, in page order.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import workflow_copies

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "lerobot.md"
DESIGN = "prereg/pusht_lerobot.yaml"
RESULTS = Path("results/pusht_lerobot")
ARM = "flow_teacher"
"""The arm of the page's design bound to the served policy."""


FENCE = re.compile(r"^```(?P<language>\w+)(?P<info>[^\n]*)\n(?P<body>.*?)^```[ ]*$", re.M | re.S)
TITLE = re.compile(r'title="(?P<path>[^"]+)"')


@dataclass(frozen=True)
class Step:
    """One fenced block of the page, in page order: a file to save (``path``) or commands to run."""

    section: str
    language: str
    path: str | None
    text: str


def page_steps() -> list[Step]:
    """Every fenced block of the page in order, with the ``## `` section it sits in and, for a block
    titled with a file name, that file's path."""
    steps = []
    for chunk in re.split(r"^(?=## )", PAGE.read_text(), flags=re.M):
        section = chunk.splitlines()[0].lstrip("# ").strip() if chunk.startswith("## ") else ""
        for fence in FENCE.finditer(chunk):
            title = TITLE.search(fence["info"])
            steps.append(Step(section, fence["language"], title and title["path"], fence["body"]))
    return steps


def page_blocks(language: str) -> list[str]:
    """The page's fenced code blocks in ``language``, in order."""
    return [step.text for step in page_steps() if step.language == language]


def page_file(path: str) -> str:
    """The whole text the page tells the reader to save as ``path`` (its block titled so)."""
    (text,) = [step.text for step in page_steps() if step.path == path]
    return text


def page_design() -> dict[str, Any]:
    """The design the page saves as ``DESIGN``, parsed."""
    return yaml.safe_load(page_file(DESIGN))


def write_design(workdir: Path) -> Path:
    """The page's design, written verbatim to ``DESIGN`` in ``workdir``."""
    path = workdir / DESIGN
    path.write_text(page_file(DESIGN))
    return path


def bind_served_arm(workdir: Path, address: str, timeout_s: float) -> None:
    """The page's run config, ``lab.yaml``: the arm bound to the policy served at ``address``."""
    binding = {"source": "server", "address": address, "timeout_s": timeout_s}
    (workdir / "lab.yaml").write_text(yaml.safe_dump({"arms": {ARM: binding}}))


def run_to_decision(workdir: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """Snakemake to the design's decision.md with ``lab.yaml`` (:func:`bind_served_arm`), on two cores."""
    return workflow_copies.snakemake(
        workdir,
        str(RESULTS / "decision.md"),
        "--cores",
        "2",
        "--configfile",
        "lab.yaml",
        "--config",
        f"prereg={DESIGN}",
        timeout=timeout,
    )
