"""Serve a Gymnasium environment (and its scene function) to the probe from the simulator's own environment.

Why: a simulator often pins what the probe cannot hold (MetaWorld 3.1.1 pins ``mujoco==3.3.0``; the probe
pins 4.0.0 for its registered bytes). The simulator then runs here, in its own Python environment, and
the probe's Gymnasium adapter measures it over a WebSocket (:mod:`grpo_probe.envs.served`): every
connection builds its own environment with ``factory(gym_id, **kwargs)``, resets it with Gymnasium's
``reset(seed=)`` and steps it one action per tick, sending back exactly what the environment returned.

The scene function (``--scene module:callable``, the contract of docs/your-simulator.md, run here beside
the simulator) is called as ``scene(env)`` on each built environment and returns an object with

- ``positions()``: the object's and the goal's x, y in metres (attributes or keys ``object_xy``,
  ``goal_xy``, optionally ``effector_xy``), read after every reset and every tick;
- optionally ``perturb(rng, scale)`` (the state shift of a replay, drawn from ``rng`` alone; returns the
  unwrapped observation), ``engaged(info)``, ``traces_effector``, ``state_perturbation``, ``engagement``
  (what ``engaged`` means, in decision.md's words);
- optionally ``expert_chunk(obs, key, noise, chunk_length)``: a scripted expert's chunk (float32
  [chunk_length, action_dims] in [-1, 1]) from the observation alone, its noise keyed by ``key``; the
  probe records its demonstrations and behaviour-clones its reference arms on them.

Cameras (:mod:`grpo_probe.serve.env_cameras`): the scene's own cameras (its ``cameras``, drawn by its
``render``), then the built environment's named MuJoCo cameras and its ``default`` view are listed in the
``make`` reply, and drawn here, at the size asked, after a reset, a chunk or a state shift whose request
names them (``render``), or on a ``render`` request of their own; the frames travel as uint8 arrays, the
bytes the probe's adapter draws in process.

The hello names the factory and the scene and carries every installed distribution's version and a
sha256 of them and of the factory's and scene's source: the probe records it in every manifest, and a
client that connected to one simulator refuses another at its next connection.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import platform
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from grpo_probe.render_setup import select_headless_gl
from grpo_probe.serve import env_cameras, env_wire, wire
from grpo_probe.serve.link import LinkServer, serve_until_interrupted
from grpo_probe.serve.server import parse_address

__all__ = ["EnvServer", "gymnasium_make", "load_callable", "serve_env", "simulator_fingerprint"]


select_headless_gl()  # before any factory imports MuJoCo, which reads MUJOCO_GL once


def load_callable(path: str, what: str) -> Callable[..., Any]:
    """The callable ``module:name`` names; a ``ValueError`` saying which part is missing."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{what} must look like 'package.module:callable', got {path!r}")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        raise ValueError(f"{what}: module {module_name!r} has no callable {attr!r}")
    return target


def gymnasium_make(gym_id: str, **kwargs: Any) -> Any:
    """``gymnasium.make(gym_id, **kwargs)``: the factory for a registered Gymnasium id (``module:Name-v0``
    imports the module that registers it first, as the probe's adapter does)."""
    import gymnasium

    module, sep, name = gym_id.partition(":")
    if sep:
        importlib.import_module(module)
        gym_id = name
    return gymnasium.make(gym_id, **kwargs)


def _source_bytes(path: str | None) -> bytes:
    if path is None:
        return b""
    module = sys.modules.get(path.partition(":")[0])
    file = getattr(module, "__file__", None)
    return Path(file).read_bytes() if file else b""


def simulator_fingerprint(factory: str, scene: str | None) -> dict[str, Any]:
    """What the hello says about the simulator: the factory and scene names, the Python version, every
    installed distribution's version and a sha256 over all of it and the two modules' source bytes."""
    packages: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            packages[str(name).lower().replace("_", "-")] = str(dist.version)
    packages = dict(sorted(packages.items()))
    python = platform.python_version()
    digest = hashlib.sha256()
    digest.update(json.dumps([env_wire.PROTOCOL, factory, scene, python, packages]).encode())
    digest.update(_source_bytes(factory))
    digest.update(_source_bytes(scene))
    return {
        "protocol": env_wire.PROTOCOL,
        "factory": factory,
        "scene": scene,
        "python": python,
        "packages": packages,
        "sha256": digest.hexdigest(),
    }


