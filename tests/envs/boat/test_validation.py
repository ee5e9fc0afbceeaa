"""Bad parameters and bad actions fail with a message naming the field or the action index."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from grpo_probe.envs.boat import BoatPushEnv, SimParams


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"physics_steps_per_tick": 0}, "sim.physics_steps_per_tick"),
        ({"replans": -1}, "sim.replans"),
        ({"executed_actions": 60}, "sim.executed_actions"),
        ({"disk_radius_m": math.nan}, "sim.disk_radius_m"),
        ({"action_dims": 7}, "sim.action_dims"),
        ({"d0_range_m": [0.3, 0.1]}, "sim.d0_range_m"),
        ({"ticks_per_replan": 30}, "unknown field 'ticks_per_replan'"),
    ],
)
def test_bad_parameters_name_the_field(values: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        SimParams.from_dict(values)


def test_a_nan_action_names_its_index() -> None:
    env = BoatPushEnv()
    env.reset(0)
    chunk = np.zeros((50, 6))
    chunk[12, 4] = np.nan
    with pytest.raises(ValueError, match=r"action \[12, 4\]"):
        env.execute_chunk(chunk)


def test_a_nan_in_the_unexecuted_tail_is_ignored() -> None:
    env = BoatPushEnv()
    env.reset(0)
    chunk = np.zeros((50, 6))
    chunk[45, 0] = np.nan  # planned but never executed
    env.execute_chunk(chunk)
    assert env.replan_index == 1


def test_a_chunk_of_the_wrong_shape_is_refused() -> None:
    env = BoatPushEnv()
    env.reset(0)
    with pytest.raises(ValueError, match=r"shape \(50, 6\)"):
        env.execute_chunk(np.zeros((30, 6)))


def test_demo_with_bad_noise_writes_nothing(tmp_path) -> None:
    out = tmp_path / "traj.png"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpo_probe.cli",
            "sim",
            "demo",
            "--seed",
            "1",
            "--expert",
            "--noise",
            "nan",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "noise" in proc.stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []
