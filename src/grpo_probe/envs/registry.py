"""Which environment a design names, its typed params, and how to build it: ``env: {id, params}``.

Why a registry with static specs: the prereg validates a design's environment (its params by the
environment's own rules, the guards its decision rule reads, its chunk geometry) while Snakemake parses
the rules, without importing MuJoCo or a user's code. Built-in ids (``boat_push``, ``pusher``) have
typed params and a spec computed from them; ``module:factory`` names a user's function, called as
``factory(**params)`` in every process that runs the environment, whose spec is read from the built
environment (:func:`env_spec`). A design without ``env:`` names the boat by its ``sim:`` section.

Manifests record the environment (:func:`env_provenance`): id and version; a user's module's files are
declared inputs of the jobs that run it and their sha256 sit in every manifest (``sources``).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.boat.spec import BOAT_ENV, BOAT_EXPERT, BOAT_ID, boat_spec
from grpo_probe.envs.protocol import Environment, EnvSpec, Expert
from grpo_probe.envs.pusher.spec import PUSHER_ENV, PUSHER_EXPERT, PUSHER_ID, PusherParams, pusher_spec
from grpo_probe.name_registry import Registry, did_you_mean
from grpo_probe.user_code import load_callable

__all__ = [
    "BUILTIN_IDS",
    "EnvConfig",
    "EnvFactoryError",
    "boat_env",
    "env_config",
    "env_provenance",
    "env_spec",
    "is_builtin",
    "make_env",
    "make_expert",
]

_FACTORY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


class EnvFactoryError(ValueError):
    """A design's environment cannot be built: the factory is not importable, or it refused the params."""


@dataclass(frozen=True)
class _Builtin:
    """A built-in environment: its params type and spec here; its env and expert named by import path
    (loaded on first use, so reading a design imports neither MuJoCo nor Gymnasium)."""

    params_from_dict: Callable[[Mapping[str, Any], str], Any]
    spec: Callable[[Any], EnvSpec]
    env: str
    expert: str
    to_dict: Callable[[Any], dict[str, Any]]


_BUILTINS: Registry[_Builtin] = Registry("built-in environment")
_BUILTINS.register(
    BOAT_ID, _Builtin(SimParams.from_dict, boat_spec, BOAT_ENV, BOAT_EXPERT, SimParams.to_dict)
)
_BUILTINS.register(
    PUSHER_ID, _Builtin(PusherParams.from_dict, pusher_spec, PUSHER_ENV, PUSHER_EXPERT, PusherParams.to_dict)
)


def _load(path: str) -> Callable[..., Any]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


BUILTIN_IDS: tuple[str, ...] = _BUILTINS.names()


@dataclass(frozen=True)
class EnvConfig:
    """A design's environment: its id and params (typed for a built-in, a mapping for a user's factory).

    ``where`` names the design and field for error messages; it is not part of the configuration.
    """

    id: str
    params: Any
    where: str = field(default="env", compare=False)

    def params_dict(self) -> dict[str, Any]:
        """The params as plain data (the form oracle reports and manifests record)."""
        if self.id in _BUILTINS:
            return _BUILTINS.get(self.id).to_dict(self.params)
        return {k: _plain(v) for k, v in sorted(self.params.items())}

    def __repr__(self) -> str:  # the worker-side cache key: equal configs, equal keys
        return f"EnvConfig(id={self.id!r}, params={self.params_dict()!r})"


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def is_builtin(env_id: str) -> bool:
    """True for ``boat_push`` and ``pusher``; False for a user's ``module:factory``."""
    return env_id in _BUILTINS


def boat_env(params: SimParams | None = None) -> EnvConfig:
    """The boat scene with ``params`` (default: the registered defaults)."""
    return EnvConfig(BOAT_ID, params if params is not None else SimParams())


