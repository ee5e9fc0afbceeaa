"""A served environment's cameras give the frames the same environment gives in process, byte for byte.

Pusher-v5 (its own XML with two named cameras added) is bound twice by the same adapter params: in the
probe's process, and served by ``python -m grpo_probe.serve env`` from a second process whose server draws
the frames. Every frame a camera-fed policy would read (each named camera and the ``default`` view, at
two sizes, at the spawn, after each chunk and after a replay's state shift) must be the in-process bytes,
and every record too, and so must a camera the server's scene draws itself. The rollout engine hands a
camera-fed policy the same frames (its rows, its chunks and the per-replan frame digests the oracles
compare are the in-process ones); after a camera's first frame the frames come with the chunk's reply
(no request of their own); an unknown camera is refused naming the cameras there are.
"""

from __future__ import annotations

import ctypes.util
import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest

from envs.scene_envs import callable_name
from envs.served_scenes import PusherScene, PusherSketchScene
from grpo_probe.envs.gym_adapter import DEFAULT_CAMERA, GymnasiumAdapter, GymnasiumParams
from grpo_probe.envs.observation import ObservationConfig
from grpo_probe.envs.served import ServedEnvError, served_env, served_env_config
from grpo_probe.policies.protocol import PolicyOutput, RowDiagnostics, SamplingMode
from grpo_probe.rollout.lockstep import run_lockstep
from grpo_probe.rollout.results import EpisodeSpec
from serve_processes import env_server_process

TESTS = Path(__file__).resolve().parents[1]
SCENE = "envs.served_scenes:PusherScene"
FACTORY = "grpo_probe.serve.env_server:gymnasium_make"
PARAMS = {
    "gym_id": "Pusher-v5",
    "replans": 3,
    "chunk_length": 6,
    "executed_actions": 4,
    "success_radius_m": 0.05,
}
CAMERAS = (("front", 48, 64), ("default", 32, 32), ("top", 24, 40))
_XML_CAMERAS = """
    <camera name="front" pos="0 -1.4 1.1" xyaxes="1 0 0 0 0.62 0.78"/>
    <camera name="top" pos="0.3 -0.3 1.6" xyaxes="1 0 0 0 1 0"/>
"""


@pytest.fixture(scope="module")
def xml_file(tmp_path_factory) -> Path:
    """Pusher-v5's own XML with two named cameras in its world body (Pusher-v5 takes ``xml_file``)."""
    import gymnasium.envs.mujoco as gym_mujoco

    if ctypes.util.find_library("EGL") is None:
        pytest.skip("no libEGL on this machine (tools/gl/install-gl.sh installs Mesa's EGL)")
    xml = (Path(gym_mujoco.__file__).parent / "assets" / "pusher_v5.xml").read_text()
    path = tmp_path_factory.mktemp("xml") / "pusher_cameras.xml"
    path.write_text(xml.replace("<worldbody>", "<worldbody>" + _XML_CAMERAS, 1))
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("served_cameras") / "server.log"
    with env_server_process(sys.executable, FACTORY, log, scene=SCENE, extra_path=[TESTS]) as (address, proc):
        yield address, proc


def _served(address: str, xml_file: Path):
    section = {
        "source": "server",
        "address": address,
        "params": {**PARAMS, "gym_kwargs": {"xml_file": str(xml_file)}},
    }
    return served_env(**served_env_config(section, "design.yaml: env"))


def _local(xml_file: Path) -> GymnasiumAdapter:
    params = {**PARAMS, "scene": callable_name(PusherScene), "gym_kwargs": {"xml_file": str(xml_file)}}
    return GymnasiumAdapter(GymnasiumParams.from_dict(params))


def _frames(env) -> list[str]:
    """sha256 of every camera's frame now, after checking each is a non-blank uint8 [h, w, 3]."""
    out = []
    for camera, height, width in CAMERAS:
        frame = env.render(camera, height, width)
        assert frame.dtype == np.uint8 and frame.shape == (height, width, 3), (frame.dtype, frame.shape)
        assert frame.std() > 0, f"camera {camera!r} drew a blank frame"
        out.append(f"{camera}:{hashlib.sha256(frame.tobytes()).hexdigest()}")
    return out


