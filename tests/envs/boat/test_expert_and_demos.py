"""The scripted expert plans like a policy, and its demonstrations pair up and round-trip."""

from __future__ import annotations

import numpy as np
import pytest

from grpo_probe.envs.boat import OBS_DIM, BoatPushEnv, SimParams
from grpo_probe.envs.boat.demos import collect_demos
from grpo_probe.envs.boat.expert import ScriptedExpert
from grpo_probe.envs.demo_set import Demos


def test_expert_noise_is_keyed() -> None:
    env = BoatPushEnv()
    obs = env.reset(0)
    expert = ScriptedExpert(noise=0.1)
    a, b, c = expert.act(obs, (0, 0, 0)), expert.act(obs, (0, 0, 0)), expert.act(obs, (0, 0, 1))
    assert a.tobytes() == b.tobytes()
    assert a.tobytes() != c.tobytes()
    assert a.shape == (50, 6) and a.dtype == np.float32
    assert np.all(np.abs(a) <= 1.0)


def test_negative_noise_is_refused() -> None:
    with pytest.raises(ValueError, match="noise"):
        ScriptedExpert(noise=-0.1)


def test_demos_pair_each_replan_with_its_chunk(tmp_path) -> None:
    params = SimParams(replans=4)
    demos = collect_demos(params, seeds=[0, 1], noise=0.05, run_key=3)
    assert demos.obs.shape == (8, OBS_DIM)
    assert demos.chunks.shape == (8, 50, 6)
    assert demos.seeds.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    demos.save(tmp_path / "d.npz")
    loaded = Demos.load(tmp_path / "d.npz")
    assert loaded.obs.tobytes() == demos.obs.tobytes()
    assert loaded.chunks.tobytes() == demos.chunks.tobytes()
    again = collect_demos(params, seeds=[0, 1], noise=0.05, run_key=3)
    assert again.chunks.tobytes() == demos.chunks.tobytes()


def test_a_corrupt_demos_file_names_the_file(tmp_path) -> None:
    bad = tmp_path / "demos.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"demos\.npz"):
        Demos.load(bad)
