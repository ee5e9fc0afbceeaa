"""A package's names imported from their modules on first use (PEP 562), written once for every package.

Why: a ``grpo-probe`` command imports its area's command module (``grpo_probe.cli.COMMANDS``), and so
that area's package, before it parses; a package that imported its modules up front would make
``grpo-probe <command> --help`` load numpy, pyarrow or torch. A package lists each module with the names
it exports and sets ``__getattr__, __all__ = lazy_exports(__name__, modules, globals())``: the one list
gives both, so the exported names cannot drift from the modules they load from.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, modules: Mapping[str, Sequence[str]], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], list[str]]:
    """The module ``__getattr__`` of ``package`` and its exported names, sorted (its ``__all__``).

    ``modules`` maps each module, absolute or relative to ``package`` (``".rerun"``), to the names it
    exports. A name is imported from its module on first use and kept in ``namespace`` (the package's
    globals), so later reads skip the function. A name listed under two modules is a ``ValueError``.
    """
    where: dict[str, str] = {}
    for module, names in modules.items():
        for name in names:
            if name in where:
                raise ValueError(f"{package}: {name!r} is listed under {where[name]!r} and {module!r}")
            where[name] = module

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    return __getattr__, sorted(where)