def _episodes(env, seeds, perturb: float | None = None) -> list[tuple[bytes, list[str]]]:
    """Each seed's record bytes and the digests of every frame a policy would read, replan by replan."""
    out = []
    for seed in seeds:
        env.reset(seed)
        if perturb is not None:
            env.perturb_state(np.random.default_rng([7, seed]), perturb)
        frames = _frames(env)
        rng = np.random.default_rng(seed)
        while not env.done:
            env.execute(rng.uniform(-1.2, 1.2, (6, env.spec.action_dims)).astype(np.float32), 4)
            frames += _frames(env)
        out.append((env.record().canonical_bytes(), frames))
    return out


def _in_process_renders(local: GymnasiumAdapter) -> None:
    try:
        local.render(DEFAULT_CAMERA, 8, 8)
    except RuntimeError as exc:
        if "camera frames need an OpenGL backend" in str(exc):
            pytest.skip(f"libEGL is here, but no EGL context could be made: {exc}")
        raise


def test_served_frames_and_rows_are_the_in_process_bytes(server, xml_file):
    address, _ = server
    local = _local(xml_file)
    local.reset(0)
    _in_process_renders(local)
    served = _served(address, xml_file)
    assert served.spec.cameras == local.spec.cameras == ("front", "top", DEFAULT_CAMERA)
    in_process = _episodes(local, [3, 4])
    assert _episodes(served, [3, 4]) == in_process
    assert _episodes(served, [5], perturb=0.02) == _episodes(local, [5], perturb=0.02)
    first = in_process[0][1]
    assert len(set(first)) == len(first), "two frames of one episode are the same: the state does not show"
    served.close()
    local.close()


class FrameFedPolicy:
    """A camera-fed policy whose chunk moves with every pixel of the ``front`` frame it reads (a frame that
    differs by one byte gives other actions), so the engine's rows show which frames it was handed."""

    head = "flow"
    input_keys = ("observation.state", "observation.images.front")

    def __init__(self, obs_dim: int, chunk_length: int, action_dims: int) -> None:
        self.obs_dim, self._shape = obs_dim, (chunk_length, action_dims)
        self._weights = np.random.default_rng(0).standard_normal((48 * 64 * 3, action_dims))

    def act(self, obs, keys, mode) -> PolicyOutput:
        frames = np.asarray(obs["observation.images.front"], dtype=np.float64).reshape(len(keys), -1) / 255.0
        pull = np.tanh(frames @ self._weights / 100.0 + obs["observation.state"][:, : self._shape[1]])
        chunk = np.repeat(pull[:, None, :], self._shape[0], axis=1).astype(np.float32)
        return PolicyOutput(chunk, [RowDiagnostics(None) for _ in keys])


def test_the_engine_hands_a_camera_fed_policy_the_in_process_frames(server, xml_file):
    address, _ = server
    observation = ObservationConfig.from_dict({"cameras": {"front": {"height": 48, "width": 64}}})
    specs = [EpisodeSpec(seed=3, draw=0), EpisodeSpec(seed=4, draw=1)]
    runs = []
    for envs in (
        [_local(xml_file), _local(xml_file)],
        [_served(address, xml_file), _served(address, xml_file)],
    ):
        policy = FrameFedPolicy(envs[0].spec.obs_dim, envs[0].spec.chunk_length, envs[0].spec.action_dims)
        results = run_lockstep(
            policy, envs, specs, run_key=11, mode=SamplingMode("flow_ode", steps=10), observation=observation
        )
        runs.append(
            [(r.record.canonical_bytes(), r.executed_actions.tobytes(), r.frame_sha256) for r in results]
        )
        for env in envs:
            env.close()
    in_process, served = runs
    assert served == in_process
    assert all(len(frames) == PARAMS["replans"] for _, _, frames in in_process)


