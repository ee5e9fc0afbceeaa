"""Reproduce the default's committed reference decision from a fresh clone, and say where they differ.

Run by hand (about 15 minutes on 2 cores: a fresh install and the whole default run; not in CI):

    .venv/bin/python benchmarks/default_reference.py [--keep DIR]

It clones this repository's HEAD into a temporary folder (or DIR), runs ``bin/probe`` there (which
installs its own .venv and runs the embedded default to decision.json), and compares that decision.json
with ``docs/reference/grpo_signal_probe.decision.json``. The verdict leads: the comparison of
:mod:`grpo_probe.audit.across`, which asks first whether the run's environment is byte-compatible with
the reference's. In the same environment the record holds no clock or host field, so the two must be
equal ("same environment: identical"); in another environment (another lock, numerics setting, CPU
class, libc or Python) bytes may differ, and the check is that the design is the same, the decision is
the same and every interval overlaps. The key-by-key listing of differing paths follows (first 20;
``--all`` lists every one). Exit 1 when the verdict fails. ``tests/test_headline_docs.py`` checks, in
every test run, that the README's and the docs' numbers are the reference's; this is the slower check
that the reference is the committed code's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grpo_probe.audit.across import compare_decisions, format_comparison, keyed_record, record_differences

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "reference" / "grpo_signal_probe.decision.json"
LABELS = ("run", "reference")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, default=None, help="clone into DIR and keep it")
    parser.add_argument("--all", action="store_true", help="list every differing path, not the first 20")
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
    result = compare_decisions(found, reference, LABELS)
    print(result.headline)
    print(f"bin/probe in a fresh clone: {wall:.0f} s wall; compared with {REFERENCE.name}")
    print("\n".join(format_comparison(result).splitlines()[1:]))
    diff = record_differences(keyed_record(found), keyed_record(reference), LABELS)
    shown = diff if args.all else diff[:20]
    print(f"key by key: {len(diff)} differing paths" + (":" if diff else ""))
    for line in shown:
        print(f"  {line}")
    if len(shown) < len(diff):
        print(f"  ... and {len(diff) - len(shown)} more (--all lists them)")
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
