"""Workflow runs shared by a whole test session, started in the background as soon as a test needs them.

Why in the background: the smoke run takes minutes on a 2-core machine, and so do the one-node SLURM's
set-up and the smoke workflow through it (which mostly waits on job-status polls). Started when the
tests are collected, they overlap with the tests that need neither, instead of holding up the first
test that reads them.

Why on disk: under pytest-xdist each worker is its own process with its own session fixtures, so a
run is shared through a folder of the session's common temporary directory: whichever process asks
first starts it (under a file lock) and every process waits for its exit-status file. A run is wrapped
in ``timeout``, so one left behind by an interrupted session cannot run on for long.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import yaml

import installed_wheel
from workflow_copies import SMOKE, copy_repo, session_processes

SMOKE_TIMEOUT_S = 1800
"""Longest the shared smoke run may take (2-4 minutes alone; it runs beside the first tests)."""

_started: list[Path] = []
"""The folders of the background runs this process started: ended if the session is interrupted."""


def session_root(base_temp: Path) -> Path:
    """The temporary folder every process of this test session shares.

    pytest-xdist gives each worker its own base temp inside the controller's (``.../popen-gw0``), so
    a worker shares its parent; a session without workers shares its own.
    """
    return base_temp.parent if os.environ.get("PYTEST_XDIST_WORKER") else base_temp


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def start(
    folder: Path,
    command: Sequence[str],
    cwd: Path,
    prepare: Callable[[], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Start ``command`` in ``cwd`` once per session (``folder``: its log, pid and exit status).

    ``prepare`` runs first, under the lock, in the process that starts it; ``env`` is the command's whole
    environment (this process's when None). A later call, from this process or another, does nothing.
    """
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder / "lock"):
        if (folder / "pid").is_file():
            return
        if prepare is not None:
            prepare()
        rc = folder / "rc"
        # The exit status is written whatever the command does; the rename makes it appear whole.
        wrapper = 'r=0; "$@" || r=$?; echo "$r" > "$0.tmp" && mv "$0.tmp" "$0"'
        # Launched in a session of its own and left to the system (the launching shell exits at once):
        # a run may outlive this worker's tests while another worker still reads it, and a child this
        # process never waits for ends the session with "subprocess N is still running" warnings.
        launcher = 'setsid "$@" > "$RUN_LOG" 2>&1 < /dev/null & echo "$!" > "$RUN_PID"'
        paths = {"RUN_LOG": str(folder / "log"), "RUN_PID": str(folder / "pid")}
        subprocess.run(
            ["bash", "-c", launcher, "launcher", "bash", "-c", wrapper, str(rc), *command],
            cwd=cwd,
            env={**(os.environ if env is None else env), **paths},
            check=True,
        )
        _started.append(folder)


def _alive(folder: Path) -> bool:
    try:
        os.kill(int((folder / "pid").read_text()), 0)
    except (ProcessLookupError, FileNotFoundError, ValueError):
        return False
    return True


def wait_for_file(folder: Path, path: Path, timeout_s: float) -> None:
    """Wait until the run of ``folder`` writes ``path`` (it appears whole: written, then renamed).

    Raises RuntimeError naming the folder when the run was never started, ended without writing
    ``path``, died without an exit status (killed from outside), or ``timeout_s`` passed.
    """
    if not (folder / "pid").is_file():
        raise RuntimeError(f"{folder}: no run was started there")
    deadline = time.monotonic() + timeout_s
    while not path.is_file():
        if (folder / "rc").is_file() and not path.is_file():
            raise RuntimeError(
                f"{folder}: the run ended without writing {path.name}:\n{_tail(folder / 'log')}"
            )
        if not _alive(folder) and not (folder / "rc").is_file() and not path.is_file():
            raise RuntimeError(f"{folder}: the run ended without an exit status:\n{_tail(folder / 'log')}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{folder}: no {path.name} after {timeout_s:.0f} s:\n{_tail(folder / 'log')}")
        time.sleep(0.5)


def wait(folder: Path, timeout_s: float) -> tuple[int, str]:
    """Wait for the run of ``folder`` to end: its exit status and its log (errors as ``wait_for_file``)."""
    wait_for_file(folder, folder / "rc", timeout_s)
    return int((folder / "rc").read_text()), (folder / "log").read_text(errors="replace")


def _tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.is_file() else "(no log)"


def stop_unfinished() -> None:
    """End the runs this process started that are still running (the session was interrupted)."""
    for folder in _started:
        if _alive(folder) and not (folder / "rc").is_file():
            # every process of the run's session: ``timeout`` puts its command in a group of its own
            for pid in session_processes(int((folder / "pid").read_text())):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)


