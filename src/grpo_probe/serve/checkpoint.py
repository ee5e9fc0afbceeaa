"""The sha256 a policy server declares of the checkpoint it serves (``checkpoint_sha256`` in its hello).

Why the server hashes: the probe cannot read a served checkpoint's bytes, so the server's word is what a
design pins (``arms.<id>.checkpoint_sha256``), what the arm's binding records and what every later
connection is held to: a different checkpoint restarted behind the same address is refused at connect.
The hash is the probe's own (``grpo_probe.user_code.tree_sha256``, which this package cannot import): a
file's bytes, or a folder's sorted ``<relative path>\\0<file's sha256>\\n`` lines with hidden files and
``__pycache__`` left out, so a pin computed either side holds on the other.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["checkpoint_sha256"]

_BLOCK = 1 << 20


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def checkpoint_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of a checkpoint file, or of a checkpoint folder's files (see the module docstring)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: checkpoint not found")
    if not path.is_dir():
        return _file_sha256(path)
    lines = []
    for folder, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        for name in filenames:
            if not name.startswith("."):
                file = Path(folder) / name
                lines.append(f"{file.relative_to(path).as_posix()}\0{_file_sha256(file)}\n")
    return hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()