def _xy(value: Any, name: str) -> list[float] | None:
    if value is None:
        return None
    numbers = [float(v) for v in np.asarray(value, dtype=np.float64).ravel()]
    if len(numbers) != 2:
        raise ValueError(f"the scene's positions().{name} must be 2 numbers (x, y), got {value!r}")
    return numbers


def _positions(scene: Any) -> dict[str, Any] | None:
    """The scene's positions as the wire carries them (None without a scene)."""
    if scene is None:
        return None
    found = scene.positions()
    get = found.get if isinstance(found, Mapping) else lambda name: getattr(found, name, None)
    return {name: _xy(get(name), name) for name in env_wire.POSITION_FIELDS}


def _wrapped_observation(env: Any, obs: Any) -> Any:
    """An unwrapped observation through the environment's observation wrappers, inside out (what the
    probe's adapter does in process with a scene's shifted state)."""
    import gymnasium  # the served environment is a Gymnasium one, so gymnasium is installed beside it

    chain = [env]
    while hasattr(chain[-1], "env") and chain[-1] is not chain[-1].unwrapped:
        chain.append(chain[-1].env)
    for wrapper in reversed(chain[:-1]):
        if isinstance(wrapper, gymnasium.ObservationWrapper):
            obs = wrapper.observation(obs)
    return obs


