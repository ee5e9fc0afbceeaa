"""A forced rerun that fails leaves a DAG that rebuilds: Snakemake and ``verify`` agree after it.

The failure: a replay job forced to run again (``--forcerun replay``) refuses an input, as it refuses a
server that changed. Snakemake removed the job's outputs before it ran; the pages earlier runs built from
them stayed, so ``snakemake decision.md`` said "Nothing to be done" while ``verify`` found the chain
broken. The workflow's error handler removes what was built on the missing files (the root pages too,
though the failed run's target was the design's own page), and a plain rerun rebuilds it byte for byte.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RESULTS = "results/smoke"
CELL = "c1_ar_t1_0"
PAGES = ("decision.md", "decision.json", f"{RESULTS}/decision.md", f"{RESULTS}/decision.json")


def _flip_a_byte_keeping_its_time(path: Path) -> None:
    """Change the bytes but not the time: Snakemake plans nothing new, and the job that reads the file
    refuses it (its writer's manifest recorded other bytes)."""
    times = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))


def test_a_failed_forced_replay_leaves_a_dag_that_any_target_rebuilds(run_copy: Path, workflow_tools) -> None:
    shard = run_copy / RESULTS / "probe" / CELL / "shard-0.parquet"
    original, times = shard.read_bytes(), shard.stat()
    pages = {name: (run_copy / name).read_bytes() for name in PAGES}
    _flip_a_byte_keeping_its_time(shard)

    forced = workflow_tools.snakemake(
        run_copy, f"{RESULTS}/decision.md", "--cores", "1", *workflow_tools.SMOKE, "--forcerun", "replay"
    )
    said = forced.stdout + forced.stderr
    assert forced.returncode != 0 and "its bytes changed after the job that wrote it ran" in said
    replay_manifest = run_copy / RESULTS / "replay" / f"{CELL}.manifest.json"
    assert not replay_manifest.exists()  # Snakemake removed the failed job's outputs
    # what stood on them is gone too, the root pages included, though the run's target was the design's page
    assert not any((run_copy / name).exists() for name in PAGES)
    assert not (run_copy / RESULTS / "decision.manifest.json").exists()
    kept = [f"join/{CELL}.manifest.json", "replay/c3_teacher_ode.manifest.json"]
    assert all((run_copy / RESULTS / name).is_file() for name in kept)  # what did not stand on them stays
    cause = f"{RESULTS}/replay/{CELL}.manifest.json"
    assert f"removed {RESULTS}/decision.manifest.json (built from {cause}, which the failed" in said

    shard.write_bytes(original)  # the input as it was (the server put back)
    os.utime(shard, ns=(times.st_atime_ns, times.st_mtime_ns))
    verify = workflow_tools.grpo_probe(run_copy, "verify", f"{RESULTS}/decision.manifest.json")
    assert verify.returncode == 1 and "target manifest is missing" in verify.stderr
    # the design's page plans the failed job again (the rebuild below asks for the root's page)
    planned = workflow_tools.snakemake(run_copy, f"{RESULTS}/decision.md", "-n", *workflow_tools.SMOKE)
    assert planned.returncode == 0 and "Nothing to be done" not in planned.stdout + planned.stderr
    assert f"output: {RESULTS}/oracles/replay/{CELL}.json" in planned.stdout

    rerun = workflow_tools.snakemake(run_copy, "decision.md", "--cores", "2", *workflow_tools.SMOKE)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert {name: (run_copy / name).read_bytes() for name in PAGES} == pages
    verify = workflow_tools.grpo_probe(run_copy, "verify", f"{RESULTS}/decision.manifest.json")
    assert verify.returncode == 0, verify.stdout + verify.stderr
