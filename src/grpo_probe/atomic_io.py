"""Atomic artifact writes: a killed job leaves either the old file or the new one, never half of one.

Why: Snakemake treats an existing output as done unless it knows the job failed; a half-written parquet
or checkpoint that survives a SIGKILL would be silently accepted downstream. Every artifact is written
to a temporary file in the destination directory, flushed and fsynced, then renamed into place. JSON
artifacts are read back by :func:`read_json`, whose errors name the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_json", "atomic_write_text", "read_json"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on clean exit fsync it and rename it onto ``path``.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        tmp.chmod(0o666 & ~_umask())  # mkstemp makes 0600; give the file the mode a plain open() would
        tmp.replace(dest)
        with contextlib.suppress(OSError):
            dir_fd = os.open(dest.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], value: Any) -> None:
    """Write ``value`` to ``path`` atomically as JSON: sorted keys, two-space indent, a final newline, and
    no NaN or infinity (which strict readers such as DuckDB refuse): the same value, the same bytes."""
    atomic_write_text(path, json.dumps(value, indent=2, sort_keys=True, allow_nan=False) + "\n")


def read_json(path: str | os.PathLike[str], what: str, error: type[Exception]) -> Any:
    """The JSON value in ``path``, with errors that name the file and what it should have been.

    Why beside the writers: the artifacts written here as JSON (a design's lock, a job's manifest) are read
    back by readers that each say which file failed and how, and a reader that forgot a case (text that is
    not UTF-8) let a bare decoding error through. A missing file raises ``FileNotFoundError("<path>: no
    such <what>")``; a file that is not UTF-8 JSON raises ``error("<path>: not a valid <what>: <why>")``.
    What the value must hold is the caller's to check.
    """
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such {what}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not a valid {what}: {exc}") from None
