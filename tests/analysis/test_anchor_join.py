"""The join against anchors, guard-trip rates and AR entropy on hand-built tables."""

from __future__ import annotations

import pytest

from grpo_probe.analysis.cells.anchor_join import check_seeds_match, join_seeds, summarize_join
from grpo_probe.analysis.cells.entropy import entropy_summary
from grpo_probe.analysis.cells.guards import guard_rates
from grpo_probe.analysis.cells.tables import read_anchor_table, read_probe_table, read_rollout_table
from grpo_probe.envs.boat.spec import boat_spec

from .rollout_factory import anchor_rows, as_prereg, probe_rows, rollout_row, write_table


def _tables(tmp_path, probe, anchor):
    p = read_probe_table(write_table(tmp_path / "probe.parquet", probe), "c1", "ar_arm", "ar", ddof=1)
    a = read_anchor_table(write_table(tmp_path / "anchor.parquet", anchor), "ar_arm", "ar")
    return p, a


def test_competence_and_engagement_against_the_anchor_by_hand(tmp_path, prereg):
    """Seed 0: draws 1, 2, 3 (mean 2) vs anchor 1 -> +1; seed 1: draws 0, 0, 0 vs anchor 2 -> -2; mean -0.5.
    Engagement: seed 0 draws contact T, F, F (1/3) vs anchor T; seed 1 none vs anchor F.
    Sampled rate mean (1/3 + 0) / 2 = 1/6, anchor 1/2, delta mean ((1/3 - 1) + 0) / 2 = -1/3."""
    probe = probe_rows("c1", "ar_arm", "ar", {0: [1.0, 2.0, 3.0], 1: [0.0, 0.0, 0.0]})
    probe[0]["contact"] = True
    anchor = anchor_rows("ar_arm", "ar", {0: 1.0}, contact=True) + anchor_rows("ar_arm", "ar", {1: 2.0})
    p, a = _tables(tmp_path, probe, anchor)
    joins = join_seeds(p, a)
    assert [(j.seed, j.progress_delta_cm, j.anchor_engaged) for j in joins] == [
        (0, 1.0, True),
        (1, -2.0, False),
    ]
    assert joins[0].sampled_engagement_rate == 1 / 3
    summary = summarize_join(joins, as_prereg(prereg).analysis, "c1")
    assert summary.mean_progress_delta_cm.value == -0.5
    assert summary.sampled_engagement_rate == pytest.approx(1 / 6, abs=1e-15)
    assert summary.anchor_engagement_rate == 0.5
    assert summary.engagement_delta.value == pytest.approx(-1 / 3, abs=1e-15)
    assert -2.0 <= summary.mean_progress_delta_cm.ci_low <= summary.mean_progress_delta_cm.ci_high <= 1.0


def test_seeds_missing_from_the_anchor_are_refused_naming_both_tables(tmp_path):
    p, a = _tables(
        tmp_path,
        probe_rows("c1", "ar_arm", "ar", {0: [0.0, 1.0], 5: [0.0, 1.0]}),
        anchor_rows("ar_arm", "ar", {0: 0.0, 6: 0.0}),
    )
    with pytest.raises(
        ValueError,
        match=r"anchor\.parquet: column seed: cell c1 \(.*probe\.parquet\).*probe table \[5\], "
        r"only in the anchor table \[6\]",
    ):
        check_seeds_match(p, a, "c1")


def test_anchor_rows_of_another_arm_are_refused_naming_table_and_column(tmp_path):
    path = write_table(tmp_path / "anchor.parquet", anchor_rows("teacher", "flow", {0: 0.0}))
    with pytest.raises(ValueError, match=r"anchor\.parquet: column arm must be 'ar_arm' in every row"):
        read_anchor_table(path, "ar_arm", "ar")


def test_anchor_rows_must_be_draw_zero(tmp_path):
    path = write_table(tmp_path / "anchor.parquet", [rollout_row("anchor", "ar_arm", "ar", 0, 1, 0.0)])
    with pytest.raises(ValueError, match=r"anchor\.parquet: column draw must be 0 in anchor rows"):
        read_anchor_table(path, "ar_arm", "ar")


def test_duplicate_anchor_seed_is_refused(tmp_path):
    path = write_table(tmp_path / "anchor.parquet", anchor_rows("ar_arm", "ar", {0: 0.0}) * 2)
    with pytest.raises(ValueError, match=r"\(seed=0, draw=0\) appears twice"):
        read_anchor_table(path, "ar_arm", "ar")


