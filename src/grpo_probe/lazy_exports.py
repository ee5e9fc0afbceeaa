"""A package's names imported from their modules on first use (PEP 562), written once for every package.

Why: a ``grpo-probe`` command imports its area's command module (``grpo_probe.cli.COMMANDS``), and so
that area's package, before it parses; a package that imported its modules up front would make
``grpo-probe <command> --help`` load numpy, pyarrow or torch. A package lists each exported name
with the module it comes from and sets ``__getattr__ = lazy_exports(__name__, where, globals())``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, where: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name of ``where`` is imported from its module on first
    use and kept in ``namespace`` (the package's globals), so later reads skip the function."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
