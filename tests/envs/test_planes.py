"""The two planes as the validation study's controls: deterministic scenes, an expert that reaches, and a
tiny design each that reads as its control must.

Why: the luck plane is the negative control (its reward is luck keyed by the exact bytes of the actions)
and the smooth plane the positive one (the object moves by ``STEP_M`` times the action). A plane whose
episode depended on anything but the seed and the executed bytes would make both controls irreproducible;
an expert that missed the goal on the smooth plane would train arms with nothing to learn from; and a
control whose design read "signal" on luck, or "chaos" on a smooth scene, would be no control.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import session_runs
from grpo_probe.envs.planes import (
    GOAL_XY,
    LUCK_HALF_EXTENT_M,
    LUCK_ID,
    LUCK_KEYS,
    SMOOTH_ID,
    STEP_M,
    LuckPlane,
    PlaneExpert,
    make_luck_plane,
    make_smooth_plane,
)
from grpo_probe.envs.registry import EnvFactoryError, env_config, env_spec, make_env, make_expert
from grpo_probe.keyed_rng import numpy_generator, tag

REPO = Path(__file__).resolve().parents[2]
DESIGNS = {"luck": "luck_plane_smoke", "smooth": "smooth_plane_smoke"}
CONTROLS = REPO / "prereg" / "designs" / "controls"
"""Where the two control planes' designs lie (prereg/README.md)."""


def _design(which: str) -> dict[str, Any]:
    return yaml.safe_load((CONTROLS / f"{DESIGNS[which]}.yaml").read_text())


def _config(which: str) -> Any:
    env = _design(which)["env"]
    return env_config(env["id"], env["params"])


def _episode(env: Any, expert: Any, seed: int, run_key: int = 3) -> Any:
    obs = env.reset(seed)
    while not env.done:
        obs = env.execute(expert.act(obs, (run_key, seed, env.replan_index)), env.spec.executed_actions)
    return env.record()


_EPISODE = """
import hashlib, sys
from grpo_probe.envs.registry import env_config, make_env, make_expert
config = env_config({factory!r}, {params!r})
env, expert = make_env(config), make_expert(config, 0.05)
obs = env.reset(7)
while not env.done:
    obs = env.execute(expert.act(obs, (3, 7, env.replan_index)), env.spec.executed_actions)
sys.stdout.write(hashlib.sha256(env.record().canonical_bytes()).hexdigest())
"""


# -- the designs bind the package's planes -------------------------------------------------------------
def test_the_designs_name_the_package_factories_with_the_geometry_the_expert_needs() -> None:
    assert _config("luck").id == LUCK_ID and _config("smooth").id == SMOOTH_ID
    for which in DESIGNS:
        spec = env_spec(_config(which))
        assert spec.guard_names == ("away_tail",)
        # the noiseless expert covers at most STEP_M per tick and axis; d0 is at most 17 cm along x
        assert spec.episode_ticks * STEP_M >= GOAL_XY[0] + 0.02
        assert set(_design(which)["phase2"]["reward"]["penalties"]) <= set(spec.guard_names)
    assert env_spec(_config("smooth")).state_perturbation
    assert env_spec(_config("luck")).state_perturbation is None


def test_geometry_params_are_checked_and_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"make_luck_plane: env.params.replans must be a positive integer"):
        make_luck_plane(replans=0)
    with pytest.raises(ValueError, match=r"env.params.state_perturbation must be true or false"):
        make_smooth_plane(state_perturbation="yes")  # type: ignore[arg-type]
    with pytest.raises(EnvFactoryError, match=r"refused them"):
        make_env(env_config(LUCK_ID, {"state_perturbation": True}))
    with pytest.raises(ValueError, match=r"expert noise must be a finite number >= 0"):
        make_expert(_config("smooth"), -0.1)


