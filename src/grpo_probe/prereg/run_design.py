"""The design a run is configured with, loaded with every problem it has reported at once.

Why: a newcomer copies ``prereg/smoke.yaml`` to ``prereg/mine.yaml`` and edits it. Told one problem per
start (the name it shares with the original, then a field the schema refuses, then the missing lock), they
start the workflow three times to learn what one message could say. The workflow's first step asks every
question a design can fail before anything runs (its results folder, its schema and cross-field rules,
its lock) and lists every answer.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.design import Prereg, PreregError, load_prereg
from grpo_probe.prereg.extends import merge_extends
from grpo_probe.prereg.lock import LockError, check_lock
from grpo_probe.prereg.names import folder_problems

__all__ = ["load_run_design"]


def load_run_design(prereg_path: str | os.PathLike[str], results: str | os.PathLike[str]) -> Prereg:
    """The configured design, validated and matching its lock, parsed once; or :class:`PreregError`
    listing every problem found (folder, validation, lock), each line naming the file and the field.

    A missing design file raises :class:`FileNotFoundError` (there is nothing else to check).
    """
    path = Path(prereg_path)
    problems = folder_problems(path, results)
    try:
        prereg = load_prereg(path)  # the common case, a valid locked design: read and parsed once
    except FileNotFoundError:
        raise
    except ValueError:
        prereg = None
    if prereg is not None and not problems:
        return prereg
    if prereg is None:  # ask each question on its own, so one problem does not hide the next
        valid = True
        try:
            load_prereg(path, require_lock=False)
        except ValueError as exc:  # the schema's and the cross-field rules' problems, one per line
            problems += str(exc).splitlines()
            valid = False
        try:
            raw, extended = merge_extends(read_yaml(path), path)
        except (ValueError, yaml.YAMLError):  # unreadable YAML or shared file: the validation has said so
            raw, extended = None, ()
        if isinstance(raw, dict):
            try:
                check_lock(path, raw, valid=valid, extended=extended)
            except (LockError, ValueError) as exc:
                problems += str(exc).splitlines()
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    listed = "\n".join(f"  - {p}" for p in dict.fromkeys(problems))
    raise PreregError(f"{path}: {count}, all to fix before anything runs:\n{listed}")
