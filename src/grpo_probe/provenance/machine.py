"""What produced an artifact: the code (version and a hash of its sources) and the machine it ran on.

Why: a run's bytes hold for one build of each numeric library, one numerics setting and one class of CPU
(docs/reference.md, "Determinism"), so a manifest says which ones produced it: every installed package's
version, the sha256 of the dependency lock the environment was installed from (``requirements.lock``,
recorded by ``bin/bootstrap`` in the environment), the numerics setting in force
(:mod:`grpo_probe.numerics`), the C library, and the CPU's model and flags. An auditor whose rerun differs
can then tell a code change from another environment, and another environment from tampering. Nothing
here varies between two runs on the same machine and code: no timestamps, host names or paths, so a rerun
writes the same manifest bytes.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import os
import platform
import sys
from pathlib import Path
from typing import Any

import grpo_probe
from grpo_probe import numerics

__all__ = [
    "DISTRIBUTION",
    "LOCK_STAMP",
    "code_version",
    "cpu_info",
    "environment",
    "environment_summary",
    "installed_lock_sha256",
    "installed_packages",
    "libc",
    "sources_sha256",
]

DISTRIBUTION = "grpo-probe"
LOCK_STAMP = "grpo-probe-lock.sha256"
"""The file in the environment's prefix (``.venv/``) where ``bin/bootstrap`` records the sha256 of the lock
it installed from; absent in an environment installed another way."""


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


def installed_packages() -> dict[str, str]:
    """Every distribution installed in this interpreter's environment, by normalised name, sorted.

    Every one, not a chosen few: a result byte can move with any numeric library (scipy's OpenBLAS,
    pyarrow's kernels, pandas' sums), and a lab cannot know in advance which.
    """
    import importlib.metadata  # here: about 20 ms to import, which the command line's start need not pay

    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(name.lower().replace("_", "-").replace(".", "-"), dist.version)
    return dict(sorted(found.items()))


def installed_lock_sha256(prefix: str | os.PathLike[str] | None = None) -> str | None:
    """The sha256 of the lock ``bin/bootstrap`` installed this environment from, or None if none did."""
    stamp = Path(prefix if prefix is not None else sys.prefix) / LOCK_STAMP
    try:
        text = stamp.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else None


def libc() -> str | None:
    """The C library and its version, e.g. ``glibc 2.36`` (its libm computes MuJoCo's exp, sin and cos)."""
    name, version = platform.libc_ver()
    return f"{name} {version}" if name else None


@functools.lru_cache(maxsize=1)
def _environment_cached() -> tuple[tuple[str, Any], ...]:
    env = {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "packages": installed_packages(),
        "lock_sha256": installed_lock_sha256(),
        "system": platform.system(),
        "machine": platform.machine(),
        "libc": libc(),
        "cpu": cpu_info(),
    }
    return tuple(env.items())


def environment() -> dict[str, Any]:
    """Python, every package's version, the lock, OS, libc, architecture, CPU, and the numerics setting.

    The numerics setting is read from the process's environment at each call (not cached): it is what
    this job runs under, which :func:`grpo_probe.numerics.in_effect` reports.
    """
    env = copy.deepcopy(dict(_environment_cached()))
    env["numerics"] = numerics.in_effect(os.environ)
    return env


SUMMARY_KEYS = ("python", "machine", "libc", "lock_sha256", "numerics")
"""What decision.json records of the environment: the keys that decide its bytes, nothing that names one
machine (no CPU model or flags), so the same record is written on every machine of one setting and lock."""


def environment_summary(env: dict[str, Any] | None = None) -> dict[str, Any]:
    """The byte-deciding part of :func:`environment` (``env``, default this process's), for decision.json."""
    full = environment() if env is None else env
    return {key: copy.deepcopy(full.get(key)) for key in SUMMARY_KEYS}