# -- determinism ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", DESIGNS)
def test_an_expert_episode_is_bit_identical_in_fresh_processes(which: str) -> None:
    config = _config(which)
    code = _EPISODE.format(factory=config.id, params=config.params)
    digests = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    here = _episode(make_env(config), make_expert(config, 0.05), 7)
    assert digests == {hashlib.sha256(here.canonical_bytes()).hexdigest()}


@pytest.mark.parametrize("key", ["actions", "seed_and_actions"])
def test_the_luck_plane_is_the_documented_hash_of_the_executed_bytes(key: str) -> None:
    """Recomputed from the module docstring's recipe: SHA-256 over the seed (as a little-endian uint64,
    with ``key: seed_and_actions``) and each tick's two little-endian float32 numbers, the digest's first
    8 bytes (little-endian) seeding default_rng, a uniform offset from the spawn; and a change of one
    action's last bit gives a fresh spot from that tick on."""
    env = make_luck_plane(key=key, replans=1, chunk_length=3, executed_actions=3)
    assert env.spec.version == LUCK_KEYS[key]
    chunk = np.array([[0.5, -0.25], [0.125, 1.0], [-1.0, 0.0]], dtype=np.float32)
    env.reset(11)
    env.execute(chunk, 3)
    record = env.record()
    spawn = numpy_generator(tag("plane_spawn"), 11).uniform(-0.02, 0.02, 2)
    digest = hashlib.sha256((11).to_bytes(8, "little") if key == "seed_and_actions" else b"")
    expected = []
    for action in chunk:
        digest.update(action.astype("<f4").tobytes())
        rng = np.random.default_rng(int.from_bytes(digest.digest()[:8], "little"))
        expected.append(spawn + rng.uniform(-LUCK_HALF_EXTENT_M, LUCK_HALF_EXTENT_M, 2))
    assert record.object_x_trace_m == (spawn[0], *(float(xy[0]) for xy in expected))
    assert record.object_y_trace_m == (spawn[1], *(float(xy[1]) for xy in expected))
    nudged = chunk.copy()
    nudged[1, 0] = np.nextafter(nudged[1, 0], np.float32(2.0))
    env.reset(11)
    env.execute(nudged, 3)
    again = env.record()
    assert again.object_x_trace_m[:2] == record.object_x_trace_m[:2]
    assert again.object_x_trace_m[2] != record.object_x_trace_m[2]


def _offsets(env: LuckPlane, chunk: np.ndarray, seeds: range) -> set[tuple[float, float]]:
    """The object's final offset from its spawn on each seed, for the same executed bytes."""
    out = set()
    for seed in seeds:
        env.reset(seed)
        env.execute(chunk, chunk.shape[0])
        record = env.record()
        out.add(
            (
                record.object_x_trace_m[-1] - record.object_x_trace_m[0],
                record.object_y_trace_m[-1] - record.object_y_trace_m[0],
            )
        )
    return out


def test_the_seed_keyed_luck_differs_per_seed_for_the_same_bytes() -> None:
    """The flaw the seed key mends: keyed by the actions alone, one action sequence lands at the same
    offset on every seed (a lucky sequence learnt on training seeds carries to held-out ones); keyed by
    the seed as well, each seed draws its own."""
    chunk = np.full((4, 2), 0.25, dtype=np.float32)
    seeds = range(3000, 3012)
    by_actions = _offsets(
        make_luck_plane(key="actions", replans=1, chunk_length=4, executed_actions=4), chunk, seeds
    )
    by_seed = _offsets(
        make_luck_plane(key="seed_and_actions", replans=1, chunk_length=4, executed_actions=4), chunk, seeds
    )
    assert len(by_actions) == 1
    assert len(by_seed) == len(seeds)


def test_an_unknown_luck_key_is_refused() -> None:
    with pytest.raises(ValueError, match=r"make_luck_plane: env.params.key must be one of"):
        make_luck_plane(key="seed")