def env_config(env_id: str, params: Mapping[str, Any], where: str = "env") -> EnvConfig:
    """A validated :class:`EnvConfig`; ``ValueError`` names ``where`` (file: field) and the problem.

    A built-in's params are checked by its own params type; a user's factory is only checked for its
    ``module:function`` form here (importing it is left to the steps that build it).
    """
    if env_id in _BUILTINS:
        try:
            typed = _BUILTINS.get(env_id).params_from_dict(params, f"{where}.params")
        except (ValueError, TypeError) as exc:
            raise ValueError(_prefixed(str(exc), where)) from None
        return EnvConfig(env_id, typed, where)
    if not _FACTORY.match(env_id):
        raise ValueError(
            f"{where}.id: {env_id!r} is neither a built-in environment ({', '.join(BUILTIN_IDS)}) nor "
            "a 'module:factory' of your own" + did_you_mean(env_id, _BUILTINS)
        )
    return EnvConfig(env_id, dict(params), where)


def _prefixed(message: str, where: str) -> str:
    """Messages from params types say ``env.params.x`` or ``sim.x``; give them the design's location."""
    if message.startswith(where):
        return message
    head = where.split(": ")[0] if ": " in where else None
    return f"{head}: {message}" if head else message


def _factory(config: EnvConfig) -> Callable[..., Any]:
    try:
        return load_callable(config.id, f"{config.where}.id")
    except ValueError as exc:
        raise EnvFactoryError(str(exc)) from exc


def make_env(config: EnvConfig) -> Environment:
    """Build the environment (imports MuJoCo, Gymnasium or the user's module as it needs)."""
    if config.id in _BUILTINS:
        return _load(_BUILTINS.get(config.id).env)(config.params)
    factory = _factory(config)
    try:
        env = factory(**config.params)
    except TypeError as exc:
        raise EnvFactoryError(f"{config.where}.params: factory {config.id!r} refused them: {exc}") from exc
    except EnvFactoryError:
        raise
    except ValueError as exc:  # the factory's own check of its params: name the design it came from
        raise EnvFactoryError(_prefixed(str(exc), config.where)) from exc
    missing = [
        name
        for name in ("spec", "reset", "execute", "done", "record", "replan_index")
        if not hasattr(env, name)
    ]
    if missing:
        raise EnvFactoryError(
            f"{config.where}.id: {config.id!r} returned {type(env).__name__}, which lacks the environment "
            f"protocol's {', '.join(missing)} (grpo_probe.envs.protocol.Environment)"
        )
    if not isinstance(env.spec, EnvSpec):
        raise EnvFactoryError(
            f"{config.where}.id: {config.id!r} returned an env whose spec is not an EnvSpec"
        )
    return env


_MODULE_SPECS: dict[str, EnvSpec] = {}
"""Specs of user environments built in this process, by :class:`EnvConfig` repr (built once each)."""


def env_spec(config: EnvConfig) -> EnvSpec:
    """The environment's spec: computed for a built-in, read from a built env for a user's factory."""
    if config.id in _BUILTINS:
        return _BUILTINS.get(config.id).spec(config.params)
    key = repr(config)
    if key not in _MODULE_SPECS:
        _MODULE_SPECS[key] = make_env(config).spec
    return _MODULE_SPECS[key]


def make_expert(config: EnvConfig, noise: float) -> Expert:
    """The environment's scripted expert; a user's environment may offer one as ``env.expert(noise)``."""
    if config.id in _BUILTINS:
        return _load(_BUILTINS.get(config.id).expert)(config.params, noise=noise)
    env = make_env(config)
    offer = getattr(env, "expert", None)
    if not callable(offer):
        raise EnvFactoryError(
            f"{config.where}.id: {config.id!r} offers no scripted expert (an env method expert(noise)), so "
            "the workflow cannot record demos and train reference arms on it; bind every arm to a "
            "checkpoint of your own in config (arms.<arm>: {source: checkpoint, path: ..., adapter: ...})"
        )
    return offer(noise)


def env_provenance(config: EnvConfig) -> dict[str, Any]:
    """What a manifest records about the environment: its id and version. A user's module's files are
    recorded with their sha256 among the manifest's ``sources`` (:mod:`grpo_probe.user_code`)."""
    return {"id": config.id, "version": env_spec(config).version}
