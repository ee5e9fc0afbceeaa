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
