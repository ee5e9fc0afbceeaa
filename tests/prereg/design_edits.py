"""Edited copies of the shipped designs, and the error loading one raises: the prereg tests' two helpers.

Why copies: these tests are about validity, so an edit is written unlocked into the test's own folder and
loaded with ``require_lock=False``; the shipped design and its lock are never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from grpo_probe.prereg import load_prereg
from grpo_probe.prereg.canonical import read_yaml

REPO = Path(__file__).resolve().parents[2]


def edited(tmp_path: Path, name: str, edit: Callable[[dict[str, Any]], object]) -> Path:
    """A copy of ``prereg/<name>`` (``smoke.yaml``, ``designs/smoke/pusher_smoke.yaml``) with ``edit(raw)``
    applied to its parsed YAML, in ``tmp_path`` under its file name."""
    raw = read_yaml(REPO / "prereg" / name)
    edit(raw)
    path = tmp_path / Path(name).name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def load_error(path: Path, exc_type: type[Exception] = ValueError) -> str:
    """The message of the ``exc_type`` that loading the design at ``path`` must raise."""
    with pytest.raises(exc_type) as info:
        load_prereg(path, require_lock=False)
    return str(info.value)
