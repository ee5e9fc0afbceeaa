# After a failed run, in every mode of the workflow: a failed job's outputs are removed by Snakemake (a
# forced job's before it ran), but the files earlier runs built from them stay, and a later `snakemake
# decision.md` would find those present and say "Nothing to be done" while `grpo-probe verify` finds the
# chain broken. So the files built from what the run removed are removed too, and any target rebuilds
# them (grpo_probe.provenance.stale).
import os
import sys

from grpo_probe.provenance.stale import remove_stale, stale_files

# The outputs of the jobs the run plans that are there when it starts: after a failure, those missing are
# what the run removed (a file missing before it is not the run's doing).
PLANNED_OUTPUTS_THERE = set()


def planned_outputs():
    """Each output of a job the run planned and has not finished."""
    return [str(f) for job in workflow.dag.needrun_jobs() for f in job.output]


def note_planned_outputs_there():
    PLANNED_OUTPUTS_THERE.update(p for p in planned_outputs() if os.path.exists(p))


def remove_built_on_removed():
    """The files earlier runs built from an output this failed run removed, removed too (the lines that
    say which go to stderr). What each file was built from is Snakemake's own record of its job's
    inputs; the files looked at are every output of this run's jobs and every file the default target
    asks for (the root pages and each design file, whatever the run's target was)."""
    removed = [
        p
        for p in planned_outputs()
        if p in PLANNED_OUTPUTS_THERE and not os.path.exists(p)
    ]
    files = {str(f): f for job in workflow.dag.jobs for f in job.output}
    if workflow.default_target is not None:
        files.update(
            (str(f), f) for f in workflow.get_rule(workflow.default_target).input
        )
    stale = stale_files(
        removed, files, lambda path: workflow.persistence.input(files[path])
    )
    for line in remove_stale(stale, removed):
        print(line, file=sys.stderr)


onstart:
    note_planned_outputs_there()


onerror:
    remove_built_on_removed()
