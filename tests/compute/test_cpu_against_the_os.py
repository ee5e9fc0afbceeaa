"""compute.md's CPU seconds are what the OS counts for each job, its pool's workers included.

A job here runs as the workflow's rollout jobs do: under Snakemake's ``benchmark:``, burning CPU in its
own process and in a pool of workers forked from a forkserver (the rollout pool's start method). The job
stops the forkserver and reaps it before it exits, so its own ``getrusage`` (self + children) holds
every process of its tree: that is the OS's count, and :func:`read_benchmarks`, which compute.md sums,
must agree with it.

Why the job reaps the forkserver itself: a forkserver left running exits only when its parent does, so
the job never waits for it, and the server (with the workers it reaped) is reaped by init. Its CPU is
then in no ancestor's ``getrusage``, which is why ``/usr/bin/time`` over a whole run reads less CPU than
compute.md: the second test pins that.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grpo_probe.compute import read_benchmarks

WORKER_CPU_S = 1.5
"""CPU seconds each of the 2 workers burns."""
MAIN_CPU_S = 1.0
"""CPU seconds the job's own process burns."""
TOLERANCE_S = 0.6
"""Snakemake samples the job's process tree every 0.5 s: CPU a process spends after its last sample is
missed (less than one interval); the rest of the tolerance is the scheduler's tick granularity."""

SNAKEFILE = """
rule all:
    input: "out/burn.json"

rule burn:
    output: "out/burn.json"
    benchmark: "benchmarks/burn.tsv"
    params: reap=config.get("reap", True)
    script: "burn.py"
"""

BURNLIB = f"""
import time

def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return seconds

def work(_):
    return burn({WORKER_CPU_S})
"""

SCRIPT = f"""
import json, multiprocessing, resource, sys, time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import forkserver

sys.path.insert(0, ".")
import burnlib

if __name__ == "__main__":
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        list(pool.map(burnlib.work, range(2)))
        time.sleep(1.5)  # idle workers: the benchmark samples their final CPU before they stop
    burnlib.burn({MAIN_CPU_S})
    time.sleep(3.0)  # wall time that is not CPU time
    if snakemake.params.reap:
        forkserver._forkserver._stop()  # wait for the server, which reaped its workers
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    with open(snakemake.output[0], "w") as fh:
        json.dump({{"os_cpu_s": cpu}}, fh)
"""


def _run(root: Path, reap: bool) -> tuple[float, float, float]:
    """Run the burn job; (its benchmark's CPU as compute reads it, the job's own OS count, the CPU the
    OS charged to the whole Snakemake command as ``/usr/bin/time`` reads it)."""
    root.mkdir()
    (root / "Snakefile").write_text(SNAKEFILE)
    (root / "burnlib.py").write_text(textwrap.dedent(BURNLIB))
    (root / "burn.py").write_text(textwrap.dedent(SCRIPT))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--config", f"reap={reap}"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (stage,) = read_benchmarks(root / "benchmarks")
    job = json.loads((root / "out/burn.json").read_text())["os_cpu_s"]
    command = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return stage.cpu_s, job, command


@pytest.mark.slow
def test_compute_counts_the_cpu_the_os_counts_for_a_job_and_its_workers(tmp_path: Path) -> None:
    compute_cpu, os_cpu, _ = _run(tmp_path / "reaped", reap=True)
    assert os_cpu >= 2 * WORKER_CPU_S + MAIN_CPU_S  # the workers' CPU is in the job's own count
    assert compute_cpu == pytest.approx(os_cpu, abs=TOLERANCE_S)


@pytest.mark.slow
def test_a_whole_command_count_misses_workers_whose_server_init_reaped(tmp_path: Path) -> None:
    """compute.md is not an over-count where ``/usr/bin/time`` reads less: the workers' CPU never
    reaches the command's ``getrusage`` while their forkserver outlives the job."""
    compute_cpu, os_cpu, command_cpu = _run(tmp_path / "orphaned", reap=False)
    assert os_cpu < 2 * WORKER_CPU_S  # the job's own count holds no worker
    assert compute_cpu >= 2 * WORKER_CPU_S + MAIN_CPU_S - TOLERANCE_S
    assert command_cpu < compute_cpu  # Snakemake's own CPU included, the command still reads less
