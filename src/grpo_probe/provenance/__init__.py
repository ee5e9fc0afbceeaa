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

if TYPE_CHECKING:
    from grpo_probe.provenance.chain import BrokenLinkError, ChainReport, verify_chain
    from grpo_probe.provenance.environments import NUMERICS_KEYS, same_numerics_environment
    from grpo_probe.provenance.manifest import (
        MANIFEST_FORMAT,
        ManifestError,
        env_files,
        file_sha256,
        policy_sources,
        read_manifest,
        write_design_manifest,
        write_manifest,
    )

_WHERE: dict[str, str] = {
    "BrokenLinkError": "grpo_probe.provenance.chain",
    "ChainReport": "grpo_probe.provenance.chain",
    "verify_chain": "grpo_probe.provenance.chain",
    "NUMERICS_KEYS": "grpo_probe.provenance.environments",
    "same_numerics_environment": "grpo_probe.provenance.environments",
    "MANIFEST_FORMAT": "grpo_probe.provenance.manifest",
    "ManifestError": "grpo_probe.provenance.manifest",
    "env_files": "grpo_probe.provenance.manifest",
    "file_sha256": "grpo_probe.provenance.manifest",
    "policy_sources": "grpo_probe.provenance.manifest",
    "read_manifest": "grpo_probe.provenance.manifest",
    "write_design_manifest": "grpo_probe.provenance.manifest",
    "write_manifest": "grpo_probe.provenance.manifest",
}
"""Each exported name and the module it is imported from on first use."""


__getattr__ = lazy_exports(__name__, _WHERE, globals())


__all__ = [
    "MANIFEST_FORMAT",
    "NUMERICS_KEYS",
    "BrokenLinkError",
    "ChainReport",
    "ManifestError",
    "code_version",
    "env_files",
    "environment",
    "file_sha256",
    "policy_sources",
    "read_manifest",
    "same_numerics_environment",
    "sources_sha256",
    "verify_chain",
    "write_design_manifest",
    "write_manifest",
]
