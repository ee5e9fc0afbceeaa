"""Signal or chaos: the decomposition by hand, and two environments whose answer is known.

Why: the chaos fraction decides whether a cell's spread is worth training on (the smoke design's signal
criterion reads it). Its formulas are checked on numbers small enough to compute by hand; then the whole
path (draws, keyed replays under a registered perturbation, the replay table, the reads) must say
"choices" for a scene whose reward follows the actions smoothly and "chaos" for one whose reward is luck
keyed by the exact bytes of the actions. A replay that reused fresh policy noise, or one whose
perturbation never reached the environment, fails one of the two.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from envs import chaos_envs
from envs.user_envs import factory_name, make_noise_policy
from grpo_probe.analysis.cells.chaos import (
    ChaosColumns,
    ChaosSummary,
    SeedChaos,
    chaos_statistics,
    seed_chaos,
    summarize_chaos,
)
from grpo_probe.analysis.cells.tables import RolloutTable, read_rollout_table
from grpo_probe.envs.registry import env_config, env_spec
from grpo_probe.policies.protocol import SamplingMode
from grpo_probe.prereg import load_prereg
from grpo_probe.prereg.replay import Perturbation, ReplaySection
from grpo_probe.rollout import GroupJob, PolicySource, write_shard
from grpo_probe.rollout.replay import read_replay_table, write_replay_shard

REPO = Path(__file__).resolve().parents[2]
NAN = float("nan")


@pytest.fixture(scope="module")
def analysis():  # -> AnalysisNumbers
    """The smoke design's registered analysis numbers (group_std_ddof 1, 200 bootstrap resamples)."""
    return load_prereg(REPO / "prereg" / "smoke.yaml", require_lock=False).analysis


# -- one seed, by hand --------------------------------------------------------------------------------
def test_seed_chaos_splits_one_group_into_across_and_within_draw_variance() -> None:
    draws = np.array([1.0, 2.0, 3.0, 6.0])  # mean 3, squared deviations 4 + 1 + 0 + 9 = 14
    replays = np.array([[1.0, 1.5], [2.0, 2.0], [3.0, 5.0], [6.0, 4.0]])  # row variances 1/8, 0, 2, 2
    seed = seed_chaos(draws, replays, 7, ddof=1, divergence_ticks=[3, NAN], contact_ticks=(1, 2))
    assert seed.seed == 7
    assert seed.group_var == pytest.approx(14 / 3, rel=1e-15)
    assert seed.replay_var == pytest.approx((0.125 + 0.0 + 2.0 + 2.0) / 4, rel=1e-15)
    assert seed.group_std_cm == pytest.approx(math.sqrt(14 / 3), rel=1e-15)
    assert seed.replay_std_cm == pytest.approx(math.sqrt(1.03125), rel=1e-15)
    assert seed.choice_std_cm == pytest.approx(math.sqrt(14 / 3 - 1.03125), rel=1e-15)
    # replay 1 ranks the draws as they are (rho 1); replay 2 swaps the top two: 1 - 6 * 2 / (4 * 15)
    assert seed.spearman == pytest.approx((1.0, 0.8), rel=1e-12)
    assert seed.divergence_ticks[0] == 3.0 and math.isnan(seed.divergence_ticks[1])
    assert seed.contact_ticks == (1.0, 2.0)
    # the across-draw variance takes the registered ddof; the within-draw variance is ddof 1 always
    biased = seed_chaos(draws, replays, 7, ddof=0)
    assert biased.group_var == pytest.approx(14 / 4, rel=1e-15)
    assert biased.replay_var == seed.replay_var


def test_the_choice_std_is_zero_when_the_replays_spread_more_than_the_draws() -> None:
    seed = seed_chaos(np.array([0.0, 0.1]), np.array([[0.0, 2.0], [0.1, -2.0]]), 3, ddof=1)
    assert seed.group_var == pytest.approx(0.005, rel=1e-12)
    assert seed.replay_var == pytest.approx((2.0 + 2.1**2 / 2) / 2, rel=1e-12)
    assert seed.choice_std_cm == 0.0
    assert seed.spearman == pytest.approx((1.0, -1.0), rel=1e-12)


