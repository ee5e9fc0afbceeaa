"""A simulator served from its own environment: the probe's side of ``env: {source: server, address}``.

Why: a simulator may pin what the probe's environment cannot hold (MetaWorld 3.1.1 pins
``mujoco==3.3.0``; the probe pins 4.0.0 for its registered bytes). It then runs in its own Python
environment behind ``python -m grpo_probe.serve env FACTORY --scene SCENE --port N``
(:mod:`grpo_probe.serve.env_server`), and here the probe's own Gymnasium adapter measures it exactly as
it measures an environment in process: :class:`ServedGymEnv` stands where ``gymnasium.make`` would put the
environment (its spaces, ``reset(seed=)``, ``step``), and the server's scene function stands where the
adapter would call one in process (:class:`ServedScene`: positions, the state shift, engagement). Arrays
and floats cross the wire bit for bit, so a served environment's rows are the bytes the same environment
gives in process (tests/envs/test_served_env.py holds Pusher-v5 to that).

Each chunk's ticks go in one request (the actions are computed here exactly as the adapter computes
them, then the adapter steps through the replies), so a replan costs one round trip, not one per tick.

Cameras: the server lists the environment's cameras (its named MuJoCo cameras, then ``default``) and
draws them in its own process (:mod:`grpo_probe.serve.env_cameras`) as the adapter draws them in
process; ``spec.cameras`` lists them and ``render(camera, height, width)`` returns the server's uint8
frame. The first frame of a camera at a size is a ``render`` request of its own; from then on every
reset, chunk and state shift asks for the frames drawn so far, so they come back with its reply and a
camera-fed replan costs no round trip of its own.

The server's hello names the simulator: every installed distribution's version and a sha256 over them
and the factory's and scene's source. The environment's version (what every manifest records) carries the
key packages and that sha256. Every connection is held to the design's pin (``env.sha256``), the results
folder's record of the first hello (``prereg/served_env.json``) and this process's first hello, so a
restart with another simulator is refused at connect (:mod:`grpo_probe.envs.served_record`). A server
that refuses the connection, dies or does not answer within ``timeout_s`` is a :class:`ServedEnvError`
naming its address; the rollout job fails without writing a row, and its rerun recomputes the job's rows
from their seeds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from grpo_probe.envs.gym_adapter import GymnasiumAdapter, GymnasiumParams
from grpo_probe.envs.gym_setup import import_gymnasium
from grpo_probe.envs.protocol import Expert, check_chunk, normalized_to_bounds
from grpo_probe.envs.scene import ScenePositions
from grpo_probe.envs.served_record import key_packages, refusal
from grpo_probe.serve import env_wire, wire
from grpo_probe.serve.link import ClientLink

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "SERVED_FACTORY",
    "SERVED_SCENE",
    "ServedEnvError",
    "ServedGymEnv",
    "ServedGymnasiumAdapter",
    "ServedScene",
    "served_env",
    "served_env_config",
    "served_scene",
]

SERVED_FACTORY = "grpo_probe.envs.served:served_env"
"""The factory a design's ``env: {source: server, ...}`` section is read as (``env.id`` of its config)."""
SERVED_SCENE = "grpo_probe.envs.served:served_scene"
"""The scene function the adapter calls on a served environment whose server runs a scene."""
DEFAULT_TIMEOUT_S = 60.0
"""Seconds to wait for the connection and for each reply (``env.timeout_s``): a chunk of ticks on a busy
simulator takes well under a second; a dead or hung server stops the job within a minute."""
SERVER_FIELDS = ("address", "timeout_s", "sha256")
"""The fields of ``env: {source: server, ...}`` beside ``source`` and ``params``."""


class ServedEnvError(RuntimeError):
    """The environment server could not be reached, did not answer in time, refused a request, or is not
    the simulator this client connected to first (or the design pins)."""


