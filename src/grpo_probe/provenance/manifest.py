"""Manifests: what each rule wrote, what it read, and under which design, code and machine.

Why: Snakemake orders rules by file timestamps and records no content hashes. Every rule here writes,
beside its outputs, a manifest holding the sha256 and size of each output, the path and sha256 of each
upstream manifest it consumed, the registered design's hash, the code version and the environment. Since
downstream rules take upstream manifests as inputs, the manifests form a chain from decision.md back to
the prereg that anyone can re-hash (``grpo-probe verify``). Paths are stored relative to a root (the
workflow's working directory) in POSIX form, and nothing in a manifest depends on the time or the host
name, so a rerun on the same machine writes the same bytes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_probe.atomic_io import atomic_write_text, read_json
from grpo_probe.provenance.machine import code_version, environment
from grpo_probe.user_code import env_code_files, file_sha256, module_files, policy_files

if TYPE_CHECKING:
    from grpo_probe.prereg import Prereg

__all__ = [
    "MANIFEST_FORMAT",
    "ManifestError",
    "env_files",
    "file_sha256",
    "policy_sources",
    "read_manifest",
    "relative_to_root",
    "write_manifest",
]

MANIFEST_FORMAT = "grpo-probe-manifest/1"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ManifestError(ValueError):
    """A manifest cannot be written or read; the message names the file."""


def relative_to_root(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> str:
    """``path`` relative to ``root`` (default: the working directory) as a POSIX string.

    A path outside the root (a ``results:`` folder or a checkpoint elsewhere on the machine) is stored
    with ``..`` steps, so a results folder beside the workflow verifies wherever the two are moved
    together; a file on another mount, with no relative path, is stored absolute.
    """
    root_path = Path(root if root is not None else Path.cwd()).resolve()
    full = (Path(path) if Path(path).is_absolute() else Path.cwd() / path).resolve()
    try:
        return full.relative_to(root_path).as_posix()
    except ValueError:
        pass
    try:
        return Path(os.path.relpath(full, root_path)).as_posix()
    except ValueError:  # another drive: no relative path exists
        return full.as_posix()


def write_manifest(
    manifest_path: str | os.PathLike[str],
    outputs: Sequence[str | os.PathLike[str]],
    input_manifests: Sequence[str | os.PathLike[str]],
    prereg_sha256: str,
    rule: str,
    extra: Mapping[str, Any] | None = None,
    *,
    root: str | os.PathLike[str] | None = None,
    prereg_path: str | os.PathLike[str] | None = None,
    env: Mapping[str, Any] | None = None,
    sources: Sequence[str | os.PathLike[str]] = (),
) -> dict[str, Any]:
    """Hash ``outputs`` and ``input_manifests`` and write the manifest atomically; return what was written.

    ``root`` (default: the working directory) is what stored paths are relative to. ``prereg_path`` is
    given by the rule that checks the prereg: it records the design file itself, so ``verify`` can end the
    chain at the prereg and its lock. ``env`` records the environment the design runs in (id, version,
    and for a user's module the sha256 of its source files; see ``grpo_probe.envs.registry``).
    ``sources`` are the user's files the step ran or read outside the results tree (an environment's or
    adapter's package, a checkpoint folder; see :mod:`grpo_probe.user_code`): ``verify`` re-hashes them
    and names one that changed since, because the results no longer say what that file now does.
    """
    if not isinstance(prereg_sha256, str) or not _SHA256.match(prereg_sha256):
        raise ManifestError(
            f"{manifest_path}: prereg_sha256 must be 64 lower-case hex digits, got {prereg_sha256!r}"
        )
    manifest_rel = relative_to_root(manifest_path, root)
    root_path = Path(root) if root is not None else Path.cwd()

    def entries(paths: Sequence[str | os.PathLike[str]], kind: str, with_size: bool) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for path in paths:
            rel = relative_to_root(path, root)
            if rel == manifest_rel:
                raise ManifestError(f"{manifest_path}: a manifest cannot list itself as an {kind}")
            if rel in seen:
                raise ManifestError(f"{manifest_path}: {kind} {rel} is listed twice")
            seen.add(rel)
            full = root_path / rel
            if not full.is_file():
                raise ManifestError(f"{manifest_path}: {kind} {rel} does not exist")
            entry: dict[str, Any] = {"path": rel, "sha256": file_sha256(full)}
            if with_size:
                entry["size"] = full.stat().st_size
            out.append(entry)
        return out

    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "rule": rule,
        "prereg_sha256": prereg_sha256,
        "outputs": entries(outputs, "output", with_size=True),
        "inputs": entries(input_manifests, "input manifest", with_size=False),
        "sources": entries(list(dict.fromkeys(str(p) for p in sources)), "source", with_size=False),
        "code": code_version(),
        "environment": environment(),
        "extra": dict(extra or {}),
    }
    if prereg_path is not None:
        manifest["prereg_path"] = relative_to_root(prereg_path, root)
    if env is not None:
        manifest["env"] = dict(env)
    try:
        text = json.dumps(manifest, sort_keys=True, indent=2, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise ManifestError(f"{manifest_path}: extra is not plain JSON data: {exc}") from None
    atomic_write_text(manifest_path, text)
    return manifest


def write_design_manifest(
    prereg: Prereg,
    manifest_path: str | os.PathLike[str],
    rule: str,
    outputs: Sequence[str | os.PathLike[str]],
    input_manifests: Sequence[str | os.PathLike[str]],
    extra: Mapping[str, Any] | None = None,
    sources: Sequence[str | os.PathLike[str]] = (),
) -> dict[str, Any]:
    """:func:`write_manifest` for a workflow step of ``prereg``: its hash, its file and the environment it
    runs in (``grpo_probe.envs.registry.env_provenance``), the same record for every step of the probe
    and of phase 2. ``sources``: what the step read of a user's policies (:func:`policy_sources`); the
    environment's own package and the packages of the design's own samplers (``samplers:``) are added
    here, since every step of a design loads both."""
    from grpo_probe.envs.registry import env_provenance  # imports the simulator: only when writing

    return write_manifest(
        manifest_path, outputs, input_manifests, prereg.sha256, rule, extra=extra, prereg_path=prereg.path,
        env=env_provenance(prereg.env),
        sources=[*env_files(prereg.env), *module_files(prereg.sampler_modules), *sources],
    )  # fmt: skip


def env_files(env: Any) -> tuple[Path, ...]:
    """The code files of a design's environment (:class:`~grpo_probe.envs.registry.EnvConfig`): a user
    factory's package and the packages its params name (none for a built-in environment)."""
    return env_code_files(env.id, env.params if isinstance(env.params, Mapping) else None)


def policy_sources(policies: Sequence[Any]) -> list[Path]:
    """The user files that ``policies`` (:class:`~grpo_probe.rollout.PolicySource` recipes) read."""
    files: dict[Path, None] = {}
    for policy in policies:
        files.update(dict.fromkeys(policy_files(policy.factory, policy.checkpoint)))
    return list(files)


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a manifest, checking its format and required fields; errors name the file."""
    path = Path(path)
    manifest = read_json(path, "manifest", ManifestError)
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise ManifestError(f"{path}: not a {MANIFEST_FORMAT} manifest")
    for key in ("rule", "prereg_sha256", "outputs", "inputs"):
        if key not in manifest:
            raise ManifestError(f"{path}: manifest lacks {key!r}")
    return manifest
