"""decision.md and decision.json name files relative to their own folder; the root copy links from the root.

Why: a results tree moved, or written under another ``results:``, must hold the same decision bytes, and
the copy at the repository root (what ``snakemake decision.md`` builds) must link to figures, tables and
compute.md that exist from where it is read. The run elsewhere is the session's bound run (``bound_run``,
tests/e2e/conftest.py): the smoke run's trained checkpoints bound, so it runs rollouts and analysis only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RESULTS = Path("results/smoke")
SMOKE = ["--config", "prereg=prereg/smoke.yaml"]
# Markdown links and images, [text](target), whose target is a path rather than a URL or an anchor.
LINK = re.compile(r"\]\((?!https?://|#)([^)\s]+)\)")


def _file_paths(decision: dict) -> list[str]:
    """Every file path decision.json records: tables, figure links and the provenance footer."""
    paths = [entry["path"] for entry in decision["provenance"]] + list(decision["figures"].values())
    for cell in decision["cells"]:
        paths += [cell[key] for key in ("probe_table", "anchor_table", "join_table") if cell.get(key)]
        paths += list(cell["figures"].values())
    return paths


def test_decision_json_paths_are_relative_to_its_folder(smoke_run: Path) -> None:
    folder = smoke_run / RESULTS
    paths = _file_paths(json.loads((folder / "decision.json").read_text()))
    assert paths
    for path in paths:
        assert not Path(path).is_absolute() and not path.startswith(("results/", "..")), path
        assert (folder / path).is_file(), path


def test_root_decision_names_the_design_and_links_from_the_root(smoke_run: Path) -> None:
    md = (smoke_run / "decision.md").read_text()
    assert md.startswith("# GRPO signal probe: decision\n")  # the outcome first, where it was rendered last
    assert md.splitlines()[-1].startswith(
        "> Design **smoke** (`prereg/smoke.yaml`), run in [`results/smoke/`]"
    )
    assert md.index("## Hashes") < md.index("> Design **smoke**")
    links = LINK.findall(md)
    assert any(link.endswith("compute.md") for link in links)
    assert any(link.endswith(".png") for link in links)
    for link in links:
        assert (smoke_run / link).exists(), link
    root = json.loads((smoke_run / "decision.json").read_text())
    design = json.loads((smoke_run / RESULTS / "decision.json").read_text())
    assert root["rendered_from"]["folder"] == "results/smoke"
    for path in _file_paths(root):
        assert (smoke_run / path).is_file(), path
    assert {
        k: v for k, v in root.items() if k not in ("rendered_from", "cells", "figures", "provenance")
    } == {k: v for k, v in design.items() if k not in ("cells", "figures", "provenance")}


def test_the_root_target_is_up_to_date_after_a_run(smoke_run: Path, snakemake) -> None:
    proc = snakemake(smoke_run, "-n", "decision.md", *SMOKE)
    assert proc.returncode == 0, proc.stderr
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_a_run_under_another_results_folder_writes_the_same_decision_bytes(
    smoke_run: Path, bound_run: Path
) -> None:
    for name in ("decision.md", "decision.json"):
        moved = (bound_run / "results/elsewhere/smoke" / name).read_bytes()
        assert moved == (smoke_run / RESULTS / name).read_bytes(), name
    md = (bound_run / "decision.md").read_text()
    assert "run in [`results/elsewhere/smoke/`]" in md.splitlines()[-1]
    # a path on the design's page, a link here (its words wrapped wherever the line breaks)
    assert "[validation study](docs/validation-study.md)" in " ".join(md.split())
    for link in LINK.findall(md):
        assert (bound_run / link).exists(), link
