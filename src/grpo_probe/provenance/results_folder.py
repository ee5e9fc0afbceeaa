"""A design's results folder as the lock sees it: where results go, and which design versions have some.

Why here: ``grpo-probe prereg lock`` refuses an amendment that says ``after_results: false`` when results
of an earlier version exist, and ``grpo-probe design new`` locks what it writes the same way; both read
the folder's manifests, which provenance writes.
"""

from __future__ import annotations

import os
from pathlib import Path

from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.provenance.manifest import read_manifest

__all__ = ["results_hashes", "results_root"]

CONFIG = Path("config/config.yaml")
"""The run settings whose ``results:`` names the results folder (relative to the working directory)."""


def results_root(given: str | os.PathLike[str] | None) -> Path:
    """``given``, else the ``results:`` setting of config/config.yaml, else ``results``."""
    if given is not None:
        return Path(given)
    return Path(read_yaml(CONFIG).get("results", "results") if CONFIG.is_file() else "results")


def results_hashes(results: str | os.PathLike[str], name: str) -> dict[str, list[str]]:
    """prereg sha256 -> the manifests under ``<results>/<name>/`` that carry it (what results exist)."""
    found: dict[str, list[str]] = {}
    for path in sorted((Path(results) / name).rglob("*.manifest.json")):
        found.setdefault(read_manifest(path)["prereg_sha256"], []).append(str(path))
    return found
