"""What every benchmark here reads off the machine: CPU seconds spent and the load average.

The benchmarks run as scripts (``python benchmarks/<name>.py``), so this folder is on their import path
and they import this module by its bare name.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable

__all__ = ["cpu_s", "fresh_processes_in_turn", "load_average", "machine_cpu_s", "print_medians"]


def cpu_s() -> float:
    """User + system CPU seconds of this process and its reaped children so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as printed beside a measurement (a shared machine slows
    both sides of a comparison alike, and the reader should know how loaded it was)."""
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def machine_cpu_s() -> float:
    """Busy CPU seconds of the whole machine so far (Linux ``/proc/stat``: user, nice, system, irq,
    softirq). For work whose processes this one never reaps, such as the workers a forkserver forks: run
    it with nothing else running and read the difference. Steal (time the hypervisor gave another guest)
    is left out: on a shared host it grows with the neighbours' load, not with this work."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def print_medians(rows: dict[str, list[tuple[float, float]]]) -> dict[str, tuple[float, float]]:
    """Print each path's median wall and CPU seconds with their range (``rows``: path -> one (wall, CPU)
    per repeat); the medians by path, for the ratios a benchmark prints after them."""
    medians = {}
    for name, values in rows.items():
        walls, cpus = [w for w, _ in values], [c for _, c in values]
        medians[name] = (statistics.median(walls), statistics.median(cpus))
        print(
            f"  {name:>10}: wall {medians[name][0]:6.2f} s [{min(walls):.2f}, {max(walls):.2f}], "
            f"CPU {medians[name][1]:6.2f} s [{min(cpus):.2f}, {max(cpus):.2f}]"
        )
    return medians


def fresh_processes_in_turn(
    commands: dict[str, list[str]], repeats: int, cpu: Callable[[], float] = cpu_s
) -> tuple[dict[str, list[tuple[float, float]]], dict[str, set[str]]]:
    """Run each path's command as a fresh process, the paths in turn, ``repeats`` times: per path, one
    (wall, CPU) per run, CPU read by ``cpu`` before and after (:func:`cpu_s`, or :func:`machine_cpu_s`
    for processes this one does not reap), and the set of stdouts (stripped), which a benchmark compares
    across paths."""
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    outputs: dict[str, set[str]] = {name: set() for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            wall, start = time.perf_counter(), cpu()
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            rows[name].append((time.perf_counter() - wall, cpu() - start))
            outputs[name].add(out.strip())
    return rows, outputs
