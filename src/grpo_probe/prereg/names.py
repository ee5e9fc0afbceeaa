"""One results folder per design: a design's ``name:`` is its folder, so two designs may not share one.

Why: every output of a design lives under ``<results>/<name>/``. A newcomer who copies
``prereg/smoke.yaml`` to ``prereg/mine.yaml`` and edits it would otherwise overwrite the smoke run's
results with another design's, and the manifests of the two would interleave. The workflow refuses such
a design before any job runs, naming both files: another design file with the same name beside it, or
results already made under that name by another design file (read off the folder's root manifest). A
design that moved since (``prereg/MOVED.yaml``) is the same file: its recorded path is looked up there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from grpo_probe.prereg.canonical import SafeLoader
from grpo_probe.prereg.design import PreregError
from grpo_probe.prereg.moved import read_moves

__all__ = ["check_one_folder_per_design", "designs_named", "folder_problems"]

_ROOT_MANIFEST = Path("prereg/check.manifest.json")
"""The results folder's first manifest (rule prereg_check), which records the design file it ran."""


def _name_of(path: Path) -> str | None:
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    name = raw.get("name") if isinstance(raw, dict) else None
    return name if isinstance(name, str) else None


def designs_named(name: str, folder: str | os.PathLike[str]) -> list[Path]:
    """The design files (``*.yaml``) directly in ``folder`` whose ``name:`` is ``name``, sorted."""
    return sorted(p for p in Path(folder).glob("*.yaml") if p.is_file() and _name_of(p) == name)


def folder_problems(prereg_path: str | os.PathLike[str], results: str | os.PathLike[str]) -> list[str]:
    """Every reason this design may not use ``<results>/<name>/``: another design file beside it with the
    same name, or results there made by another design file. Empty when the folder is its own (or the
    file has no readable name, which the validation reports)."""
    prereg_path = Path(prereg_path)
    name = _name_of(prereg_path)
    if name is None:
        return []
    here = prereg_path.resolve()
    problems = []
    twins = [p for p in designs_named(name, prereg_path.parent) if p.resolve() != here]
    if twins:
        problems.append(
            f"{prereg_path}: name {name!r} is also the name of {twins[0]}; both would write "
            f"{Path(results) / name}/. Give this design a name of its own (its `name:` field) and lock "
            "it again"
        )
    manifest = Path(results) / name / _ROOT_MANIFEST
    try:
        recorded = json.loads(manifest.read_text(encoding="utf-8")).get("prereg_path")
    except (OSError, ValueError, AttributeError):
        return problems
    if isinstance(recorded, str) and Path(read_moves().current(recorded)).resolve() != here:
        problems.append(
            f"{prereg_path}: {Path(results) / name}/ holds the results of {recorded} (named {name!r} too, "
            f"per {manifest}); give this design a name of its own (its `name:` field) and lock it again, "
            "or move those results away"
        )
    return problems


def check_one_folder_per_design(prereg_path: str | os.PathLike[str], results: str | os.PathLike[str]) -> None:
    """Raise :class:`PreregError` when another design shares this design's name (so ``<results>/<name>/``).

    Checked before the design is validated or its lock read, so a copied design is named as a copy
    before anything else is said about it; a file without a readable name is left to the validation.
    """
    problems = folder_problems(prereg_path, results)
    if problems:
        raise PreregError("\n".join(problems))