def _smoke_folder(root: Path) -> Path:
    return root / "shared-smoke-run"


def start_smoke_run(root: Path) -> None:
    """Start the session's smoke run in a clean copy of the repository, unless it was started."""
    if os.environ.get("GRPO_PROBE_SMOKE_RUN"):
        return
    folder = _smoke_folder(root)
    command = ["timeout", "-k", "10", str(SMOKE_TIMEOUT_S), sys.executable, "-m", "snakemake"]
    start(
        folder,
        [*command, "--cores", "2", *SMOKE],
        cwd=folder / "repo",
        prepare=lambda: copy_repo(folder / "repo"),
    )


def shared_smoke_run(root: Path) -> Path:
    """The repo copy in which the smoke workflow ran to decision.md, once per test session.

    ``GRPO_PROBE_SMOKE_RUN`` may name a finished run of the current code to use instead (read only:
    tests that damage a run work on copies), which saves the run when iterating on one test; the SLURM
    tests also read its Snakemake output, ``log`` in the folder above it (``smoke_run_log``).
    """
    given = os.environ.get("GRPO_PROBE_SMOKE_RUN")
    if given:
        return Path(given).resolve()
    start_smoke_run(root)
    return finished(_smoke_folder(root), SMOKE_TIMEOUT_S + 60, "smoke workflow")


def finished(folder: Path, timeout_s: float, what: str) -> Path:
    """Wait for the run of ``folder``; its copy, ``repo/``, when it succeeded (else RuntimeError with the
    end of its log, naming ``what``)."""
    rc, log = wait(folder, timeout_s)
    if rc != 0:
        raise RuntimeError(f"{what} failed (exit status {rc}):\n{log[-6000:]}")
    return folder / "repo"


def smoke_run_log(run: Path) -> Path:
    """Snakemake's output of the shared smoke run in ``run`` (beside the copy, not in it)."""
    return run.parent / "log"


STUDY_TIMEOUT_S = 1800
"""Longest the shared tiny study may take (about 4 minutes alone)."""

TINY_STUDY = "prereg/studies/validation_tiny.yaml"
"""The study the suite runs, written into the copy by :func:`write_tiny_study`."""

TINY_PHASE2 = {
    "train_seeds": {"first": 2000, "count": 4},
    "eval_seeds": {"first": 3000, "count": 3},
    "iterations": 1,
    "seeds_per_iteration": 2,
    "rollouts_per_seed": 2,
    "replicates": 2,
    "sampled_draws": 2,
}
"""The tiny study's pilot budget: one GRPO iteration of 2 seeds x K = 2, 3 held-out seeds, each arm
piloted twice (a block of training seeds each) and its sampled policy scored with 2 draws a seed."""

TINY_GAIN = {"read": "progress_final_cm", "policy": "sampled"}
"""The tiny study ranks the sampled policy's gain, the mean over the replicates, so one run shows the
replicates' and the sampled policy's rules end to end as well as the study's."""

GRADIENT_MEMBER = "smooth_plane_smoke"
"""The member whose tiny copy also registers the gradient reads (``analysis.gradient_reads: true``): the
positive control, whose reward follows the actions smoothly. tests/e2e/test_gradient_reads_workflow.py
reads them from the shared run instead of running the design again (three gradients jobs here, against a
whole run of its own)."""


def tiny_member(design: str) -> str:
    """The name of the tiny study's copy of a registered member design (``luck_plane_smoke`` ->
    ``luck_plane_tiny``)."""
    return design.removesuffix("_smoke") + "_tiny"


def write_tiny_study(workdir: Path) -> Path:
    """Write and lock, in ``workdir``, the registered tiny study (prereg/studies/validation_smoke.yaml)
    with each member's pilot cut to ``TINY_PHASE2``; its path.

    Why a copy: the registered study pilots each of its four arms for 6 iterations on 12 held-out seeds
    (its members' amendment 1), twelve minutes on 2 cores. The suite tests the study's machinery, which
    one iteration exercises as well, with two pilot replicates and the sampled policy's gain
    (``TINY_PHASE2``, ``TINY_GAIN``), which the registered study does not use. Everything else of each
    member is its registered content, so the members' probe reads are the registered designs' own
    numbers (tests/envs/test_planes.py reads the luck plane's from here); the positive control
    (``GRADIENT_MEMBER``) adds the gradient reads, which only add a job per cell and their reads.
    """
    from grpo_probe.prereg import lock_prereg
    from grpo_probe.study.design import lock_study

    study = yaml.safe_load((workdir / "prereg/studies/validation_smoke.yaml").read_text())
    for member in study["members"]:
        raw = yaml.safe_load((workdir / member["design"]).read_text())
        if raw["name"] == GRADIENT_MEMBER:
            raw["analysis"]["gradient_reads"] = True
        name = tiny_member(raw["name"])
        raw.update(name=name, amendments=[])
        raw["phase2"].update(TINY_PHASE2)
        path = workdir / "prereg" / f"{name}.yaml"
        path.write_text(yaml.safe_dump(raw, sort_keys=False))
        lock_prereg(path)
        member["design"] = f"prereg/{name}.yaml"
    study["name"] = "validation_tiny"
    study["gain"] = TINY_GAIN
    path = workdir / TINY_STUDY
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    with contextlib.chdir(workdir):  # member designs are named relative to the workflow's folder
        lock_study(TINY_STUDY)
    return path