def test_guard_trip_rates_by_hand_with_thresholds_strict(tmp_path, prereg):
    """Four sampled episodes: strikes [0, 1, 2, 0] -> 2/4; knocked off [F, T, F, F] -> 1/4; upright
    [T, T, F, T] -> not upright 1/4; progress [-2.0, -2.5, 0, 1] -> away tail (< -2.0 strictly) 1/4;
    speed [0.6, 0.7, 0.1, 0.61] -> swat (> 0.6 strictly) 2/4. Anchors: one strike of two."""
    probe = probe_rows("c1", "ar_arm", "ar", {0: [-2.0, -2.5], 1: [0.0, 1.0]})
    for row, strikes, knocked, upright, speed in zip(
        probe,
        [0, 1, 2, 0],
        [False, True, False, False],
        [True, True, False, True],
        [0.6, 0.7, 0.1, 0.61],
        strict=True,
    ):
        row.update(
            reset_strikes=strikes, knocked_off=knocked, final_upright=upright, max_boat_speed_m_s=speed
        )
    anchor = anchor_rows("ar_arm", "ar", {0: 0.0}, reset_strikes=3) + anchor_rows("ar_arm", "ar", {1: 0.0})
    p, a = _tables(tmp_path, probe, anchor)
    rates = {r.guard: r for r in guard_rates(p, a, as_prereg(prereg).analysis)}
    assert list(rates) == list(boat_spec().guard_names)  # the environment's declarations, in order
    expected = {
        "reset_strike": (2, 4),
        "knocked_off": (1, 4),
        "not_upright": (1, 4),
        "away_tail": (1, 4),
        "swat": (2, 4),
    }
    assert {g: (rates[g].sampled_count, rates[g].sampled_n) for g in expected} == expected
    assert rates["reset_strike"].anchor_rate == 0.5
    assert rates["swat"].anchor_rate == 0.0


def test_ar_entropy_distribution_and_tokens_per_chunk_by_hand(tmp_path):
    """Entropies [0.5, 0.7] and [0.9] (the second episode ended after one replan): values 0.5, 0.7, 0.9,
    mean 0.7, per replan index [(0.5 + 0.9) / 2, 0.7]; tokens [20, 22] and [30]: mean 24, min 20, max 30."""
    probe = probe_rows("c1", "ar_arm", "ar", {0: [0.0, 1.0]})
    probe[0].update(replan_entropy_mean=[0.5, 0.7], replan_n_tokens=[20, 22])
    probe[1].update(replan_entropy_mean=[0.9], replan_n_tokens=[30])
    p, _ = _tables(tmp_path, probe, anchor_rows("ar_arm", "ar", {0: 0.0}))
    s = entropy_summary(p)
    assert s is not None
    assert (s.n_replans, s.mean, s.median) == (3, pytest.approx(0.7, abs=1e-15), 0.7)
    assert s.per_replan_index_mean == (pytest.approx(0.7, abs=1e-15), 0.7)
    assert (s.mean_tokens_per_chunk, s.min_tokens_per_chunk, s.max_tokens_per_chunk) == (24.0, 20, 30)
    # p10 by linear interpolation over the sorted values [0.5, 0.7, 0.9]: position 0.2 -> 0.5 + 0.2 * 0.2
    assert s.p10 == pytest.approx(0.54, abs=1e-15)


def test_flow_tables_have_no_entropy_read(tmp_path):
    path = write_table(tmp_path / "f.parquet", probe_rows("c3", "teacher", "flow", {0: [0.0, 1.0]}))
    assert entropy_summary(read_probe_table(path, "c3", "teacher", "flow", ddof=1)) is None


def test_nan_entropy_in_an_ar_table_is_refused(tmp_path):
    probe = probe_rows("c1", "ar_arm", "ar", {0: [0.0, 1.0]})
    probe[1]["replan_entropy_mean"] = [0.5, float("nan")]
    path = write_table(tmp_path / "p.parquet", probe)
    with pytest.raises(
        ValueError, match=r"p\.parquet: column replan_entropy_mean holds a non-finite value at row 1"
    ):
        read_probe_table(path, "c1", "ar_arm", "ar", ddof=1)


def test_missing_column_is_refused_naming_table_and_column(tmp_path):
    path = write_table(
        tmp_path / "p.parquet", probe_rows("c1", "ar_arm", "ar", {0: [0.0, 1.0]}), drop=["best_point_cm"]
    )
    with pytest.raises(ValueError, match=r"p\.parquet: missing column\(s\) best_point_cm \("):
        read_probe_table(path, "c1", "ar_arm", "ar", ddof=1)


def test_probe_rows_of_another_cell_are_refused(tmp_path):
    path = write_table(tmp_path / "p.parquet", probe_rows("c2", "ar_arm", "ar", {0: [0.0, 1.0]}))
    with pytest.raises(
        ValueError, match=r"p\.parquet: column cell must be 'c1' in every row, found \['c2'\]"
    ):
        read_probe_table(path, "c1", "ar_arm", "ar", ddof=1)


def test_rollout_table_reader_takes_cell_arm_and_head_from_the_table(tmp_path):
    path = write_table(tmp_path / "p.parquet", probe_rows("c3", "teacher", "flow", {2: [0.0, 1.0]}))
    table = read_rollout_table(path)
    assert (table.cell, table.arm, table.head, table.replan_entropy_mean) == ("c3", "teacher", "flow", None)
    mixed = probe_rows("c3", "teacher", "flow", {2: [0.0]}) + probe_rows("c3", "short", "flow", {3: [0.0]})
    with pytest.raises(
        ValueError, match=r"column arm must be one value in every row, found \['short', 'teacher'\]"
    ):
        read_rollout_table(write_table(tmp_path / "m.parquet", mixed))
