"""Snakemake's own per-rule unit tests, generated from the smoke run, pass as generated.

Why: ``snakemake --generate-unit-tests`` copies each rule's declared inputs into a fresh folder, reruns
that one job there (``--allowed-rules``) and byte-compares its outputs with the run's. It passes only if
every file a job reads is a declared input (checkpoints, demos, the prereg and its lock) and every
output is a function of those inputs, which is what lets the workflow run on an executor that stages
declared inputs only. The one rule left out is ``compute``: its page is the run's own timing, read from
the benchmark files Snakemake writes beside every job, which no rerun reproduces.

The generated tests pass the run's config files to Snakemake but not its ``--config`` values, so the
design is set in config/config.yaml (README: "Snakemake's own unit tests").

It runs when asked (``GRPO_PROBE_LONG_RUNS=1``, which `.ci/run` sets): one to two minutes on a worker,
which a newcomer's ``bin/test`` leaves to CI; the audit's reruns (tests/audit) check recorded jobs alike.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from asked_tools import long_run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, long_run]

EXCEPTION = "compute"
"""The rule whose generated test cannot pass: its output is the run's timing (see the module docstring)."""


def _configure_smoke(workdir: Path) -> None:
    config = workdir / "config" / "config.yaml"
    text = config.read_text()
    assert "\nprereg: prereg/grpo_signal_probe.yaml\n" in text
    config.write_text(
        text.replace("\nprereg: prereg/grpo_signal_probe.yaml\n", "\nprereg: prereg/smoke.yaml\n")
    )


def test_generated_unit_tests_pass_for_every_rule_but_compute(run_copy: Path, snakemake) -> None:
    _configure_smoke(run_copy)
    assert "Nothing to be done" in snakemake(run_copy, "-n").stdout  # the same DAG as the smoke run
    proc = snakemake(run_copy, "--generate-unit-tests")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    generated = sorted(p.stem.removeprefix("test_") for p in (run_copy / ".tests/unit").glob("test_*.py"))
    assert EXCEPTION in generated
    assert {"anchors", "decision", "parallel_oracle", "probe", "replay", "root_decision"} <= set(generated)
    # The generated tests start `python -m snakemake`: the environment's python must come first on PATH.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    tests = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            ".tests/unit",
            "-q",
            "--deselect",
            f".tests/unit/test_{EXCEPTION}.py::test_{EXCEPTION}",
        ],
        cwd=run_copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert tests.returncode == 0, tests.stdout[-6000:] + tests.stderr[-3000:]
    assert f"{len(generated) - 1} passed, 1 deselected" in tests.stdout
