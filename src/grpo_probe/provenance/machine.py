"""What produced an artifact: the code (version and a hash of its sources) and the machine it ran on.

Why: reproducibility of the rollouts holds within one MuJoCo version and one CPU architecture
(docs/reference.md, "Determinism"), so a manifest must say which ones produced it; an auditor whose
rerun differs can then tell a code change from a machine change. Nothing here varies between two runs on
the same machine and code: no timestamps, host names or paths, so a rerun writes the same manifest bytes.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import platform
from pathlib import Path
from typing import Any

import grpo_probe

__all__ = ["DISTRIBUTION", "TRACKED_PACKAGES", "code_version", "cpu_info", "environment", "sources_sha256"]

DISTRIBUTION = "grpo-probe"
TRACKED_PACKAGES = ("mujoco", "numpy", "torch")
"""Distributions whose versions can change a result byte."""


def sources_sha256(package_dir: str | Path | None = None) -> str:
    """sha256 over ``"<sha256 of file>  <relative path>\\n"`` lines of every package source, sorted by path.

    The lines are the format of ``sha256sum``, so an auditor can recompute the hash with standard tools:
    ``find . -type f ! -path '*__pycache__*' | sort | xargs sha256sum | sha256sum`` in the package
    directory (paths there start with ``./``; here they do not).
    """
    root = Path(package_dir) if package_dir is not None else Path(grpo_probe.__file__).resolve().parent
    files = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )
    digest = hashlib.sha256()
    for rel in files:
        digest.update(f"{hashlib.sha256((root / rel).read_bytes()).hexdigest()}  {rel}\n".encode())
    return digest.hexdigest()


def _version(distribution: str) -> str | None:
    import importlib.metadata  # here: about 20 ms to import, which the command line's start need not pay

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def code_version() -> dict[str, Any]:
    """Package version and the hash of the package sources it runs from."""
    return {"package": DISTRIBUTION, "version": _version(DISTRIBUTION), "sources_sha256": sources_sha256()}


def cpu_info(cpuinfo_path: str | Path = "/proc/cpuinfo") -> dict[str, Any]:
    """CPU model and sorted feature flags (space-separated) of the first processor in ``/proc/cpuinfo``.

    Elsewhere (no ``/proc/cpuinfo``) the model comes from ``platform.processor()`` and the flags are empty.
    """
    fields: dict[str, str] = {}
    try:
        text = Path(cpuinfo_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # end of the first processor's block
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    model = (
        fields.get("model name")
        or fields.get("Model")
        or fields.get("CPU part")
        or platform.processor()
        or None
    )
    flags = fields.get("flags") or fields.get("Features") or ""
    return {"model": model, "flags": " ".join(sorted(set(flags.split())))}  # one line: manifests stay short


@functools.lru_cache(maxsize=1)
def _environment_cached() -> tuple[tuple[str, Any], ...]:
    env = {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "packages": {name: _version(name) for name in TRACKED_PACKAGES},
        "system": platform.system(),
        "machine": platform.machine(),
        "cpu": cpu_info(),
    }
    return tuple(env.items())


def environment() -> dict[str, Any]:
    """Python, MuJoCo/numpy/torch versions, OS, architecture, CPU model and flags of this machine."""
    return copy.deepcopy(dict(_environment_cached()))
