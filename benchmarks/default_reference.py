"""Reproduce the default's committed reference decision from a fresh clone, and say where they differ.

Run by hand (about 15 minutes on 2 cores: a fresh install and the whole default run; not in CI):

    .venv/bin/python benchmarks/default_reference.py [--keep DIR]

It clones this repository's HEAD into a temporary folder (or DIR), runs ``bin/probe`` there (which
installs its own .venv and runs the embedded default to decision.json), and compares that decision.json
with ``docs/reference/grpo_signal_probe.decision.json`` key by key. The record holds no clock or host
field, so the two must be equal; the script prints the first differing paths and exits 1 when any is
found. ``tests/test_headline_docs.py`` checks, in every test run, that the README's and the docs'
numbers are the reference's; this is the slower check that the reference is the committed code's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "reference" / "grpo_signal_probe.decision.json"


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Every path at which ``a`` and ``b`` differ (a key on one side only, or unequal leaves)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            where = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                out.append(f"{where}: only in {'the run' if key in a else 'the reference'}")
            else:
                out += differences(a[key], b[key], where)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"[:300]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, default=None, help="clone into DIR and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clone = args.keep or Path(tmp) / "clone"
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        start = time.perf_counter()
        run = subprocess.run(["bin/probe"], cwd=clone)
        wall = time.perf_counter() - start
        if run.returncode != 0:
            print(f"bin/probe failed (exit {run.returncode}) after {wall:.0f} s", file=sys.stderr)
            return run.returncode
        found = json.loads((clone / "results" / "grpo_signal_probe" / "decision.json").read_text())
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    diff = differences(found, reference)
    print(
        f"bin/probe in a fresh clone: {wall:.0f} s wall; {len(diff)} differing paths against {REFERENCE.name}"
    )
    for line in diff[:20]:
        print(f"  {line}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
