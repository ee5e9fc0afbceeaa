"""The smoke design run under another CPU dispatch level of this machine writes the same tables.

Why: a run's bytes must not depend on the CPU it ran on (grpo_probe.numerics). The shell of the run read
here asks every numeric library for its baseline kernels (tests/installed_wheel.py, ``BASELINE_SHELL``:
PyTorch's scalar ``default`` capability, numpy without its x86-64-v3 loops, OpenBLAS's Prescott kernels,
MKL's own choice), the opposite end from the shared smoke run's shell, which lets each library take this
machine's best. The workflow applies its numerics setting to every job whatever the shell asks, so every
table, checkpoint and trained weight must come out byte for byte the same; a job that escaped the setting,
or a library switch missing from it, shows here as a differing file. That these variables do change the
bytes when nothing overrides them is checked first, so the comparison cannot pass for want of a
difference to find. The run is the installed-package test's (tests/session_runs.py,
``installed_smoke_run``): one whole run of the smoke design answers both.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_probe import numerics
from installed_wheel import BASELINE_SHELL
from workflow_copies import RESULTS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

COMPARED = ("arms", "demos", "anchors", "probe", "replay", "oracles", "cells", "join")
"""Every folder of the run whose files are bytes of computation (not logs, timings or the pages)."""

_PROBE = (
    "import hashlib, torch; torch.set_num_threads(1); g = torch.Generator().manual_seed(0); "
    "x = torch.randn(64, 256, generator=g); "
    "print(hashlib.sha256((x @ x.T).tanh().numpy().tobytes()).hexdigest())"
)


def _files(results: Path) -> dict[str, str]:
    found = {}
    for folder in COMPARED:
        for path in sorted((results / folder).rglob("*")):
            if path.is_file() and not path.name.endswith(".log"):
                found[path.relative_to(results).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _torch_bytes(env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.skipif(not numerics.cpu_supports(), reason="the numerics setting needs x86-64 with AVX2 and FMA")
def test_the_smoke_tables_do_not_depend_on_the_shells_dispatch_level(
    smoke_run: Path, installed_run: Path
) -> None:
    without_setting = {k: v for k, v in os.environ.items() if k not in numerics.VARIABLES}
    assert _torch_bytes({**without_setting, **BASELINE_SHELL}) != _torch_bytes(
        {**without_setting, **numerics.VARIABLES}
    ), "the baseline shell changes no byte of torch's kernels here, so this test could not see a difference"

    ours, shared = _files(installed_run / RESULTS), _files(smoke_run / RESULTS)
    assert len(ours) > 30 and ours.keys() == shared.keys()
    differing = sorted(k for k in ours if ours[k] != shared[k])
    assert not differing, f"under the baseline shell, files differ from the shared smoke run: {differing}"
    manifest = (installed_run / RESULTS / "decision.manifest.json").read_text(encoding="utf-8")
    assert f'"setting": "{numerics.SETTING}"' in manifest
