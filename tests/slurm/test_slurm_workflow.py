"""The smoke workflow through profiles/slurm on a real (one-node) SLURM: every job is a SLURM job, and the
results are the bytes a local run writes."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

RESULTS = Path("results/smoke")
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")
LOCAL_JOB = re.compile(r"^(?:local)?rule (\w+):", flags=re.M)


def _submissions(log: str) -> dict[str, Path]:
    """SLURM job id -> the SLURM log file the plugin named for it."""
    return {job_id: Path(path) for job_id, path in SUBMITTED.findall(log)}


def _rule_of(slurm_log: Path) -> str:
    """The plugin files each job's log under .snakemake/slurm_logs/rule_<rule>/[<wildcards>/]<jobid>.log."""
    parts = slurm_log.parts
    return parts[parts.index("slurm_logs") + 1].removeprefix("rule_")


LOCAL_RULES = {"all", "prereg_check", "compute", "root_decision"}


def test_every_workflow_job_is_a_slurm_job_with_its_own_slurm_log(smoke_runs) -> None:
    # The Snakefile's localrules run in the submitting process, never as SLURM jobs.
    local_jobs = Counter(rule for rule in LOCAL_JOB.findall(smoke_runs.local_log) if rule not in LOCAL_RULES)
    submissions = _submissions(smoke_runs.slurm_log)
    assert Counter(_rule_of(path) for path in submissions.values()) == local_jobs
    for job_id, path in submissions.items():
        # slurmstepd writes this file (sbatch --output); Snakemake keeps it (slurm-keep-successful-logs).
        assert path.name == f"{job_id}.log"
        assert path.is_file(), path
        assert path.is_relative_to(smoke_runs.slurm_dir)


def test_slurm_reports_the_run_s_jobs_completed_in_its_work_directory(smoke_runs) -> None:
    proc = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--format", "%i %T %Z"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    known = {
        job_id: (state, Path(workdir)) for job_id, state, workdir in map(str.split, proc.stdout.splitlines())
    }
    submitted = list(_submissions(smoke_runs.slurm_log))
    # slurmctld forgets a job MinJobAge seconds after it ends; the last job ended seconds ago.
    assert submitted[-1] in known
    for job_id in submitted:
        if job_id in known:
            assert known[job_id] == ("COMPLETED", smoke_runs.slurm_dir), job_id


def test_squeue_stays_the_status_command_so_the_run_cannot_hang_on_sacct(smoke_runs) -> None:
    assert "Falling back to 'sacct'" not in smoke_runs.slurm_log


@pytest.mark.parametrize(
    "name", [RESULTS / "decision.md", RESULTS / "decision.json", Path("decision.md"), Path("decision.json")]
)
def test_slurm_run_decision_is_byte_identical_to_the_local_run(smoke_runs, name: Path) -> None:
    """The design's pages and their copies at the root, which `snakemake decision.md` builds."""
    slurm = (smoke_runs.slurm_dir / name).read_bytes()
    local = (smoke_runs.local_dir / name).read_bytes()
    assert slurm == local


def test_slurm_run_tables_are_byte_identical_to_the_local_run(smoke_runs) -> None:
    local_tables = sorted(
        p.relative_to(smoke_runs.local_dir) for p in (smoke_runs.local_dir / RESULTS).rglob("*.parquet")
    )
    slurm_tables = sorted(
        p.relative_to(smoke_runs.slurm_dir) for p in (smoke_runs.slurm_dir / RESULTS).rglob("*.parquet")
    )
    assert slurm_tables == local_tables
    assert local_tables
    differing = [
        str(table)
        for table in local_tables
        if (smoke_runs.slurm_dir / table).read_bytes() != (smoke_runs.local_dir / table).read_bytes()
    ]
    assert differing == []
