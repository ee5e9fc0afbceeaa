"""What grpo-probe-serve ships: the served package, the keyed streams a served policy draws from, and
the camera set-up the environment server draws frames with.

Why: check-policy's fixes tell a lab which module to draw its noise from; a lab serving its policy from
its own environment has only grpo-probe-serve there, so every module a fix names must be in that
distribution's wheel, and the package's ``__init__`` must not be (it would shadow a grpo-probe installed
beside it). The environment server imports ``grpo_probe.render_setup`` (the frames it draws are the
probe's in-process bytes), so the wheel must hold it, and nothing else of the package.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile

import pytest

from grpo_probe.policies.check.report import FINDING_CODES
from serve_processes import REPO, copy_serve_sources


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The file names in grpo-probe-serve's wheel, built from a copy of this checkout."""
    tree = tmp_path_factory.mktemp("tree")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tree / "dist"),
            str(copy_serve_sources(tree)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tree / "dist").glob("grpo_probe_serve-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_the_wheel_holds_the_served_package_the_keyed_streams_and_the_camera_setup_without_the_package_init(
    wheel_names: set[str],
) -> None:
    served = {
        str(path.relative_to(REPO / "src")) for path in (REPO / "src" / "grpo_probe" / "serve").rglob("*.py")
    }
    assert served <= wheel_names, sorted(served - wheel_names)
    shipped_beside = {"grpo_probe/keyed_rng.py", "grpo_probe/render_setup.py"}
    assert shipped_beside <= wheel_names, sorted(shipped_beside - wheel_names)
    assert "grpo_probe/__init__.py" not in wheel_names
    ours = {name for name in wheel_names if name.startswith("grpo_probe/")}
    assert ours == served | shipped_beside, sorted(ours - served)


def _shipped_module(dotted: str, wheel_names: set[str]) -> str | None:
    """The longest prefix of ``dotted`` (a module, or a module's attribute) that is a module in the wheel."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end])
        if f"{path}.py" in wheel_names or f"{path}/__init__.py" in wheel_names:
            return ".".join(parts[:end])
    return None


def test_every_module_a_randomness_fix_names_ships_in_grpo_probe_serve(wheel_names: set[str]) -> None:
    """The fixes for unkeyed draws name the modules to draw from; a served policy must find them."""
    named = {
        match
        for code in ("not-repeatable", "global-rng", "key-ignored")
        for match in re.findall(r"grpo_probe(?:\.[A-Za-z_]\w*)+", FINDING_CODES[code])
    }
    assert "grpo_probe.keyed_rng.numpy_generator" in named
    missing = sorted(name for name in named if _shipped_module(name, wheel_names) in (None, "grpo_probe"))
    assert missing == [], f"fixes name modules grpo-probe-serve does not ship: {missing}"
