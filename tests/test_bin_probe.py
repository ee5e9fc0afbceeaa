"""bin/probe shows what Snakemake and the project print when a run stops before its first job.

Why: bin/probe filters Snakemake's output down to one line per finished job; a filter that knows only
the shapes of job failures hid a bad ``--config`` value or a design that fails its schema behind
"what it said about the failure is above" with nothing above it.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workflow_copies import REPO, copy_repo

PROBE = REPO / "bin" / "probe"


def _progress_filter() -> str:
    """The Python program bin/probe pipes Snakemake's output through."""
    text = PROBE.read_text(encoding="utf-8")
    found = re.search(r"cat <<'PY'\n(.*?)\nPY\n", text, re.S)
    assert found, "bin/probe no longer embeds its progress filter"
    return found[1]


def _filtered(lines: list[str]) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _progress_filter()],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.splitlines()


def test_a_run_stopped_before_any_job_shows_every_line() -> None:
    said = [
        "Using workflow specific profile profiles/default for setting default command line arguments.",
        "prereg/x.yaml: 1 problem, to fix before anything runs:",
        "  - prereg/x.yaml: (top level): 'group_sise' was unexpected; did you mean 'group_size'?",
    ]
    assert _filtered(said) == said


def test_a_run_with_jobs_shows_progress_and_the_failure_not_its_start_up() -> None:
    said = [
        "Building DAG of jobs...",
        "Provided cores: 2",
        "Job stats:",
        "total                 2",
        "rule train:",
        "    log: results/smoke/logs/train/ar.log",
        "    jobid: 3",
        "    wildcards: arm=ar",
        "",
        "Finished jobid: 3 (Rule: train)",
        "1 of 2 steps (50%) done",
        "rule decision:",
        "    jobid: 0",
        "Error in rule decision:",
        "    log: results/smoke/logs/decision.log",
    ]
    assert _filtered(said) == [
        "2 jobs to run",
        "  started train arm=ar (progress: results/smoke/logs/train/ar.log)",
        "[1/2] train arm=ar",
        "Error in rule decision:",
        "    log: results/smoke/logs/decision.log",
    ]


def test_a_failure_while_building_the_dag_shows_what_came_before_it() -> None:
    said = ["Building DAG of jobs...", "MissingInputException in rule x:", "Missing input files: a"]
    assert _filtered(said) == said


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout sharing this interpreter's environment, which bin/bootstrap finds current."""
    venv = Path(sys.prefix)
    # bin/bootstrap's stamp: the lock and the project's metadata, as it hashes them
    installed = (REPO / "requirements.lock").read_bytes() + (REPO / "pyproject.toml").read_bytes()
    stamp = hashlib.sha256(installed).hexdigest()[:16]
    if not (venv / f".installed-{stamp}").is_file():
        pytest.skip(f"{venv} is not an environment bin/bootstrap made from this lock and pyproject.toml")
    root = copy_repo(tmp_path_factory.mktemp("checkout"))
    (root / ".venv").symlink_to(venv, target_is_directory=True)
    design = yaml.safe_load((root / "prereg/smoke.yaml").read_text(encoding="utf-8"))
    design["name"] = "smoke_typo"
    design["group_sise"] = design.pop("group_size")
    (root / "prereg/smoke_typo.yaml").write_text(yaml.safe_dump(design, sort_keys=False), encoding="utf-8")
    return root


def _probe(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {"GRPO_PROBE_REQUIRE_GL": "0"}
    return subprocess.run(
        ["bin/probe", *args], cwd=root, capture_output=True, text=True, timeout=300, check=False, env=env
    )


@pytest.mark.slow
def test_a_config_value_of_the_wrong_type_reaches_the_terminal(checkout: Path) -> None:
    proc = _probe(checkout, "--config", "workers=abc")
    assert proc.returncode != 0
    assert "workers: 'abc' is not of type 'integer'" in proc.stdout, proc.stdout + proc.stderr
    assert "Snakemake failed" in proc.stderr


@pytest.mark.slow
def test_a_design_with_a_misspelt_field_names_it_on_the_terminal(checkout: Path) -> None:
    proc = _probe(checkout, "--config", "prereg=prereg/smoke_typo.yaml")
    assert proc.returncode != 0
    assert "prereg/smoke_typo.yaml" in proc.stdout, proc.stdout + proc.stderr
    assert "'group_sise' was unexpected" in proc.stdout, proc.stdout
    assert not (checkout / "results" / "smoke_typo").exists()  # no job ran
