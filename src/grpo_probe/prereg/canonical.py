"""Strict YAML reading and the canonical form a registered design is hashed in.

Why: the lock must change exactly when the registered content changes, not when comments, key order,
quoting or indentation do. So a prereg is hashed as canonical JSON of its parsed YAML (sorted keys, no
whitespace, UTF-8). The reader is stricter than ``yaml.safe_load`` in two ways that matter for a design
that must not drift: a duplicated key is an error (PyYAML silently keeps the last one), and dates stay
strings (so ``2026-08-12`` hashes the same on every platform and survives the trip to JSON).

Every job, every Snakemake start and every check reads the design and its schemas, so the reader uses
libyaml's parser where PyYAML has it (a tenth of the pure-Python parser's time); resolving and
constructing are the same Python classes either way, so the parsed values, and the hashes, are too.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import yaml

__all__ = ["SafeLoader", "canonical_json", "canonical_sha256", "read_yaml", "strict_loader"]

SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # type: ignore[assignment]
"""PyYAML's safe loader on libyaml's parser when PyYAML was built with it (its wheels are)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in mapping:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


def strict_loader(base: type[yaml.SafeLoader]) -> type[yaml.SafeLoader]:
    """``base`` (a safe loader on either parser) without implicit timestamps and with duplicate keys
    refused: the reader's loader, built on :data:`SafeLoader`; the tests and benchmarks build it on the
    pure-Python parser to compare the two."""

    class Strict(base):  # type: ignore[misc,valid-type]
        pass

    Strict.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    return Strict


_StrictLoader = strict_loader(SafeLoader)


def read_yaml(path: str | os.PathLike[str]) -> Any:
    """Parse a YAML file strictly; errors name the file (and line, where YAML knows it)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from None


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no insignificant whitespace, UTF-8, no NaN or infinity."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def canonical_sha256(value: Any) -> str:
    """Hex sha256 of :func:`canonical_json` of ``value``: the hash a registered design is known by."""
    return hashlib.sha256(canonical_json(value)).hexdigest()