def test_a_constant_side_has_no_rank_correlation() -> None:
    constant_draws = seed_chaos(np.array([5.0, 5.0, 5.0]), np.array([[5, 6], [5, 7], [5, 8.0]]), 1, 1)
    assert all(math.isnan(r) for r in constant_draws.spearman)
    assert constant_draws.group_var == 0.0 and constant_draws.choice_std_cm == 0.0
    constant_replay = seed_chaos(np.array([1.0, 2.0, 3.0]), np.array([[4, 1], [4, 2], [4, 3.0]]), 1, 1)
    assert math.isnan(constant_replay.spearman[0]) and constant_replay.spearman[1] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "replays",
    [np.ones((3, 1)), np.ones((2, 2)), np.ones(3)],
    ids=["one-replay", "draws-missing", "flat"],
)
def test_replays_of_the_wrong_shape_are_refused(replays: np.ndarray) -> None:
    with pytest.raises(ValueError, match=r"seed 9: need \[K=3, R >= 2\] replay rewards, got shape"):
        seed_chaos(np.array([1.0, 2.0, 3.0]), replays, 9, ddof=1)


# -- the cell's reads, by hand ------------------------------------------------------------------------
SEEDS = (
    SeedChaos(1, 4.0, 1.0, (0.5, 1.0), (2.0, NAN), (1.0, 3.0)),
    SeedChaos(2, 9.0, 0.0, (NAN, 0.2), (NAN, NAN), (NAN, 4.0)),
    SeedChaos(3, 1.0, 3.0, (0.9, -0.1), (5.0, 7.0), (2.0, 2.0)),
)


def test_chaos_statistics_pool_the_variances_and_take_medians_of_the_rest() -> None:
    stats = chaos_statistics(ChaosColumns.of(SEEDS), np.arange(3))
    assert stats["chaos_fraction"] == pytest.approx((1 + 0 + 3) / (4 + 9 + 1), rel=1e-15)
    assert stats["replay_std_cm"] == pytest.approx(math.sqrt(4 / 3), rel=1e-15)
    # choice stds: sqrt(4 - 1), sqrt(9 - 0), and 0 for the seed whose replays spread more
    assert stats["median_choice_std_cm"] == pytest.approx(math.sqrt(3), rel=1e-15)
    assert stats["rank_stability"] == 0.5  # median of 0.5, 1.0, 0.2, 0.9, -0.1 (NaN left out)
    assert stats["median_divergence_tick"] == 5.0  # of 2, 5, 7
    assert stats["median_first_contact_tick"] == 2.0  # of 1, 3, 4, 2, 2


def test_seeds_without_replays_are_nan_rows_the_reads_ignore() -> None:
    placed = ChaosColumns.of(SEEDS, all_seeds=(1, 99, 2, 3))
    assert math.isnan(placed.group_var[1]) and math.isnan(placed.replay_var[1])
    assert np.isnan(placed.spearman[1]).all() and placed.spearman.shape == (4, 2)
    with_gap = chaos_statistics(placed, np.arange(4))
    without = chaos_statistics(ChaosColumns.of(SEEDS), np.arange(3))
    assert with_gap.keys() == without.keys()
    for read, value in without.items():
        assert np.array_equal(with_gap[read], value, equal_nan=True), read


