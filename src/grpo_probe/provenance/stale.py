"""What a failed run leaves standing on a file it removed, and removing it, so that any target rebuilds.

Why: Snakemake removes a job's outputs before it runs (a forced or outdated job) and again when it fails,
but the files that earlier runs built from those outputs stay, newer than their inputs. Snakemake plans
from the target back: a job whose outputs exist and are newer than the inputs that exist is not run, and
a missing input of a job that is not run is not looked for (Snakemake treats it as an intermediate file
the target no longer needs). So after a forced rerun that fails, ``snakemake results/<design>/decision.md``
or ``snakemake decision.md`` says "Nothing to be done" while ``grpo-probe verify`` finds the chain broken
at the removed file. A failed run's handler (the workflow's ``onerror``) hands this module what the run
removed and what each file was built from (Snakemake's own record of a job's inputs); every file built
from a removed one, directly or through another such file, is removed too. Then every target that
stood on the failed job is missing too, any ``snakemake`` rebuilds the chain through the failed job, and
``verify`` (which finds the decision's manifest missing) and Snakemake agree that it must be rebuilt.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

__all__ = ["remove_stale", "stale_files"]


def stale_files(
    removed: Iterable[str],
    candidates: Iterable[str],
    built_from: Callable[[str], Iterable[str] | None],
    exists: Callable[[str], bool] = os.path.exists,
) -> dict[str, str]:
    """Each existing file of ``candidates`` built from a file of ``removed``, directly or through another
    stale candidate: file -> the input it was built from that was removed or is stale (the first, in the
    order ``built_from`` lists them). ``built_from(path)``: the inputs the job that wrote ``path`` read,
    or None where nothing records them (such a file is never called stale).

    In the order found, so a file comes after the one it was built from."""
    gone = set(removed)
    left = [c for c in dict.fromkeys(candidates) if c not in gone and exists(c)]
    stale: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for path in left:
            if path in stale:
                continue
            cause = next((i for i in built_from(path) or () if i in gone or i in stale), None)
            if cause is not None:
                stale[path] = cause
                changed = True
    return stale


def remove_stale(stale: Mapping[str, str], removed: Iterable[str]) -> list[str]:
    """Remove each stale file (a folder output with what it holds); the lines that say what was removed
    and why, for the failed run's output."""
    if not stale:
        return []
    gone = set(removed)
    lines = [
        "The failed run removed outputs that other files were built from; removing those too, so that any "
        "target rebuilds them (rerun snakemake):"
    ]
    for path, cause in stale.items():
        target = Path(path)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
        why = "which the failed run removed" if cause in gone else "removed here"
        lines.append(f"  removed {path} (built from {cause}, {why})")
    return lines
