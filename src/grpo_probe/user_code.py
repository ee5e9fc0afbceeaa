"""The files of a lab's own code and checkpoints that a workflow job reads, found without running them.

Why: a design may name a user's environment factory (``env.id: "labenv.scene:make"``), the lab's code
its params name (a scene function that reads a simulator the adapter cannot, ``env.params.scene:
"labenv.pusht:PushTScene"``; a wrapper; an expert; the module that registers a Gymnasium id,
``env.params.gym_id: "labenv.sims:LabPush-v0"``), modules that register sampling kinds of the lab's own
(``samplers: ["labpolicies.ddim"]``), and a run config may bind an arm to a user's adapter and
checkpoint. Snakemake plans reruns from declared inputs only, so unless these files are inputs of the
jobs that run them, an edited scene or adapter leaves the results silently stale.
``workflow/rules/common.smk`` declares what this module lists, and every manifest records their sha256
(``sources``), so ``grpo-probe verify`` can say which one changed since a result was made.

A factory's code is the whole top-level package it lives in (its ``.py`` files and MuJoCo scenes, the
``.xml`` files next to them), because a factory calls into its siblings. Locating a package uses
``importlib.util.find_spec`` on the top-level name only, which runs none of the user's code, so the
workflow can list the files while Snakemake parses the rules. This package's own modules are covered by
the code version every manifest records and are not listed, and so are packages installed into the
interpreter (site-packages), which their installed version identifies. A checkpoint is a file, or a folder (a
``save_pretrained`` directory: ``config.json`` beside ``model.safetensors``) whose every file is read.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sysconfig
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "OWN_PACKAGE",
    "checkpoint_files",
    "env_code_files",
    "factory_files",
    "file_sha256",
    "load_callable",
    "module_files",
    "policy_files",
    "tree_sha256",
]

OWN_PACKAGE = "grpo_probe"
_CODE_SUFFIXES = (".py", ".xml")
_CALLABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_.]*$")
_GYM_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:\S+$")
"""``module:Name-v0``: a Gymnasium id behind the module whose import registers it (``env.params.gym_id``)."""
_CHUNK = 1 << 20


def _display(path: Path) -> Path:
    """``path`` relative to the working directory when it lies under it, else absolute."""
    full = path.resolve()
    try:
        return full.relative_to(Path.cwd().resolve())
    except ValueError:
        return full


def _visible_files(folder: Path, suffixes: tuple[str, ...] | None) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        for name in filenames:
            if name.startswith("."):
                continue
            if suffixes is None or name.endswith(suffixes):
                found.append(Path(dirpath) / name)
    return found


def load_callable(path: str, where: str) -> Callable[..., Any]:
    """The callable a ``package.module:name`` string names (an environment factory, a scene function, a
    wrapper, an expert, a policy adapter), imported; an error names ``where`` (the field or the source)
    and what went wrong: the module's own import error, with the fix, or the missing callable. One
    function, so each place that runs a lab's code words these two failures alike."""
    module_name, _, attr = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ValueError(
            f"{where}: cannot import module {module_name!r} of {path!r} ({type(exc).__name__}: {exc}); "
            "install it into the environment or put it on PYTHONPATH"
        ) from exc
    for part in attr.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        raise ValueError(f"{where}: module {module_name!r} has no callable {attr!r}")
    return target


def factory_files(factory: str | None) -> tuple[Path, ...]:
    """The source files of the top-level package that ``factory`` (``"package.module:function"``) is in.

    Empty for this package's own factories, for ``None``, and for a name Python cannot find (the job that
    imports it then fails with its own message naming the field).
    """
    if not factory:
        return ()
    top = factory.partition(":")[0].split(".")[0]
    if top == OWN_PACKAGE or not top.isidentifier():
        return ()
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return ()
    if spec is None or _installed(spec):
        return ()
    files: list[Path] = []
    for location in spec.submodule_search_locations or ():
        files += _visible_files(Path(location), _CODE_SUFFIXES)
    if not files and spec.origin and Path(spec.origin).is_file():
        files = [Path(spec.origin)]
    return tuple(sorted({_display(p) for p in files}))


def _installed(spec: importlib.machinery.ModuleSpec) -> bool:
    """True for a distribution installed into the interpreter (its version is what identifies it)."""
    places = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    origin = spec.origin or next(iter(spec.submodule_search_locations or ()), None)
    return origin is not None and any(place in Path(origin).resolve().parents for place in places)


def _callables(value: Any) -> Iterator[str]:
    """Every ``"module:callable"`` string inside params (a scene function, wrappers, an expert, a factory
    of the user's), and the registering module of a ``gym_id`` named ``module:Name-v0``."""
    if isinstance(value, str) and _CALLABLE.match(value):
        yield value
    elif isinstance(value, Mapping):
        gym_id = value.get("gym_id")
        if isinstance(gym_id, str) and _GYM_ID.match(gym_id) and not _CALLABLE.match(gym_id):
            yield gym_id
        for item in value.values():
            yield from _callables(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _callables(item)


def env_code_files(env_id: str, params: Any = None) -> tuple[Path, ...]:
    """A design's environment code: the factory's package and each package a ``module:callable`` in its
    params names (a scene function, a wrapper, an expert, a Gymnasium id's registering module), for a
    user's environment; none for a built-in id."""
    if ":" not in env_id:
        return ()
    files = [*factory_files(env_id)]
    for name in _callables(params if isinstance(params, Mapping) else {}):
        files += factory_files(name)
    return tuple(dict.fromkeys(files))


def module_files(modules: Iterable[str]) -> tuple[Path, ...]:
    """The source files of each module's top-level package (a design's ``samplers:`` and the modules its
    kinds sample from): editing a lab's sampler changes what every cell of its kind draws, so every job
    of the design lists these files as inputs and records them, like an environment factory's."""
    files: list[Path] = []
    for module in modules:
        files += factory_files(module)
    return tuple(dict.fromkeys(files))


def checkpoint_files(checkpoint: str | os.PathLike[str] | None) -> tuple[Path, ...]:
    """Every file a checkpoint is: itself, or each file of a checkpoint folder (hidden files left out)."""
    if checkpoint is None:
        return ()
    path = Path(checkpoint)
    if path.is_dir():
        return tuple(sorted(_display(p) for p in _visible_files(path, None)))
    return (path,)


def policy_files(factory: str | None, checkpoint: str | os.PathLike[str] | None) -> tuple[Path, ...]:
    """What a policy built from ``factory`` and ``checkpoint`` reads beyond this package: the adapter's
    package, and the files of a checkpoint folder (a single checkpoint file is recorded by its own rule)."""
    folder = checkpoint_files(checkpoint) if checkpoint is not None and Path(checkpoint).is_dir() else ()
    return tuple(dict.fromkeys((*factory_files(factory), *folder)))


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks (what every manifest records of a file)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a checkpoint: of the file's bytes, or of a folder's sorted ``relative/path\\0sha256\\n``
    lines, so a pinned ``checkpoint_sha256`` holds a folder as it holds a file."""
    path = Path(path)
    if not path.is_dir():
        return file_sha256(path)
    lines = sorted(
        f"{p.relative_to(path).as_posix()}\0{file_sha256(p)}\n" for p in _visible_files(path, None)
    )
    return hashlib.sha256("".join(lines).encode()).hexdigest()