def test_a_resample_index_gives_one_read_per_row() -> None:
    """Bootstrap-shaped [B, n] positions; a row of the unreplayed seed alone reads NaN."""
    placed = ChaosColumns.of(SEEDS, all_seeds=(1, 99, 2, 3))
    stats = chaos_statistics(placed, np.array([[0, 0, 2, 2], [1, 1, 1, 1], [3, 3, 3, 3]]))
    assert stats["chaos_fraction"].shape == (3,)
    assert stats["chaos_fraction"][0] == pytest.approx((1 + 1 + 0 + 0) / (4 + 4 + 9 + 9), rel=1e-15)
    assert stats["replay_std_cm"][0] == pytest.approx(math.sqrt(2 / 4), rel=1e-15)
    assert stats["median_choice_std_cm"][0] == pytest.approx((math.sqrt(3) + 3) / 2, rel=1e-15)
    assert stats["rank_stability"][0] == 0.5  # of 0.5, 1.0, 0.5, 1.0, 0.2, 0.2
    assert all(math.isnan(stats[read][1]) for read in stats)
    assert stats["chaos_fraction"][2] == 3.0  # replays spreading more than the draws: above 1
    assert stats["replay_std_cm"][2] == pytest.approx(math.sqrt(3), rel=1e-15)
    assert stats["median_choice_std_cm"][2] == 0.0
    assert stats["rank_stability"][2] == pytest.approx(0.4, rel=1e-12)


def test_draws_without_spread_leave_the_chaos_fraction_undefined() -> None:
    flat = (SeedChaos(5, 0.0, 0.0, (NAN, NAN)), SeedChaos(6, 0.0, 0.5, (NAN, NAN)))
    stats = chaos_statistics(ChaosColumns.of(flat), np.arange(2))
    assert math.isnan(stats["chaos_fraction"]) and math.isnan(stats["rank_stability"])
    assert stats["replay_std_cm"] == pytest.approx(math.sqrt(0.25), rel=1e-15)
    assert stats["median_choice_std_cm"] == 0.0


# -- summarize_chaos on tables built by hand ----------------------------------------------------------
PROBE = {10: [1.0, 4.0, 7.0], 11: [2.0, 2.0, 2.0], 12: [0.0, -3.0, 3.0]}
"""progress_final_cm of draws 0..2 of each seed."""
REPLAYS = {
    10: [[1.5, 0.5], [4.0, 4.5], [7.0, 9.0]],
    11: [[2.1, 1.9], [2.0, 2.0], [3.0, 1.0]],
    12: [[0.2, 4.0], [-3.0, -2.0], [3.0, 3.5]],
}
"""Per seed and draw, the replay under perturbation 0 (action) and under perturbation 1 (state)."""


def _hand_tables() -> tuple[RolloutTable, pa.Table]:
    seeds = [s for s in PROBE for _ in range(3)]
    progress = np.array([v for s in PROBE for v in PROBE[s]])
    probe = RolloutTable(
        path="probe.parquet",
        cell="c",
        arm="a",
        head="flow",
        seed=np.array(seeds, dtype=np.int64),
        draw=np.array([0, 1, 2] * 3, dtype=np.int64),
        progress_final_cm=progress,
        best_point_cm=np.maximum(progress, 0.0),
        contact=np.ones(9, dtype=bool),
        columns={},
        traces={},
        replan_entropy_mean=None,
        replan_n_tokens=None,
    )
    rows = []
    for seed, draws in REPLAYS.items():
        for draw, (action, state) in enumerate(draws):
            for slot, (kind, scale, value) in enumerate((("action", 1e-3, action), ("state", 1e-4, state))):
                rows.append(
                    {
                        "seed": seed,
                        "draw": draw,
                        "perturbation_index": slot,
                        "perturbation": kind,
                        "perturbation_scale": scale,
                        "replay": 1,
                        "progress_final_cm": value,
                        "divergence_tick": None if value == PROBE[seed][draw] else 4 + draw + slot,
                        "first_contact_tick": 2 if seed != 11 else None,
                    }
                )
    random.Random(3).shuffle(rows)  # the reads must not depend on the table's row order
    return probe, pa.Table.from_pylist(rows)


