"""Gymnasium both ways: the boat scene as a registered gymnasium.Env, any Gymnasium env as a probe env.

Why: people train with Gymnasium. The boat scene held to Gymnasium's conventions (Gymnasium's own
``check_env``), a return that is the probe's metric, and the README's worked adapter
(examples/my_gym_env.py) bound as a design's environment and proven by the parallel oracle.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from grpo_probe.envs.boat.gym_registration import GYM_ID
from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.registry import env_config, make_env
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.provenance import env_files
from grpo_probe.rollout import GroupJob, PolicySource, run_parallel_oracle

from .user_envs import factory_name, make_noise_policy

REPO = Path(__file__).resolve().parents[2]
MAKE = f"grpo_probe.envs.boat.gym_registration:{GYM_ID}"


def test_the_boat_gymnasium_env_passes_check_env() -> None:
    env = gymnasium.make(MAKE)
    with warnings.catch_warnings():
        # Gymnasium warns about unbounded Box observations, as it does for its own MuJoCo envs
        warnings.filterwarnings("ignore", message=r".*Box observation space (minimum|maximum) value")
        check_env(env.unwrapped)
    assert env.observation_space.shape == (17,) and env.action_space.shape == (6,)


def test_the_boat_gymnasium_return_is_progress_and_info_carries_the_guards() -> None:
    env = gymnasium.make(MAKE, params=SimParams(replans=3, executed_actions=20))
    obs, info = env.reset(seed=5)
    assert obs.dtype == np.float32 and info["progress_final_cm"] == 0.0
    total, steps, rng = 0.0, 0, np.random.default_rng(0)
    terminated = truncated = False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(rng.uniform(-1, 1, 6).astype(np.float32))
        total += reward
        steps += 1
    assert truncated and not terminated and steps == 60
    assert total == pytest.approx(info["progress_final_cm"], abs=1e-9)
    for channel in ("reset_strikes", "knocked_off", "final_upright", "max_boat_speed_m_s", "contact"):
        assert channel in info
    again, _ = env.reset(seed=5)
    first, _ = gymnasium.make(MAKE, params=SimParams(replans=3, executed_actions=20)).reset(seed=5)
    assert again.tobytes() == first.tobytes()


def test_the_example_adapter_is_a_design_environment_the_parallel_oracle_proves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(REPO))
    config = env_config("examples.my_gym_env:make_reacher", {"replans": 2, "executed_actions": 10})
    env = make_env(config)
    spec = env.spec
    assert (spec.obs_dim, spec.action_dims, spec.guard_names) == (10, 2, ("away_tail",))
    options = {"obs_dim": spec.obs_dim, "chunk_length": spec.chunk_length, "action_dims": spec.action_dims}
    source = PolicySource(factory=factory_name(make_noise_policy), options=options)
    job = GroupJob("arm_x", "cell_x", source, SamplingMode("flow_ode"), (0, 1), 2, 3, config)
    report = run_parallel_oracle([job], tmp_path / "oracle.json", workers=2, show_progress=False)
    assert report["pass"] and report["counts"]["ticks"] == 4 * (spec.episode_ticks + 1)
    case = json.loads((tmp_path / "oracle.json").read_text())["cases"][0]
    assert case["env"] == {"id": "examples.my_gym_env:make_reacher", "params": config.params_dict()}
    example = REPO / "examples" / "my_gym_env.py"
    assert example.resolve() in [p.resolve() for p in env_files(config)]
    assert example.is_file()


def test_the_readme_shows_the_example_adapter_file() -> None:
    """Text no test reads drifts: the docs' worked adapter is examples/my_gym_env.py, verbatim."""
    guide = (REPO / "docs/your-simulator.md").read_text()
    section = guide.split("### Gymnasium, both ways", 1)[1].split("\n## ", 1)[0]
    blocks = [b for b in re.findall(r"```python\n(.*?)```", section, flags=re.S) if "def make_reacher" in b]
    source = (REPO / "examples/my_gym_env.py").read_text().split('"""', 2)[2].lstrip("\n")
    assert blocks == [source]
