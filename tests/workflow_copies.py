"""Clean copies of the repository, Snakemake and grpo-probe run in them, and the processes they start.

The smoke run the workflow-level tests share is in ``session_runs``; tests that damage a finished run
work on a copy of it (``copy_run``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMOKE = ("--config", "prereg=prereg/smoke.yaml")
RESULTS = Path("results/smoke")
SHARD = RESULTS / "probe" / "c1_ar_t1_0" / "shard-0"
"""The smoke design's first probe shard (cell c1, its first seeds_per_shard seeds), without its suffix."""


def copy_repo(dest: Path) -> Path:
    """Copy what a fresh clone would hold (tracked and unignored files), nothing the workflow wrote."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        src = REPO / name
        if src.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def snakemake(
    workdir: Path, *args: str, timeout: int = 600, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m snakemake *args`` in ``workdir`` (``env``: the whole environment, when given); put
    targets before options that take lists."""
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else dict(env),
    )


def start_snakemake(workdir: Path, *args: str) -> subprocess.Popen[str]:
    """Start ``python -m snakemake *args`` in a new session, so the whole run can be killed as one."""
    return subprocess.Popen(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def grpo_probe(workdir: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """The ``grpo-probe`` command line in ``workdir``."""
    return subprocess.run(
        [sys.executable, "-m", "grpo_probe.cli", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def session_processes(session: int) -> dict[int, str]:
    """Live processes of a session id, pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) != session:
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (ProcessLookupError, FileNotFoundError, PermissionError):
            continue
    return found


def run_design(workdir: Path, design: str, timeout: int = 900) -> Path:
    """Run the design file ``design`` (``prereg/designs/smoke/pusher_smoke.yaml``, relative to ``workdir``)
    to its decision.md in ``workdir`` on 2 cores; its results folder (named as the file is: each shipped
    design's ``name:`` is its file's name).

    A failed run fails the calling test with the end of Snakemake's output.
    """
    results = RESULTS.parent / Path(design).stem
    proc = snakemake(
        workdir,
        str(results / "decision.md"),
        "--cores",
        "2",
        "--config",
        f"prereg={design}",
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return workdir / results


def oracle_reports(run: Path) -> list[Path]:
    """A finished run's oracle reports: the parallel oracle's, then each cell's draw-0 oracle's."""
    draw0 = sorted((run / "oracles/draw0").glob("*/*.json"))  # oracles/draw0/<arm>/<cell>.json
    return [run / "oracles/parallel.json", *draw0]


def copy_run(run: Path, dest: Path) -> Path:
    """A copy of a finished run (results and Snakemake's metadata, times kept) for a test to damage."""
    shutil.copytree(run, dest, symlinks=True)
    return dest
