"""Group statistics on hand-built tables; expected values worked out by hand in each test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grpo_probe.analysis.cells.bootstrap import bootstrap_generator, percentile_bootstrap
from grpo_probe.analysis.cells.group_stats import median_seed, seed_groups, summarize_groups, within_group_std
from grpo_probe.analysis.cells.tables import read_probe_table

from .rollout_factory import as_prereg, probe_rows, write_table


def _spec(prereg, **analysis):
    prereg["analysis"].update(analysis)
    return as_prereg(prereg).analysis


def _probe(tmp_path, progress_by_seed, **overrides):
    path = write_table(
        tmp_path / "c1.parquet", probe_rows("c1", "ar_arm", "ar", progress_by_seed, **overrides)
    )
    return read_probe_table(path, "c1", "ar_arm", "ar", ddof=1)


def test_within_group_std_uses_the_registered_ddof():
    # [0, 1, 2, 3]: mean 1.5, squared deviations sum to 2.25 + 0.25 + 0.25 + 2.25 = 5
    assert within_group_std([0.0, 1.0, 2.0, 3.0], ddof=1) == math.sqrt(5 / 3)
    assert within_group_std([0.0, 1.0, 2.0, 3.0], ddof=0) == math.sqrt(5 / 4)


def test_within_group_std_refuses_a_group_no_larger_than_ddof():
    with pytest.raises(ValueError, match="ddof=1"):
        within_group_std([1.0], ddof=1)


def test_single_nondegenerate_seed_gives_fraction_one_third(tmp_path, prereg):
    """Seed 0 is constant (std 0), seed 1 = [0, 0, 0, 0.2] has std 0.1, seed 2 = [0, 0.04, 0, 0.04] has
    std sqrt(4 * 0.02^2 / 3) = 0.0231 <= 0.05; only seed 1 is non-degenerate."""
    spec = _spec(prereg)
    table = _probe(tmp_path, {0: [1.0] * 4, 1: [0.0, 0.0, 0.0, 0.2], 2: [0.0, 0.04, 0.0, 0.04]})
    groups = seed_groups(table, spec)
    assert [g.seed for g in groups] == [0, 1, 2]
    assert [g.nondegenerate for g in groups] == [False, True, False]
    assert groups[1].std_progress_cm == pytest.approx(0.1, abs=1e-15)
    assert groups[2].std_progress_cm == pytest.approx(math.sqrt(4 * 0.02**2 / 3), abs=1e-15)
    summary = summarize_groups(groups, spec, "c1")
    assert (summary.nondegenerate_count, summary.n_seeds, summary.k) == (1, 3, 4)
    assert summary.nondegenerate_fraction == 1 / 3
    # median of {0, 0.1, 0.0231} is the middle value 0.0231
    assert summary.median_std_progress_cm.value == groups[2].std_progress_cm


def test_group_whose_std_equals_the_tolerance_is_degenerate(tmp_path, prereg):
    table = _probe(tmp_path, {0: [0.0, 0.3], 1: [0.0, 0.5]})
    std = within_group_std([0.0, 0.3], ddof=1)
    groups = seed_groups(table, _spec(prereg, degenerate_tol_cm=std))
    assert [g.nondegenerate for g in groups] == [False, True]


def test_best_point_std_is_taken_over_the_same_group(tmp_path, prereg):
    # best_point_cm = max(progress, 0) in the factory: [-1, 0, 1, 2] -> [0, 0, 1, 2], mean 0.75,
    # squared deviations 0.5625 + 0.5625 + 0.0625 + 1.5625 = 2.75
    groups = seed_groups(_probe(tmp_path, {7: [-1.0, 0.0, 1.0, 2.0]}), _spec(prereg))
    assert groups[0].std_best_point_cm == math.sqrt(2.75 / 3)
    assert groups[0].mean_progress_cm == 0.5


def test_median_over_an_even_number_of_seeds_with_a_tie_in_the_middle(tmp_path, prereg):
    # group stds 0.1, 0.3, 0.3, 0.5 (pairs [0, x] have std x / sqrt(2) at ddof 1)
    r2 = math.sqrt(2.0)
    table = _probe(tmp_path, {0: [0.0, 0.5 * r2], 1: [0.0, 0.3 * r2], 2: [0.0, 0.1 * r2], 3: [0.0, 0.3 * r2]})
    groups = seed_groups(table, _spec(prereg))
    summary = summarize_groups(groups, _spec(prereg), "c1")
    assert summary.median_std_progress_cm.value == pytest.approx(0.3, abs=1e-15)
    # median seed: sorted by (std, seed) -> 2, 1, 3, 0; index (4 - 1) // 2 = 1 -> seed 1 (tie broken by seed)
    assert median_seed(groups) == 1


def test_one_seed_gives_a_zero_width_interval(tmp_path, prereg):
    groups = seed_groups(_probe(tmp_path, {3: [0.0, 1.0, 2.0]}), _spec(prereg))
    est = summarize_groups(groups, _spec(prereg), "c1").median_std_progress_cm
    assert est.value == est.ci_low == est.ci_high == 1.0


def test_percentile_bootstrap_interval_lies_within_the_values_and_brackets_the_median():
    values = [0.1, 0.4, 0.2, 0.9, 0.3, 0.5, 0.25]
    est = percentile_bootstrap(values, "median", 500, 0.95, bootstrap_generator(1, "c1", "x"))
    assert est.value == 0.3
    assert min(values) <= est.ci_low <= est.value <= est.ci_high <= max(values)


def test_bootstrap_stream_is_keyed_by_cell_and_read():
    values = np.linspace(0.0, 1.0, 9) ** 2
    one = percentile_bootstrap(values, "mean", 300, 0.9, bootstrap_generator(5, "c1", "read"))
    same = percentile_bootstrap(values, "mean", 300, 0.9, bootstrap_generator(5, "c1", "read"))
    other_cell = percentile_bootstrap(values, "mean", 300, 0.9, bootstrap_generator(5, "c2", "read"))
    assert one == same
    assert (one.ci_low, one.ci_high) != (other_cell.ci_low, other_cell.ci_high)
    assert one.value == other_cell.value == float(np.mean(values))


def test_bootstrap_of_constant_values_is_the_constant():
    est = percentile_bootstrap([0.7] * 5, "median", 100, 0.95, bootstrap_generator(0, "c", "r"))
    assert (est.value, est.ci_low, est.ci_high) == (0.7, 0.7, 0.7)


def test_nan_progress_is_refused_naming_table_column_and_row(tmp_path):
    rows = probe_rows("c1", "ar_arm", "ar", {0: [0.0, 1.0], 4: [0.0, 2.0]})
    rows[3]["progress_final_cm"] = float("nan")
    path = write_table(tmp_path / "nan.parquet", rows)
    with pytest.raises(
        ValueError, match=r"nan\.parquet: column progress_final_cm is nan at row 3 \(seed=4, draw=1\)"
    ):
        read_probe_table(path, "c1", "ar_arm", "ar", ddof=1)


def test_null_metric_is_refused_naming_table_and_column(tmp_path):
    rows = probe_rows("c1", "ar_arm", "ar", {0: [0.0, 1.0]})
    rows[0]["contact"] = None
    path = write_table(tmp_path / "null.parquet", rows)
    with pytest.raises(ValueError, match=r"null\.parquet: column contact is null at row 0"):
        read_probe_table(path, "c1", "ar_arm", "ar", ddof=1)


def test_groups_of_unequal_size_are_refused(tmp_path):
    path = write_table(
        tmp_path / "t.parquet", probe_rows("c1", "ar_arm", "ar", {0: [0.0, 1.0, 2.0], 1: [0.0, 1.0]})
    )
    with pytest.raises(
        ValueError, match=r"t\.parquet: cell c1: column draw: seed 1 has 2 draws but seed 0 has 3"
    ):
        read_probe_table(path, "c1", "ar_arm", "ar", ddof=1)


def test_groups_of_one_draw_are_refused_at_ddof_one(tmp_path):
    path = write_table(tmp_path / "t.parquet", probe_rows("c1", "ar_arm", "ar", {0: [0.0], 1: [1.0]}))
    with pytest.raises(ValueError, match="K=1 draws have no within-group std at ddof=1"):
        read_probe_table(path, "c1", "ar_arm", "ar", ddof=1)


def test_row_order_of_the_table_does_not_change_the_groups(tmp_path, prereg):
    rows = probe_rows("c1", "ar_arm", "ar", {0: [0.0, 0.3, 0.1], 1: [1.0, -1.0, 0.5], 2: [0.2, 0.2, 0.9]})
    a = read_probe_table(write_table(tmp_path / "a.parquet", rows), "c1", "ar_arm", "ar", ddof=1)
    b = read_probe_table(write_table(tmp_path / "b.parquet", rows[::-1]), "c1", "ar_arm", "ar", ddof=1)
    spec = _spec(prereg)
    assert seed_groups(a, spec) == seed_groups(b, spec)
