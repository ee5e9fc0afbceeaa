"""docs/lerobot.md's design and run, as the two LeRobot tests follow them: its code blocks, the design it
writes over prereg/designs/smoke/pusht_smoke.yaml, and the run of that design with its arm bound to a served
policy.

Why one module: the page is one lab's path, and both the stand-in's test (tests/e2e/test_lerobot_page.py)
and LeRobot's own policies (tests/serve/test_lerobot_venv.py) must take the same design and the same run
from it, so a change to the page reaches both.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

import workflow_copies

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "lerobot.md"
DESIGN = "prereg/pusht_lerobot.yaml"
RESULTS = Path("results/pusht_lerobot")
ARM = "flow_teacher"
"""The arm of prereg/designs/smoke/pusht_smoke.yaml the page binds to the served policy."""


def page_blocks(language: str) -> list[str]:
    """The page's fenced code blocks in ``language``, in order."""
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)


def page_design() -> dict[str, Any]:
    """The design's changes the page shows (its YAML block headed ``# prereg/pusht_lerobot.yaml``)."""
    (block,) = [b for b in page_blocks("yaml") if b.startswith(f"# {DESIGN}")]
    return yaml.safe_load(block)


def write_design(workdir: Path) -> Path:
    """prereg/designs/smoke/pusht_smoke.yaml with the page's changes (its name, env params, observation and
    the arm's inputs), written to ``DESIGN`` in ``workdir``."""
    raw = yaml.safe_load((workdir / "prereg/designs/smoke/pusht_smoke.yaml").read_text())
    page = page_design()
    raw["name"] = page["name"]
    raw["env"]["params"].update(page["env"]["params"])
    raw["observation"] = page["observation"]
    raw["arms"][ARM].update(page["arms"][ARM])
    path = workdir / DESIGN
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
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
