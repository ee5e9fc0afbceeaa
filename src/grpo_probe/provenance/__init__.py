"""Provenance: per-rule manifests of content hashes, and verification of the chain they form.

Why lazy (PEP 562): importing :mod:`grpo_probe.provenance.verify_command` runs this file first, and
the chain reads the prereg (which loads the environment registry and pyarrow), which building the
``grpo-probe`` parser never needs. A name is imported from its module the first time it is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpo_probe.lazy_exports import lazy_exports

# Eager: cheap, and read by every manifest (the code and the machine that produced an artifact).
from grpo_probe.provenance.machine import code_version, environment, sources_sha256

if TYPE_CHECKING:  # the exports as type checkers see them; at run time each loads on first use
    from grpo_probe.provenance.chain import BrokenLinkError, ChainReport, verify_chain  # noqa: F401
    from grpo_probe.provenance.environments import NUMERICS_KEYS, same_numerics_environment  # noqa: F401
    from grpo_probe.provenance.manifest import (  # noqa: F401
        MANIFEST_FORMAT,
        ManifestError,
        env_files,
        file_sha256,
        policy_sources,
        read_manifest,
        write_design_manifest,
        write_manifest,
    )

__getattr__, _lazy = lazy_exports(
    __name__,
    {
        ".chain": ("BrokenLinkError", "ChainReport", "verify_chain"),
        ".environments": ("NUMERICS_KEYS", "same_numerics_environment"),
        ".manifest": (
            "MANIFEST_FORMAT",
            "ManifestError",
            "env_files",
            "file_sha256",
            "policy_sources",
            "read_manifest",
            "write_design_manifest",
            "write_manifest",
        ),
    },
    globals(),
)
__all__ = [*_lazy, "code_version", "environment", "sources_sha256"]