def served_env_config(section: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The factory params of a design's ``env: {source: server, address, timeout_s, sha256, params}``:
    the adapter's params with the server's fields under ``server``. Checked here, each error naming
    ``where`` (the design file and ``env``) and the field."""
    from grpo_probe.serve import parse_address

    known = {"source", "params", *SERVER_FIELDS}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ValueError(
            f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    if section.get("source") != "server":
        raise ValueError(f"{where}.source must be 'server', got {section.get('source')!r}")
    address = section.get("address")
    try:
        parse_address(address if isinstance(address, str) else "")
    except ValueError:
        raise ValueError(
            f"{where}.address: {address!r} is not ws://HOST:PORT of the environment server "
            "(python -m grpo_probe.serve env FACTORY --port N prints it)"
        ) from None
    timeout = section.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"{where}.timeout_s must be a number of seconds > 0, got {timeout!r}")
    digest = section.get("sha256")
    if digest is not None and (
        not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest)
    ):
        raise ValueError(f"{where}.sha256 must be 64 lowercase hex digits (the server's hello) or null")
    params = section.get("params")
    if not isinstance(params, Mapping):
        raise ValueError(f"{where}.params must be a mapping (the adapter's params: gym_id, replans, ...)")
    if "server" in params:
        raise ValueError(f"{where}.params.server: the server's fields sit beside params, not in it")
    for name in ("wrappers", "scene", "expert"):
        if name in params:
            raise ValueError(
                f"{where}.params.{name}: a served environment's {name} run on the server (its factory and "
                "--scene); leave it out here"
            )
    _check_params(params, f"{where}.params")
    server = {"address": address, "timeout_s": float(timeout), "sha256": digest}
    return {"server": server, **dict(params)}


def _check_params(params: Mapping[str, Any], where: str) -> None:
    """The adapter's params, checked as far as they can be without the server (the object and the goal
    may come from the server's scene, so a stand-in scene fills that part)."""
    probe = dict(params)
    probe.pop("gym_kwargs", None)
    if not any(
        f"{role}_{place}" in probe for role in ("object", "goal") for place in ("body", "site", "obs_key")
    ):
        probe["scene"] = SERVED_SCENE
    try:
        GymnasiumParams.from_dict(probe, where)
    except ValueError as exc:
        raise ValueError(
            str(exc).replace("env.params", where, 1) if where not in str(exc) else str(exc)
        ) from None


class _Link:
    """One WebSocket connection to the environment server: the hello checked, requests answered."""

    def __init__(self, address: str, timeout_s: float, pinned: str | None) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._pinned = pinned
        self._link = ClientLink(
            address,
            timeout_s,
            where=f"environment server {address}",
            error=ServedEnvError,
            start_hint="start it with python -m grpo_probe.serve env FACTORY --port N in the simulator's "
            "environment, and check env.address",
        )
        self.hello = self.connect()

    @property
    def where(self) -> str:
        return self._link.where

    def connect(self) -> dict[str, Any]:
        """Open a connection and read the hello: the simulator must be the one the design pins, the one
        the results folder recorded and the first one this process saw there
        (:func:`~grpo_probe.envs.served_record.refusal`)."""
        hello = self._link.open(env_wire.read_hello)
        refused = refusal(self.where, self.address, hello, self._pinned)
        if refused is not None:
            self._link.close()
            raise ServedEnvError(refused)
        return hello

    def request(self, message: Mapping[str, Any], what: str) -> dict[str, Any]:
        """Send one request and return its reply; the environment's own error is quoted."""
        if not self._link.connected:
            raise ServedEnvError(
                f"{self.where}: the connection broke earlier in this episode; reset to reconnect"
            )
        reply = self._link.exchange(wire.packb(dict(message)), what)
        if not isinstance(reply, dict):
            self.close()
            raise ServedEnvError(f"{self.where}: the reply to {what} is a {type(reply).__name__}, not a map")
        if "error" in reply:
            raise ServedEnvError(
                f"{self.where}: the served environment raised {reply['error']} during {what}\n"
                f"server traceback:\n{reply.get('traceback', '')}"
            )
        return reply

    @property
    def connected(self) -> bool:
        return self._link.connected

    def close(self) -> None:
        self._link.close()


def _xy(value: Any) -> tuple[float, float] | None:
    return None if value is None else (float(value[0]), float(value[1]))


class ServedGymEnv:
    """The served environment where the adapter expects a Gymnasium one: spaces, ``reset(seed=)``,
    ``step(action)``, ``close()``. It is its own ``unwrapped`` (the wrappers are on the server)."""

    def __init__(self, link: _Link, gym_id: str, kwargs: Mapping[str, Any]) -> None:
        self._link = link
        self._gym_id = gym_id
        self._kwargs = dict(kwargs)
        self.described = self._make()
        gymnasium = import_gymnasium()
        self.action_space = env_wire.read_space(self.described["action_space"], gymnasium)
        self.observation_space = env_wire.read_space(self.described["observation_space"], gymnasium)
        self.dt = self.described["dt"] if self.described["dt"] is not None else float("nan")
        self.positions: dict[str, Any] | None = None
        self.engaged: bool | None = None
        self._ticks: list[dict[str, Any]] = []
        self._planned: np.ndarray | None = None
        self.scene = ServedScene(self, self.described)
        self.cameras: tuple[str, ...] = tuple(str(c) for c in self.described.get("cameras") or ())
        self._wanted: list[tuple[str, int, int]] = []
        """The frames drawn so far, by (camera, height, width): each state-changing request asks again."""
        self._frames: dict[tuple[str, int, int], np.ndarray] = {}
        """The frames of the current state."""
        self._pending: dict[tuple[str, int, int], np.ndarray] = {}
        """The frames after a planned chunk's last tick: current once the adapter has stepped to it."""

    def _make(self) -> dict[str, Any]:
        return self._link.request({"type": "make", "gym_id": self._gym_id, "kwargs": self._kwargs}, "make")

    @property
    def unwrapped(self) -> ServedGymEnv:
        return self

    def reset(self, *, seed: int) -> tuple[Any, dict[str, Any]]:
        if not self._link.connected:  # broken earlier: a new connection, the same simulator, a new env
            self._link.connect()
            self._make()
        self._ticks, self._planned, self._frames, self._pending = [], None, {}, {}
        what = f"reset(seed={seed})"
        reply = self._link.request({"type": "reset", "seed": int(seed), **self._render_fields()}, what)
        self.positions, self.engaged = reply["positions"], None
        self._frames = self._read_frames(reply, what)
        return reply["obs"], dict(reply["info"])

    def plan(self, actions: np.ndarray) -> None:
        """Step ``actions`` on the server in one request; :meth:`step` then returns each tick's reply."""
        what = f"a chunk of {len(actions)} ticks"
        self._frames, self._pending = {}, {}
        reply = self._link.request({"type": "step", "actions": actions, **self._render_fields()}, what)
        self._ticks = list(reply["ticks"])
        self._planned = actions
        self._pending = self._read_frames(reply, what)

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        planned = self._planned
        if self._ticks and planned is not None:
            index = len(planned) - len(self._ticks)
            if not np.array_equal(planned[index], action) or planned.dtype != np.asarray(action).dtype:
                raise RuntimeError(f"{self._gym_id}: a step's action is not the one planned for tick {index}")
            tick = self._ticks.pop(0)
            if not self._ticks:  # the chunk's last tick: the frames drawn after it are the state's now
                self._frames, self._pending = self._pending, {}
        else:
            tick = self.plan_one(action)
        self.positions, self.engaged = tick["positions"], tick["engaged"]
        return tick["obs"], tick["reward"], tick["terminated"], tick["truncated"], dict(tick["info"])

    def plan_one(self, action: np.ndarray) -> dict[str, Any]:
        self._frames, self._pending = {}, {}
        request = {"type": "step", "actions": np.asarray(action)[None], **self._render_fields()}
        reply = self._link.request(request, "a tick")
        ticks = reply["ticks"]
        if len(ticks) != 1:
            raise ServedEnvError(f"{self._link.where}: one tick asked, {len(ticks)} answered")
        self._frames = self._read_frames(reply, "a tick")
        return dict(ticks[0])

    def perturb(self, rng: np.random.Generator, scale: float) -> Any:
        self._frames = {}
        request = {"type": "perturb", "rng": env_wire.rng_state(rng), "scale": float(scale)}
        reply = self._link.request({**request, **self._render_fields()}, "perturb")
        env_wire.set_rng_state(rng, reply["rng"])
        self.positions = reply["positions"]
        self._frames = self._read_frames(reply, "perturb")
        return reply["obs"]

    # -- cameras ---------------------------------------------------------------------------------------
    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        """The server's frame of ``camera`` at the current state, uint8 [height, width, 3]: the one that
        came with the last reply, or (the first time a camera is drawn at a size) a ``render`` request."""
        wanted = (str(camera), int(height), int(width))
        frame = self._frames.get(wanted)
        if frame is None:
            what = f"render({camera!r}, {height}, {width})"
            reply = self._link.request({"type": "render", "cameras": [list(wanted)]}, what)
            frame = self._frames[wanted] = self._read_frames(reply, what, [wanted])[wanted]
            if wanted not in self._wanted:
                self._wanted.append(wanted)
        return frame.copy()

    def _render_fields(self) -> dict[str, Any]:
        """A state-changing request's ``render`` field: the frames drawn so far, drawn again after it."""
        return {"render": [list(w) for w in self._wanted]} if self._wanted else {}

    def _read_frames(
        self, reply: Mapping[str, Any], what: str, asked: list[tuple[str, int, int]] | None = None
    ) -> dict[tuple[str, int, int], np.ndarray]:
        """The reply's frames by what was asked (the frames drawn so far unless ``asked``), each checked
        to be uint8 [height, width, 3]."""
        asked = self._wanted if asked is None else asked
        frames = reply.get("frames") or []
        if not isinstance(frames, list) or len(frames) != len(asked):
            count = len(frames) if isinstance(frames, list) else 0
            raise ServedEnvError(
                f"{self._link.where}: the reply to {what} carries {count} frame(s) where {len(asked)} were "
                "asked (a server from before cameras were served draws none)"
            )
        out = {}
        for (camera, height, width), frame in zip(asked, frames, strict=True):
            if (
                not isinstance(frame, np.ndarray)
                or frame.dtype != np.uint8
                or frame.shape != (height, width, 3)
            ):
                found = f"{getattr(frame, 'dtype', type(frame).__name__)} {getattr(frame, 'shape', '')}"
                raise ServedEnvError(
                    f"{self._link.where}: camera {camera!r} came as {found} in the reply to {what}, not "
                    f"uint8 ({height}, {width}, 3)"
                )
            out[(camera, height, width)] = frame
        return out

    def expert_chunk(
        self, obs: np.ndarray, key: tuple[int, ...], noise: float, chunk_length: int
    ) -> np.ndarray:
        reply = self._link.request(
            {
                "type": "expert",
                "obs": np.asarray(obs),
                "key": [int(k) for k in key],
                "noise": float(noise),
                "chunk_length": int(chunk_length),
            },
            "the expert's chunk",
        )
        chunk: np.ndarray = reply["chunk"]
        return chunk

    def close(self) -> None:
        self._link.close()


class ServedScene:
    """The scene function of a served environment, as the adapter calls one: the server's positions,
    and its state shift and engagement where its scene offers them."""

    def __init__(self, env: ServedGymEnv, described: Mapping[str, Any]) -> None:
        self._env = env
        self.traces_effector = bool(described["traces_effector"])
        if described["perturb"]:
            self.state_perturbation = described["state_perturbation"]
            self.perturb = env.perturb
        if described["engaged"]:
            self.engaged = self._engaged
            if described.get("engagement"):  # a server from before scenes said what engagement means: none
                self.engagement = str(described["engagement"])

    def positions(self) -> ScenePositions:
        found = self._env.positions
        if found is None:
            raise ValueError("the server sent no positions (is its --scene set?)")
        return ScenePositions(
            object_xy=_xy(found["object_xy"]),  # type: ignore[arg-type]
            goal_xy=_xy(found["goal_xy"]),  # type: ignore[arg-type]
            effector_xy=_xy(found.get("effector_xy")),
        )

    def _engaged(self, info: Mapping[str, Any]) -> bool:
        return bool(self._env.engaged)


def served_scene(env: ServedGymEnv) -> ServedScene:
    """The scene function the adapter is given for a served environment (``scene(env)``)."""
    return env.scene


class _ServedExpert:
    """The server scene's scripted expert as the probe's :class:`~grpo_probe.envs.protocol.Expert`."""

    def __init__(self, env: ServedGymEnv, noise: float, chunk_length: int) -> None:
        self._env, self._noise, self._chunk_length = env, noise, chunk_length

    def act(self, obs: np.ndarray, key: tuple[int, ...]) -> np.ndarray:
        return self._env.expert_chunk(obs, key, self._noise, self._chunk_length)


class ServedGymnasiumAdapter(GymnasiumAdapter):
    """The Gymnasium adapter on a served environment: the version names the server's simulator, a chunk's
    ticks go in one request, and the server scene's expert is the environment's expert."""

    def __init__(self, params: GymnasiumParams, env: ServedGymEnv, hello: Mapping[str, Any]) -> None:
        self._hello = dict(hello)
        self._served = env
        super().__init__(params, env=env)
        self.spec = dataclasses.replace(self.spec, cameras=env.cameras)
        if env.described["expert"]:
            self.expert = self._served_expert

    def _version(self) -> str:
        hello, described = self._hello, self._served.described
        return (
            f"{self.params.gym_id}/{self.params.version} (served: {described['env_class']} from "
            f"{hello['factory']}, scene {hello['scene']}; Python {hello['python']}, {key_packages(hello)}; "
            f"sha256 {hello['sha256']})"
        )

    def _served_expert(self, noise: float) -> Expert:
        return _ServedExpert(self._served, noise, self.params.chunk_length)

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        """The server's frame of ``camera`` (one of ``spec.cameras``), uint8 [height, width, 3]; an unknown
        camera is a ``ValueError`` naming it and the environment's cameras, before any request."""
        if camera not in self.spec.cameras:
            cameras = ", ".join(self.spec.cameras) or "none"
            raise ValueError(f"{self.spec.id}: no camera {camera!r} (its cameras: {cameras})")
        return self._served.render(camera, height, width)

    def execute(self, chunk: np.ndarray, n_executed: int) -> np.ndarray:
        """The adapter's own ``execute``, its ticks stepped on the server in one request beforehand."""
        if self._seed is not None and not self.done:
            where = f"{self.spec.id} seed {self._seed}"
            checked = check_chunk(chunk, self.spec, n_executed, where)
            low, high = self.action_bounds
            actions = normalized_to_bounds(checked[:n_executed], low, high, self.replan_index, where)
            self._served.plan(actions.astype(self._action_dtype))
        return super().execute(chunk, n_executed)


def served_env(server: Mapping[str, Any], **params: Any) -> ServedGymnasiumAdapter:
    """The factory a design's ``env: {source: server, ...}`` is read as: connect, build the environment
    there with ``factory(gym_id, **gym_kwargs)`` and bind the adapter to it."""
    address = str(server["address"])
    link = _Link(address, float(server.get("timeout_s") or DEFAULT_TIMEOUT_S), server.get("sha256"))
    values = dict(params)
    kwargs = dict(values.pop("gym_kwargs", {}) or {})
    typed = GymnasiumParams.from_dict({**values, "scene": SERVED_SCENE} if _needs_scene(values) else values)
    kwargs.setdefault("max_episode_steps", typed.episode_ticks)
    env = ServedGymEnv(link, typed.gym_id, kwargs)
    if typed.scene is not None and not env.described["scene"]:
        link.close()
        raise ValueError(
            f"env.params: the environment server {address} runs no scene function (start it with --scene "
            "module:callable), so name where the object and the goal are read (object_obs_key, goal_obs_key "
            "or distance_info_key)"
        )
    return ServedGymnasiumAdapter(dataclasses.replace(typed, gym_kwargs=()), env, link.hello)


def _needs_scene(params: Mapping[str, Any]) -> bool:
    return not any(f"{role}_obs_key" in params for role in ("object", "goal"))
