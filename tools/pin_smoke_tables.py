"""Pin the smoke design's table bytes: write tests/golden/smoke_tables.json from a finished smoke run.

A registered run's bytes change only on purpose. tests/e2e/test_smoke_workflow.py compares every table of
the suite's smoke run with this pin; a commit that changes them reruns the smoke design, then this script,
and says why in docs/changelog.md, in the same commit:

    .venv/bin/snakemake --cores 2 --config prereg=prereg/smoke.yaml
    .venv/bin/python tools/pin_smoke_tables.py results/smoke

The pin also records the environment the run's bytes hold for (the decision manifest's lock sha256,
numerics setting, Python, libc and architecture; :func:`grpo_probe.provenance.machine.environment_summary`):
a run in another environment is told so, naming what differs, instead of "the tables changed".
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

PINNED_FOLDERS = ("anchors", "probe", "replay", "cells", "join")
"""The smoke run's folders of tables: the rollouts, their replays, the anchors and the per-cell joins."""

PIN = Path(__file__).resolve().parents[1] / "tests" / "golden" / "smoke_tables.json"


def table_hashes(results: Path) -> dict[str, str]:
    """sha256 of every parquet table under the pinned folders of a design's results, by relative path."""
    found = {}
    for folder in PINNED_FOLDERS:
        for path in sorted((results / folder).rglob("*.parquet")):
            found[path.relative_to(results).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def run_environment(results: Path) -> dict:
    """The byte-deciding environment the run's decision job recorded in its manifest."""
    from grpo_probe.provenance.machine import environment_summary

    manifest = json.loads((results / "decision.manifest.json").read_text(encoding="utf-8"))
    return environment_summary(manifest["environment"])


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not (Path(argv[0]) / "decision.json").is_file():
        print(
            f"usage: {Path(__file__).name} RESULTS_FOLDER (a finished smoke run, e.g. results/smoke)",
            file=sys.stderr,
        )
        return 2
    tables = table_hashes(Path(argv[0]))
    pin = {
        "design": "prereg/smoke.yaml",
        "environment": run_environment(Path(argv[0])),
        "folders": list(PINNED_FOLDERS),
        "tables": tables,
    }
    text = json.dumps(pin, indent=1)
    tmp = PIN.with_suffix(".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(PIN)
    print(f"pinned {len(tables)} tables in {PIN}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
