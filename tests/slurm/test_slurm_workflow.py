"""The smoke workflow through profiles/slurm on a real (one-node) SLURM: every job runs in a SLURM job, the
profile's job groups hold, and the results are the bytes a local run writes."""

from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

PROFILE = Path("profiles/slurm/config.yaml")
RESULTS = Path("results/smoke")
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")
LOCAL_JOB = re.compile(r"^(?:local)?rule (\w+):", flags=re.M)
# The first Snakemake a SLURM job starts prints its command line, which names the jobs it runs:
# --target-jobs rule:wildcard=value,... (one job, or every job of a group component).
COMMAND = re.compile(r"^\s*Command: (.*)$", flags=re.M)
# ...and the Snakemake of each job's srun step, which runs the job, prints "localrule <rule>:".
RAN = re.compile(r"^localrule (\w+):", flags=re.M)

LOCAL_RULES = {"all", "prereg_check", "compute", "root_decision"}


def _submissions(log: str) -> dict[str, Path]:
    """SLURM job id -> the SLURM log file the plugin named for it."""
    return {job_id: Path(path) for job_id, path in SUBMITTED.findall(log)}


def _target_jobs(slurm_log: Path) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of every workflow job one SLURM job ran, from its first Snakemake's command line."""
    match = COMMAND.search(slurm_log.read_text(errors="replace"))
    assert match, f"no Snakemake command line in {slurm_log}"
    words = shlex.split(match.group(1))
    start = words.index("--target-jobs") + 1
    jobs = []
    for word in words[start:]:
        if word.startswith("--"):
            break
        rule, _, wildcards = word.partition(":")
        jobs.append((rule, dict(item.split("=", 1) for item in wildcards.split(",") if item)))
    return jobs


def _profile_groups(workdir: Path) -> dict[str, str]:
    """The profile's rule -> group mapping, as the run read it."""
    return yaml.safe_load((workdir / PROFILE).read_text()).get("groups") or {}


def _slurm_jobs(smoke_runs) -> dict[str, list[tuple[str, dict[str, str]]]]:
    return {job_id: _target_jobs(path) for job_id, path in _submissions(smoke_runs.slurm_log).items()}


def test_every_workflow_job_runs_in_a_slurm_job_with_its_own_slurm_log(smoke_runs) -> None:
    # The Snakefile's localrules run in the submitting process, never in SLURM jobs.
    local_jobs = Counter(rule for rule in LOCAL_JOB.findall(smoke_runs.local_log) if rule not in LOCAL_RULES)
    submissions = _submissions(smoke_runs.slurm_log)
    for job_id, path in submissions.items():
        # slurmstepd writes this file (sbatch --output); Snakemake keeps it (slurm-keep-successful-logs).
        assert path.name == f"{job_id}.log"
        assert path.is_file(), path
        assert path.is_relative_to(smoke_runs.slurm_dir)
    assigned = Counter(rule for jobs in _slurm_jobs(smoke_runs).values() for rule, _ in jobs)
    assert assigned == local_jobs
    logs = [path.read_text(errors="replace") for path in submissions.values()]
    ran = Counter(rule for log in logs for rule in RAN.findall(log))
    assert ran == local_jobs


def test_slurm_jobs_are_the_profile_s_groups_one_per_cell(smoke_runs) -> None:
    """A handful of SLURM jobs, not one per workflow job: the demos, one training job per arm and one
    job per cell (trainings and cells stay apart, so a cluster runs them side by side), the parallel
    oracle and anchors as one chain, and the decision."""
    groups = _profile_groups(smoke_runs.slurm_dir)
    cells = Counter(LOCAL_JOB.findall(smoke_runs.local_log))["join"]
    assert cells >= 2
    kinds = Counter()
    for job_id, jobs in _slurm_jobs(smoke_runs).items():
        kind = {groups.get(rule, rule) for rule, _ in jobs}
        assert len(kind) == 1, (job_id, jobs)
        (kind,) = kind
        if kind in ("cell", "train"):
            key = "cell" if kind == "cell" else "arm"
            assert len({wildcards[key] for _, wildcards in jobs}) == 1, (job_id, jobs)
        kinds[kind] += 1
    trained = Counter(LOCAL_JOB.findall(smoke_runs.local_log))["train"]
    assert trained >= 2
    assert kinds == {"demos": 1, "train": trained, "arms": 1, "cell": cells, "decision": 1}


def test_slurm_reports_the_run_s_jobs_completed_in_its_work_directory(smoke_runs) -> None:
    # `squeue --states=all --noheader --format "%i %T %Z"`, run as the SLURM run ended (see conftest.py)
    known = {
        job_id: (state, Path(workdir))
        for job_id, state, workdir in map(str.split, smoke_runs.squeue.splitlines())
    }
    submitted = list(_submissions(smoke_runs.slurm_log))
    # slurmctld forgets a job MinJobAge seconds after it ends; the last job ended seconds before squeue ran.
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