def test_a_camera_the_servers_scene_draws_itself_is_served_as_in_process(tmp_path):
    """The scene's own cameras come first, then the model's, and its frames are the in-process bytes."""
    local = GymnasiumAdapter(GymnasiumParams.from_dict({**PARAMS, "scene": callable_name(PusherSketchScene)}))
    scene = "envs.served_scenes:PusherSketchScene"
    with env_server_process(
        sys.executable, FACTORY, tmp_path / "server.log", scene=scene, extra_path=[TESTS]
    ) as (address, _):
        served = served_env(
            **served_env_config(
                {"source": "server", "address": address, "params": PARAMS}, "design.yaml: env"
            )
        )
        assert served.spec.cameras == local.spec.cameras == ("sketch", DEFAULT_CAMERA)
        frames = {}
        for name, env in (("served", served), ("in process", local)):
            env.reset(6)
            drawn = [env.render("sketch", 64, 64).tobytes()]
            while not env.done:
                env.execute(np.full((6, 7), 1.0, np.float32), 4)
                drawn.append(env.render("sketch", 64, 64).tobytes())
            frames[name] = drawn
        served.close()
    assert frames["served"] == frames["in process"]
    assert frames["served"][0] != frames["served"][-1], "the arm's motion does not show"
    local.close()


def test_after_the_first_frame_the_frames_come_with_the_chunk(server, xml_file):
    """One request per replan, frames and all: only a camera's first frame at a size asks on its own."""
    address, _ = server
    served = _served(address, xml_file)
    sent: list[str] = []
    link = served._served._link
    request = link.request
    link.request = lambda message, what: sent.append(message["type"]) or request(message, what)
    served.reset(1)
    served.render("front", 48, 64)
    served.render("front", 48, 64)
    assert sent == ["reset", "render"]
    sent.clear()
    for _ in range(2):
        served.execute(np.zeros((6, 7), np.float32), 4)
        served.render("front", 48, 64)
    served.reset(2)
    served.render("front", 48, 64)
    assert sent == ["step", "step", "reset"]
    served.close()


def test_an_unknown_camera_is_refused_naming_the_cameras_there_are(server, xml_file):
    address, _ = server
    served = _served(address, xml_file)
    served.reset(0)
    with pytest.raises(ValueError, match=r"no camera 'wrist' \(its cameras: front, top, default\)"):
        served.render("wrist", 32, 32)
    link = served._served._link  # a client that asks anyway is answered with the server's own refusal
    with pytest.raises(ServedEnvError, match=r"has no camera 'wrist' \(its cameras: front, top, default\)"):
        link.request({"type": "render", "cameras": [["wrist", 32, 32]]}, "render")
    with pytest.raises(ServedEnvError, match=r"render\[0\]: height must be an integer in 1\.\.4096, got 0"):
        link.request({"type": "render", "cameras": [["front", 0, 32]]}, "render")
    served.close()


class _NoModel:
    """An environment with no MuJoCo model (as a pymunk simulator): only its scene can draw."""


class _ViewWithoutRender:
    cameras = ("top",)


class _FloatView:
    cameras = ("top",)

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        return np.zeros((height, width, 3), np.float32)


def test_the_server_checks_a_scenes_own_cameras_as_the_adapter_does():
    from grpo_probe.serve.env_cameras import Cameras

    assert Cameras(_NoModel()).names == ()
    with pytest.raises(ValueError, match=r"_ViewWithoutRender names cameras \['top'\] but has no render"):
        Cameras(_NoModel(), _ViewWithoutRender())
    cameras = Cameras(_NoModel(), _FloatView())
    assert cameras.names == ("top",)
    with pytest.raises(
        ValueError, match=r"of the scene _FloatView returned float32 \[4, 4, 3\]; it must return"
    ):
        cameras.render([("top", 4, 4)])