def _study_folder(root: Path) -> Path:
    return root / "shared-study-run"


def _write_study_copy(workdir: Path) -> None:
    copy_repo(workdir)
    write_tiny_study(workdir)


def start_study_run(root: Path) -> None:
    """Start the session's tiny study run (``TINY_STUDY``) in a clean copy, unless it was started.

    With ``workers=1`` every rollout job runs its tasks in its own process (``rollout.worker_count``):
    the planes' shards hold several tasks each, and a pool of two would start two more processes that
    each import torch for a second or two of episodes. The bytes are the same (tests/rollout); the
    registered parallel oracle keeps its own pool."""
    if os.environ.get("GRPO_PROBE_STUDY_RUN"):
        return
    folder = _study_folder(root)
    command = ["timeout", "-k", "10", str(STUDY_TIMEOUT_S), sys.executable, "-m", "snakemake"]
    start(
        folder,
        [*command, "--cores", "2", "--config", f"study={TINY_STUDY}", "workers=1"],
        cwd=folder / "repo",
        prepare=lambda: _write_study_copy(folder / "repo"),
    )


def shared_study_run(root: Path) -> Path:
    """The repo copy in which the tiny study ran to its page, once per test session (read only).

    ``GRPO_PROBE_STUDY_RUN`` may name a finished run of the current code instead, as
    ``GRPO_PROBE_SMOKE_RUN`` does for the smoke run.
    """
    given = os.environ.get("GRPO_PROBE_STUDY_RUN")
    if given:
        return Path(given).resolve()
    start_study_run(root)
    return finished(_study_folder(root), STUDY_TIMEOUT_S + 60, "the tiny study")


REPO = Path(__file__).resolve().parents[1]
START_SLURM = REPO / "tools" / "slurm" / "start-slurm.sh"
SLURM_OPT_IN = "GRPO_PROBE_SLURM"
SLURM_CONF = Path("/etc/slurm/slurm.conf")
SLURM_CONF_MARKER = "# written by grpo-probe tools/slurm/start-slurm.sh"
SLURM_RUN_TIMEOUT_S = 1800
"""Longest the smoke workflow through SLURM may take (4-6 minutes alone; it runs beside the rest of the
suite, which can triple that on a loaded 2-core machine); a hung Snakemake gets SIGKILL 10 s later."""

# The one-node SLURM (start-slurm.sh, its exit status in setup.rc), then the smoke workflow through
# profiles/slurm to the root decision.md, then what slurmctld says of the run's jobs: read at once,
# since it forgets a job MinJobAge (300 s) after the job ends. $0 is the run's folder, $1 the script.
_SLURM_CHAIN = r"""
bash "$1" > "$0/setup.log" 2>&1; s=$?
echo "$s" > "$0/setup.rc.tmp" && mv "$0/setup.rc.tmp" "$0/setup.rc"
[ "$s" -eq 0 ] || exit "$s"
shift 1
"$@" > "$0/run.log" 2>&1; r=$?
squeue --states=all --noheader --format '%i %T %Z' > "$0/squeue.txt" 2> "$0/squeue.err"
exit "$r"
"""


def slurm_asked() -> bool:
    """Whether this test session asked for the SLURM tests (GRPO_PROBE_SLURM=1)."""
    return os.environ.get(SLURM_OPT_IN, "").strip().lower() in {"1", "true", "yes"}


def slurm_refusal() -> str | None:
    """Why the SLURM tests may not start their cluster here, or None when they may."""
    if os.geteuid() != 0:
        return f"{SLURM_OPT_IN}=1 asks for the SLURM tests, which start SLURM with {START_SLURM}: run as root"
    if SLURM_CONF.is_file() and SLURM_CONF_MARKER not in SLURM_CONF.read_text(errors="replace"):
        return (
            f"{SLURM_CONF} was not written by {START_SLURM.relative_to(REPO)}: the SLURM tests start "
            "their own one-node cluster and will not submit jobs to another one"
        )
    return None


