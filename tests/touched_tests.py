"""Which test files an edit of the package touches, read off the imports of ``src`` and ``tests`` (with
:mod:`ast`, running nothing).

Why by imports: docs/extending.md's worked examples each edit a module or two that hold a registry, and
a test the page did not name once broke when a reader applied one (the page renders every registered
read, and the page's test imports the page, not the registry). The tests an edit can change are the
ones that use what it edits: a test that imports an edited module, or a module of the package that
imports one (the registry's readers: the schema, the page, the head), directly or through a helper
module of the tests (``tests/analysis/rollout_factory.py``). Importers further up are left out, as
every test reaches every registry through some chain, and their tests exercise the readers, not the
registry.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

__all__ = ["direct_tests", "edited_modules", "touched_tests"]


def _module_name(path: Path, root: Path) -> str:
    """``src/grpo_probe/a/b.py`` -> ``grpo_probe.a.b`` (a package is its ``__init__``); a file under
    ``tests`` by its path below it (``analysis.rollout_factory``), the names it is imported by."""
    relative = path.relative_to(root / "src" if path.is_relative_to(root / "src") else root / "tests")
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path) -> dict[str, Path]:
    """Every module of the package and every helper of the tests (not a test file, not a conftest)."""
    found = {_module_name(p, root): p for p in sorted((root / "src").rglob("*.py"))}
    for path in sorted((root / "tests").rglob("*.py")):
        if not path.name.startswith("test_") and path.name != "conftest.py":
            found.setdefault(_module_name(path, root), path)
    return found


@functools.lru_cache(maxsize=4096)
def _named(path: Path, package: str) -> frozenset[str]:
    """Every dotted name the file's imports name (``a.b`` for ``import a.b``; ``a`` and ``a.b`` for ``from
    a import b``; relative ones resolved against ``package``); read once per file."""
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            named.add(base)
            named.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(named)


def _imports(path: Path, root: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that the file imports: ``import a.b``, ``from a import b`` (a module
    ``a.b`` or a name of ``a``) and relative imports, each the longest known module it names."""
    package = _module_name(path, root)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    known = set()
    for name in _named(path, package):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            known.add(name)
    return known


def edited_modules(root: Path, paths: Iterable[str]) -> set[str]:
    """The package modules among ``paths`` (repository-relative), by module name."""
    return {_module_name(root / p, root) for p in paths if p.startswith("src/") and p.endswith(".py")}


def _test_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "tests").rglob("test_*.py"))


def _reach(root: Path, modules: dict[str, Path], start: set[str]) -> set[str]:
    """``start`` with the test helpers it imports, and theirs: what a test file uses, up to the package."""
    graph_reach, stack = set(), list(start)
    while stack:
        name = stack.pop()
        if name in graph_reach:
            continue
        graph_reach.add(name)
        if modules[name].is_relative_to(root / "tests"):
            stack.extend(_imports(modules[name], root, modules))
    return graph_reach


def _tests_using(root: Path, targets: set[str]) -> tuple[str, ...]:
    modules = _modules(root)
    hit = []
    for path in _test_files(root):
        if _reach(root, modules, _imports(path, root, modules)) & targets:
            hit.append(path.relative_to(root).as_posix())
    return tuple(hit)


def direct_tests(root: Path, paths: Iterable[str]) -> tuple[str, ...]:
    """The test files that import a package module among ``paths`` themselves (or through a helper of the
    tests): the tests of the edited registry."""
    return _tests_using(root, edited_modules(root, paths))


def touched_tests(root: Path, paths: Iterable[str]) -> tuple[str, ...]:
    """The test files an edit of ``paths`` touches: those that import an edited module, or a module of the
    package that imports one (through a helper of the tests or not); see the module docstring."""
    modules = _modules(root)
    edited = edited_modules(root, paths)
    readers = {
        name
        for name, path in modules.items()
        if path.is_relative_to(root / "src") and _imports(path, root, modules) & edited
    }
    return _tests_using(root, edited | readers)