class _Session:
    """One connection's environment and scene."""

    def __init__(self, factory: Callable[..., Any], scene: Callable[[Any], Any] | None) -> None:
        self._factory = factory
        self._scene_factory = scene
        self.env: Any = None
        self.scene: Any = None
        self.cameras: env_cameras.Cameras | None = None

    def make(self, gym_id: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        self.close()
        self.env = self._factory(gym_id, **kwargs)
        self.scene = None if self._scene_factory is None else self._scene_factory(self.env)
        self.cameras = env_cameras.Cameras(self.env, self.scene)
        scene = self.scene
        unwrapped = getattr(self.env, "unwrapped", self.env)
        kind = type(unwrapped)
        dt = getattr(unwrapped, "dt", None)
        text = getattr(scene, "state_perturbation", None)
        said = getattr(scene, "engagement", None)
        return {
            "action_space": env_wire.space_message(self.env.action_space),
            "observation_space": env_wire.space_message(self.env.observation_space),
            "dt": None if dt is None else float(dt),
            "env_class": f"{kind.__module__}:{kind.__qualname__}",
            "scene": scene is not None,
            "perturb": callable(getattr(scene, "perturb", None)),
            "engaged": callable(getattr(scene, "engaged", None)),
            "expert": callable(getattr(scene, "expert_chunk", None)),
            "traces_effector": bool(getattr(scene, "traces_effector", False)),
            "state_perturbation": text if isinstance(text, str) and text else None,
            "engagement": said if isinstance(said, str) and said else None,
            "cameras": list(self.cameras.names),
        }

    def _need(self) -> Any:
        if self.env is None:
            raise ValueError("no environment yet: send make first")
        return self.env

    def wanted(self, render: Any) -> list[env_cameras.CameraRequest]:
        """The frames a request asks for (``[[camera, height, width], ...]``), checked before the
        environment moves: a request naming a camera the environment lacks is refused, the state unchanged."""
        self._need()
        return env_cameras.read_requests(render, self.cameras.names if self.cameras else ())

    def frames(self, wanted: list[env_cameras.CameraRequest]) -> list[np.ndarray]:
        """The ``wanted`` frames drawn at the state now (uint8 [height, width, 3] each)."""
        return self.cameras.render(wanted) if wanted and self.cameras is not None else []

    def reset(self, seed: int, render: Any = None) -> dict[str, Any]:
        wanted = self.wanted(render)
        env = self._need()
        obs, info = env.reset(seed=int(seed))
        return {
            "obs": obs,
            "info": env_wire.plain_info(info),
            "positions": _positions(self.scene),
            "frames": self.frames(wanted),
        }

    def step(self, actions: np.ndarray, render: Any = None) -> dict[str, Any]:
        wanted = self.wanted(render)
        env = self._need()
        engaged = callable(getattr(self.scene, "engaged", None))
        ticks = []
        for action in actions:
            obs, reward, terminated, truncated, info = env.step(action)
            ticks.append(
                {
                    "obs": obs,
                    "reward": float(reward),
                    "terminated": bool(terminated),
                    "truncated": bool(truncated),
                    "info": env_wire.plain_info(info),
                    "positions": _positions(self.scene),
                    "engaged": bool(self.scene.engaged(info)) if engaged else None,
                }
            )
            if terminated or truncated:
                break
        return {"ticks": ticks, "frames": self.frames(wanted)}

    def perturb(self, state: Mapping[str, Any], scale: float, render: Any = None) -> dict[str, Any]:
        env = self._need()
        if not callable(getattr(self.scene, "perturb", None)):
            raise ValueError("the scene offers no perturb(rng, scale)")
        wanted = self.wanted(render)
        rng = env_wire.rng_from_state(state)
        obs = _wrapped_observation(env, self.scene.perturb(rng, float(scale)))
        return {
            "obs": obs,
            "positions": _positions(self.scene),
            "rng": env_wire.rng_state(rng),
            "frames": self.frames(wanted),
        }

    def expert(self, obs: np.ndarray, key: list[int], noise: float, chunk_length: int) -> dict[str, Any]:
        self._need()
        if not callable(getattr(self.scene, "expert_chunk", None)):
            raise ValueError("the scene offers no expert_chunk(obs, key, noise, chunk_length)")
        chunk = np.asarray(self.scene.expert_chunk(obs, tuple(key), float(noise), int(chunk_length)))
        return {"chunk": chunk.astype(np.float32)}

    def close(self) -> None:
        if self.cameras is not None:
            self.cameras.close()
            self.cameras = None
        if self.env is not None:
            self.env.close()
            self.env = None


class EnvServer(LinkServer):
    """Serve environments built by ``factory`` (``module:callable``, called as ``factory(gym_id,
    **kwargs)``) with the scene ``scene`` names, at ``host:port`` (port 0: a free one)."""

    def __init__(
        self, factory: str, scene: str | None = None, host: str = "127.0.0.1", port: int = 8766
    ) -> None:
        self._factory = load_callable(factory, "the environment factory")
        self._scene = None if scene is None else load_callable(scene, "the scene function")
        self.fingerprint = simulator_fingerprint(factory, scene)
        super().__init__(wire.packb(self.fingerprint), host, port)

    def _open_session(self) -> _Session:
        """One connection, one environment (built by its ``make`` request, closed when it leaves)."""
        return _Session(self._factory, self._scene)

    _failed = "environment request failed"

    def _reply(self, session: _Session, request: Any) -> Any:
        """The answer to one request of the environment protocol (:mod:`grpo_probe.serve.env_wire`)."""
        if not isinstance(request, Mapping):
            raise wire.ProtocolError("a request must be a map")
        kind = request.get("type")
        if kind == "make":
            return session.make(str(request["gym_id"]), dict(request.get("kwargs") or {}))
        if kind == "reset":
            return session.reset(int(request["seed"]), request.get("render"))
        if kind == "step":
            return session.step(np.asarray(request["actions"]), request.get("render"))
        if kind == "perturb":
            return session.perturb(request["rng"], float(request["scale"]), request.get("render"))
        if kind == "render":
            return {"frames": session.frames(session.wanted(request.get("cameras")))}
        if kind == "expert":
            return session.expert(
                request["obs"],
                list(request["key"]),
                float(request["noise"]),
                int(request["chunk_length"]),
            )
        known = "make, reset, step, perturb, expert, render, stats"
        raise wire.ProtocolError(f"unknown request type {kind!r} (known: {known})")


def serve_env(
    factory: str,
    address: str = "ws://127.0.0.1:8766",
    *,
    scene: str | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``factory``'s environments at ``address`` until interrupted; ``ready`` gets the address once
    the server listens (the default prints it, flushed, for a script that reads where it is)."""
    host, port = parse_address(address)
    server = EnvServer(factory, scene, host, port)
    serve_until_interrupted(server, ready or _print_ready)


def _print_ready(address: str) -> None:
    print(f"serving environment at {address}", flush=True)