def slurm_folder(root: Path) -> Path:
    """The folder of the session's SLURM run: setup.log/.rc, run.log, squeue.txt and the copy, repo/."""
    return root / "slurm-smoke-run"


def start_slurm_run(root: Path) -> None:
    """Start the one-node SLURM and the smoke workflow through it, when asked and allowed here."""
    if not slurm_asked() or slurm_refusal() is not None:
        return
    folder = slurm_folder(root)
    snakemake = ["timeout", "-k", "10", str(SLURM_RUN_TIMEOUT_S), sys.executable, "-m", "snakemake"]
    # The profile as shipped: its job groups, and its polling (5 s, which the one-node cluster's
    # MinJobAge of 300 s allows with squeue as the status command).
    run = [*snakemake, "decision.md", "--profile", "profiles/slurm", *SMOKE]
    start(
        folder,
        ["bash", "-c", _SLURM_CHAIN, str(folder), str(START_SLURM), *run],
        cwd=folder / "repo",
        prepare=lambda: copy_repo(folder / "repo"),
    )


BOUND_RESULTS = "results/elsewhere"
"""Where the bound smoke run writes (``results:``), so that its pages name another folder."""


def _bound_folder(root: Path) -> Path:
    return root / "bound-smoke-run"


def _write_bound_copy(workdir: Path, smoke_run: Path) -> None:
    copy_repo(workdir)
    arms = {
        arm: {
            "source": "checkpoint",
            "path": str(smoke_run / "results/smoke/arms" / arm / "policy.pt"),
            "adapter": "grpo_probe.policies.checkpoint:load_policy",
        }
        for arm in ("ar", "flow_teacher")
    }
    (workdir / "bound.yaml").write_text(yaml.safe_dump({"arms": arms}))


def bound_smoke_run(root: Path, smoke_run: Path) -> Path:
    """A clean copy that ran the smoke design to the root decision.md with both arms bound to the smoke
    run's trained checkpoints (``bound.yaml``) and ``results: results/elsewhere``, once per session.

    It trains nothing, so it costs the rollouts and the analysis only. Read only: it is the run both the
    bring-your-own-checkpoint test and the results-folder test compare with the smoke run.
    """
    folder = _bound_folder(root)
    workdir = folder / "repo"
    command = ["timeout", "-k", "10", str(SMOKE_TIMEOUT_S), sys.executable, "-m", "snakemake", "decision.md"]
    options = ["--cores", "2", "--configfile", "bound.yaml", "--config", "prereg=prereg/smoke.yaml"]
    start(
        folder,
        [*command, *options, f"results={BOUND_RESULTS}"],
        cwd=workdir,
        prepare=lambda: _write_bound_copy(workdir, smoke_run),
    )
    return finished(folder, SMOKE_TIMEOUT_S + 60, "the bound smoke run")


def _installed_folder(root: Path) -> Path:
    return root / "installed-smoke-run"


def _prepare_installed(folder: Path, smoke_run: Path) -> None:
    wheel = installed_wheel.build_wheel(REPO, folder)  # the sources the editable run imported
    installed_wheel.make_environment(wheel, folder / "venv")
    installed_wheel.copy_tree(installed_wheel.WORKFLOW, smoke_run, folder / "repo")


def installed_smoke_run(root: Path, smoke_run: Path) -> Path:
    """A copy of the workflow without ``src/`` (``installed_wheel.WORKFLOW``, from the smoke run's copy)
    that ran the smoke design to the root decision.md from a wheel of the package installed in a fresh
    environment (``venv/`` beside the copy), in a shell asking every numeric library for its baseline
    kernels (``installed_wheel.BASELINE_SHELL``), once per session; the copy.

    Why both at once: each is a whole run of the smoke design compared with the shared smoke run, one for
    the package's data lookups (tests/e2e/test_installed_package.py compares the pages), one for the
    numerics setting (tests/e2e/test_dispatch_levels.py compares every table). Either going wrong changes
    bytes; the dispatch test compares every computed file and names those that differ. Read only.
    """
    folder = _installed_folder(root)
    workdir = folder / "repo"
    venv = folder / "venv"
    env = {**installed_wheel.installed_environment(venv), **installed_wheel.BASELINE_SHELL}
    python = str(venv / "bin" / "python")
    command = ["timeout", "-k", "10", str(SMOKE_TIMEOUT_S), python, "-m", "snakemake", "--cores", "2", *SMOKE]
    start(folder, command, cwd=workdir, prepare=lambda: _prepare_installed(folder, smoke_run), env=env)
    return finished(folder, SMOKE_TIMEOUT_S + 60, "the installed smoke run")