def test_summarize_chaos_reads_the_hand_computed_decomposition(analysis) -> None:
    probe, replays = _hand_tables()
    summary = summarize_chaos(probe, replays, analysis, "c")
    assert [s.seed for s in summary.seeds] == [10, 11, 12] and summary.replays == 2
    # seed 10: V_a 9, V_w (1/2 + 1/8 + 2) / 3; seed 11: V_a 0; seed 12: V_a 9, V_w (7.22 + 1/2 + 1/8) / 3
    v_w = (2.625 / 3, 2.02 / 3, 7.845 / 3)
    assert [s.group_var for s in summary.seeds] == pytest.approx([9.0, 0.0, 9.0], rel=1e-12)
    assert [s.replay_var for s in summary.seeds] == pytest.approx(v_w, rel=1e-12)
    assert summary.seeds[0].spearman == pytest.approx((1.0, 1.0))
    assert all(math.isnan(r) for r in summary.seeds[1].spearman)
    assert summary.seeds[2].spearman == pytest.approx((1.0, 0.5))  # 1 - 6 * 2 / (3 * 8)
    assert summary.chaos_fraction.value == pytest.approx(sum(v_w) / 18.0, rel=1e-12)
    assert summary.replay_std_cm.value == pytest.approx(math.sqrt(sum(v_w) / 3), rel=1e-12)
    assert summary.median_choice_std_cm.value == pytest.approx(math.sqrt(9.0 - v_w[2]), rel=1e-12)
    assert summary.rank_stability.value == 1.0  # of 1, 1, 1, 0.5
    assert summary.median_group_std_cm == 3.0  # of 3, 0, 3
    # ticks in (draw, perturbation) order; a replay equal to its draw never diverged
    ticks = (4.0, 5.0, NAN, 6.0, NAN, 7.0)
    assert np.array_equal(summary.seeds[0].divergence_ticks, ticks, equal_nan=True)
    assert summary.diverged_fraction == pytest.approx(12 / 18)
    assert summary.median_first_contact_tick == 2.0
    action, state = summary.perturbations
    assert (action.index, action.kind, action.scale, action.replays) == (0, "action", 1e-3, 9)
    assert (state.index, state.kind, state.scale, state.replays) == (1, "state", 1e-4, 9)
    assert action.median_abs_change_cm == 0.0  # |changes| 0.5, 0, 0, 0.1, 0, 1, 0.2, 0, 0
    assert state.median_abs_change_cm == 0.5  # 0.5, 0.5, 2, 0.1, 0, 1, 4, 1, 0.5
    for estimate in (summary.chaos_fraction, summary.replay_std_cm, summary.median_choice_std_cm):
        assert estimate.ci_low <= estimate.ci_high


def test_the_identity_index_reproduces_the_summarys_point_values(analysis) -> None:
    summary = summarize_chaos(*_hand_tables(), analysis, "c")
    full = chaos_statistics(ChaosColumns.of(summary.seeds), np.arange(len(summary.seeds)))
    for read in ("chaos_fraction", "replay_std_cm", "median_choice_std_cm", "rank_stability"):
        assert getattr(summary, read).value == float(full[read]), read
    assert summary.median_divergence_tick == float(full["median_divergence_tick"])
    assert summary.median_first_contact_tick == float(full["median_first_contact_tick"])


# -- two environments whose answer is known -----------------------------------------------------------
CHAOS_SEEDS = tuple(range(100, 112))
K = 6
"""12 seeds x K = 6 draws, each replayed twice: enough degrees of freedom that the luck plane's chaos
fraction (an F-like ratio around 1) stays well above the bar for any keying (0.68 at least over 40 run
keys), in about a quarter of a second per environment."""
ACTION = Perturbation("action", 1e-3)


def _section(*perturbations: Perturbation, replays_per_draw: int = 2) -> ReplaySection:
    return ReplaySection(replays_per_draw, CHAOS_SEEDS, perturbations, 1e-3, CHAOS_SEEDS[:1])


def _chaos_of(tmp_path: Path, factory, section: ReplaySection, analysis, **params) -> ChaosSummary:
    """Draws, then replays, of a chaos environment under a keyed noise policy, read as a cell."""
    config = env_config(factory_name(factory), params, "test_chaos: env")
    spec = env_spec(config)
    options = {"obs_dim": spec.obs_dim, "chunk_length": spec.chunk_length, "action_dims": spec.action_dims}
    source = PolicySource(factory=factory_name(make_noise_policy), options=options)
    job = GroupJob("arm_x", "cell_x", source, SamplingMode("flow_ode"), CHAOS_SEEDS, K, 5, config)
    shard = write_shard(job, tmp_path / "probe.parquet", show_progress=False)
    written = write_replay_shard(job, section, shard.path, tmp_path / "replays.parquet", show_progress=False)
    assert written.rows == len(CHAOS_SEEDS) * K * section.replays
    probe = read_rollout_table(shard.path, "cell_x", "arm_x", env=spec)
    return summarize_chaos(probe, read_replay_table(written.path, spec.episode_schema), analysis, "cell_x")


