"""Provenance: per-rule manifests of content hashes, and verification of the chain they form."""

from grpo_probe.provenance.chain import BrokenLinkError, ChainReport, verify_chain
from grpo_probe.provenance.environment import code_version, environment, sources_sha256
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

__all__ = [
    "MANIFEST_FORMAT",
    "BrokenLinkError",
    "ChainReport",
    "ManifestError",
    "code_version",
    "env_files",
    "environment",
    "file_sha256",
    "policy_sources",
    "read_manifest",
    "sources_sha256",
    "verify_chain",
    "write_design_manifest",
    "write_manifest",
]