# -- the expert -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("noise", [0.0, 0.05])
def test_the_expert_reaches_the_goal_on_the_smooth_plane(noise: float) -> None:
    """On the design's geometry, noiseless and at the demo noise: every seed ends on the goal."""
    config = _config("smooth")
    assert noise in (0.0, _design("smooth")["training"]["demos"]["noise"])
    env, expert = make_env(config), make_expert(config, noise)
    for seed in range(20):
        record = _episode(env, expert, seed)
        assert record.success, (seed, record.d_final_cm)
        assert record.progress_final_cm > 12.0
        if noise == 0.0:
            assert record.d_final_cm < 1e-6


def test_the_expert_is_deterministic_given_its_key_and_plans_only_from_the_observation() -> None:
    expert = PlaneExpert(10, 0.05)
    obs = np.array([0.01, -0.01, 0.14, 0.01], dtype=np.float32)
    first = expert.act(obs, (1, 2, 0))
    assert first.dtype == np.float32 and first.shape == (10, 2)
    assert np.array_equal(first, expert.act(obs, (1, 2, 0)))
    assert not np.array_equal(first, expert.act(obs, (1, 2, 1)))
    # noiseless: full speed along x toward the goal, the plan ending exactly on it
    plan = PlaneExpert(20).plan(obs)
    assert plan[0, 0] == 1.0 and abs(plan[0, 1]) < 1.0
    assert np.allclose(obs[:2] + STEP_M * plan.sum(axis=0), obs[:2] + obs[2:4], atol=1e-12)


def test_the_expert_gains_nothing_on_the_luck_plane() -> None:
    """The same expert on the luck plane: progress is luck (within the luck's reach of zero on average)."""
    config = _config("luck")
    env, expert = make_env(config), make_expert(config, 0.0)
    progress = [_episode(env, expert, seed).progress_final_cm for seed in range(40)]
    # d0 is about 15 cm and every tick lands within 5 cm of the spawn: progress stays within about 5 cm
    # of zero and never comes near the smooth plane's 13-17 cm
    assert max(progress) < 100.0 * LUCK_HALF_EXTENT_M * 2**0.5 + 1e-9
    assert abs(float(np.mean(progress))) < 2.0


# -- the designs, end to end ----------------------------------------------------------------------------
@pytest.mark.e2e
@pytest.mark.slow
def test_the_luck_plane_design_reads_chaos_not_signal_in_every_cell(
    study_run: Path, workflow_tools: Any
) -> None:
    """prereg/designs/controls/luck_plane_smoke.yaml from a fresh copy to decision.md: every cell's chaos
    fraction near 1, no cell shows signal, and the outcome parks GRPO. Read from the suite's tiny study, whose
    luck member is this design with a shorter pilot (tests/session_runs.py: the probe's part is the same)."""
    run = study_run / "results" / session_runs.tiny_member(DESIGNS["luck"])
    registered = _design("luck")
    tiny = yaml.safe_load((study_run / "prereg" / f"{run.name}.yaml").read_text())
    assert {k: v for k, v in tiny.items() if k not in ("name", "phase2", "amendments")} == {
        k: v for k, v in registered.items() if k not in ("name", "phase2", "amendments")
    }
    decision = json.loads((run / "decision.json").read_text())
    assert decision["env"]["id"] == LUCK_ID
    assert decision["outcome"]["kind"] == "park"
    assert decision["outcome"]["qualifying"] == {"ar": [], "flow": []}
    cells = {cell["id"]: cell for cell in decision["cells"]}
    assert set(cells) == {"c1_ar_t1_0", "c3_teacher_ode", "c5_teacher_sde_a0_5"}
    for cell_id, cell in cells.items():
        reads = cell["reads"]
        assert reads["median_group_std_progress_cm"] > 0.5, cell_id  # the draws do spread...
        assert 0.5 < reads["chaos_fraction"] < 2.0, cell_id  # ...but a 1e-3 nudge spreads them as much
        assert reads["median_divergence_tick"] == 1.0, cell_id
        assert cell["replay"]["diverged_fraction"] == 1.0, cell_id  # every replay lands elsewhere
    for report in workflow_tools.oracle_reports(run):
        assert json.loads(report.read_text())["pass"] is True, report
