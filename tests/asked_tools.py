"""A Debian tool that an opt-in test needs: the test runs when asked, and installs the tool if missing.

Why one helper: the browser test and the cross-CPU test each run only when their variable asks for them
(`.ci/run` sets both), never merely because the tool is installed, and each installs its tool as root with
a script under tools/ when it is missing; the skip, the install and its failure read the same in both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def asked_tool(variable: str, command: str, installer: str, what: str) -> str:
    """The path of ``command``; a skip unless ``variable`` is 1, installing it with ``installer`` (a script
    under the repository, run as root) when it is missing; a failure naming what went wrong otherwise."""
    if os.environ.get(variable) != "1":
        pytest.skip(f"the {what} runs when asked: {variable}=1 (installs {command} as root)")
    if shutil.which(command) is None:
        done = subprocess.run([str(REPO / installer)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.fail(f"could not install {command}: {done.stderr[-2000:]}")
    found = shutil.which(command)
    assert found is not None
    return found


LONG_RUNS = "GRPO_PROBE_LONG_RUNS"
"""The variable that asks for the runs that take one to three minutes on 2 cores each (the camera-fed
design, the Pusher design with its pilot, Snakemake's generated unit tests of the smoke run): `.ci/run` sets
it; a newcomer's ``bin/test`` leaves them to CI, which keeps the default suite under 12 minutes on 2
cores (docs/performance.md). What they reach is also reached by smaller tests that always run (frames in
rollouts and replays, Gymnasium scenes end to end on PointMaze, Reacher and PushT, phase 2 on the boat,
the audit's reruns of recorded jobs)."""

long_run = pytest.mark.skipif(
    os.environ.get(LONG_RUNS) != "1",
    reason=f"a run of one to three minutes: it runs when asked, {LONG_RUNS}=1 (.ci/run sets it)",
)
"""Mark a module (``pytestmark``) or test as one of those runs."""