def test_a_reward_that_follows_the_actions_smoothly_is_choice_not_chaos(tmp_path: Path, analysis) -> None:
    summary = _chaos_of(tmp_path, chaos_envs.make_smooth_plane, _section(ACTION), analysis)
    assert len(summary.seeds) == len(CHAOS_SEEDS) and summary.replays == 2
    assert summary.median_group_std_cm > 0.5  # different policy noise: draws centimetres apart
    assert summary.chaos_fraction.value < 0.05
    assert summary.chaos_fraction.ci_high < 0.05
    assert summary.replay_std_cm.value < 0.01  # 1e-3 action noise moves the object ~1e-5 m
    assert summary.median_choice_std_cm.value > 0.99 * summary.median_group_std_cm
    assert summary.rank_stability.value > 0.9
    # and each replay stays with its own draw (the variance above is among the replays alone)
    (action,) = summary.perturbations
    assert action.median_abs_change_cm < 0.01
    assert summary.diverged_fraction == 0.0 and summary.median_divergence_tick is None


def test_a_reward_that_is_keyed_luck_is_chaos_not_choice(tmp_path: Path, analysis) -> None:
    summary = _chaos_of(tmp_path, chaos_envs.make_luck_plane, _section(ACTION), analysis)
    assert len(summary.seeds) == len(CHAOS_SEEDS) and summary.replays == 2
    assert summary.median_group_std_cm > 0.5  # the draws do spread...
    assert summary.chaos_fraction.value > 0.6  # ...but a 1e-3 nudge of the actions spreads them as much
    assert summary.median_choice_std_cm.value < 0.75 * summary.median_group_std_cm
    assert summary.rank_stability.value < 0.5
    # every replay lands elsewhere from its first perturbed tick on
    assert summary.diverged_fraction == 1.0 and summary.median_divergence_tick == 1.0


def test_zero_size_replays_of_the_luck_plane_are_their_draws(tmp_path: Path, analysis) -> None:
    """The control: the luck plane's chaos is the perturbation's, since the replays make the draws' own
    choices (the same policy keys) and, unperturbed, reproduce them bit for bit."""
    zero = _section(ACTION.zeroed())
    summary = _chaos_of(tmp_path, chaos_envs.make_luck_plane, zero, analysis)
    assert summary.median_group_std_cm > 0.5
    assert summary.chaos_fraction.value == 0.0 and summary.replay_std_cm.value == 0.0
    assert summary.median_choice_std_cm.value == summary.median_group_std_cm
    assert summary.diverged_fraction == 0.0


def test_a_spawn_shift_of_the_smooth_plane_is_no_chaos_either(tmp_path: Path, analysis) -> None:
    """The smoke design's pair of perturbations (once each), through the plane's perturb_state."""
    section = _section(ACTION, Perturbation("state", 1e-4), replays_per_draw=1)
    summary = _chaos_of(tmp_path, chaos_envs.make_smooth_plane, section, analysis, state_perturbation=True)
    assert summary.replays == 2
    assert summary.chaos_fraction.value < 0.05
    assert summary.median_choice_std_cm.value > 0.99 * summary.median_group_std_cm
    action, state = summary.perturbations
    assert (action.kind, state.kind, state.scale) == ("action", "state", 1e-4)
    # a 1e-4 m shift of the spawn changes progress by at most 1e-2 cm
    assert 0.0 < state.median_abs_change_cm <= 1e-2
    assert state.diverged_fraction == 0.0  # 1e-4 m is within divergence_m = 1e-3 m
