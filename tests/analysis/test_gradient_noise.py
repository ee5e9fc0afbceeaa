"""The gradient reads on hand-built Gram matrices with a known answer.

Per-group gradients h_s = G + noise with noise ~ N(0, sigma^2 I_d): tr(Sigma_h) = d sigma^2, so the
noise scale in episodes is K d sigma^2 / |G|^2, and the read's percentile interval over seeds must cover
it (in most of many simulated designs, not only in one). Two halves of noise-free seeds point the same
way (cosine 1); a cell with no mean gradient has an unbounded noise scale, whose interval keeps +inf as
a value. A design without the gradient reads has none of them, in its reads or its reads table.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grpo_probe.analysis.cells.gradient_noise import (
    GRADIENT_FORMAT,
    GradientColumns,
    gradient_record,
    half_split_cosine,
    noise_scale,
    read_gradient_file,
)
from grpo_probe.analysis.cells.reads import cell_read_names, cell_reads, read_rows
from grpo_probe.analysis.cells.seed_columns import SeedColumns
from grpo_probe.analysis.page.gradient_page import gradient_section
from grpo_probe.phase2 import gradients as phase2_gradients
from grpo_probe.prereg import load_prereg
from grpo_probe.prereg.rule import AnalysisNumbers

REPO = Path(__file__).resolve().parents[2]
SMOKE = load_prereg(REPO / "prereg" / "smoke.yaml", require_lock=False)
CELL = next(c for c in SMOKE.enabled_cells if c.head == "flow")
K = 4


def _gradients(rng: np.random.Generator, seeds: int, d: int, g_norm: float, sigma: float) -> np.ndarray:
    """Per-group gradients h_s = G + N(0, sigma^2 I_d), |G| = g_norm, [seeds, d]."""
    direction = rng.standard_normal(d)
    mean = g_norm * direction / np.linalg.norm(direction)
    return mean + sigma * rng.standard_normal((seeds, d))


def _columns(h: np.ndarray, available: bool = True) -> GradientColumns:
    seeds = tuple(range(1000, 1000 + h.shape[0]))
    gram = h @ h.T
    episodes = np.kron(gram, np.ones((K, K)))
    return GradientColumns(
        "g.json", available, None, K, seeds, gram, episodes, {"sketch": {"dims": h.shape[1]}}
    )


def _seed_columns(gradient: GradientColumns | None, n: int) -> SeedColumns:
    zeros = np.zeros(n)
    return SeedColumns(
        CELL, K, zeros + 1.0, zeros, zeros + 1, zeros, zeros, zeros, {}, {}, None, None, gradient=gradient
    )


def test_the_noise_scale_estimates_k_tr_sigma_over_g_squared_and_its_interval_covers_it() -> None:
    d, sigma, g_norm, seeds = 64, 0.5, 2.0, 60
    truth = K * d * sigma**2 / g_norm**2  # 16 episodes
    rng = np.random.default_rng(7)
    analysis = SMOKE.analysis
    covered, estimates = 0, []
    for _ in range(40):
        h = _gradients(rng, seeds, d, g_norm, sigma)
        reads = cell_reads(_seed_columns(_columns(h), seeds), analysis)
        low, high = reads["gradient_noise_scale_ci_low"], reads["gradient_noise_scale_ci_high"]
        estimates.append(reads["gradient_noise_scale"])
        covered += low is not None and high is not None and low <= truth <= high
    assert abs(np.median(estimates) / truth - 1.0) < 0.15
    assert covered >= 32  # a 95 % interval covers the truth in most of 40 designs


def test_the_estimator_is_the_unbiased_one_of_mccandlish_appendix_a() -> None:
    h = np.array([[1.0, 0.0], [3.0, 2.0], [2.0, 1.0]])
    n = 3
    mean = h.mean(axis=0)
    tr_sigma = ((h - mean) ** 2).sum() / (n - 1)  # the per-example sample variance summed over dims
    g2 = mean @ mean - tr_sigma / n
    assert noise_scale(h @ h.T, np.arange(n), K) == pytest.approx(K * tr_sigma / g2, rel=1e-12)


def test_halves_of_noise_free_seeds_agree_and_pure_noise_does_not() -> None:
    rng = np.random.default_rng(3)
    same = _gradients(rng, 20, 32, 1.0, 0.0)
    assert half_split_cosine(same @ same.T, np.arange(20)) == pytest.approx(1.0)
    noise = _gradients(rng, 200, 256, 0.0, 1.0)
    assert abs(float(half_split_cosine(noise @ noise.T, np.arange(200)))) < 0.1


def test_no_mean_gradient_is_an_unbounded_noise_scale_with_an_interval() -> None:
    rng = np.random.default_rng(11)
    h = _gradients(rng, 12, 64, 0.0, 1.0)
    gradient = _columns(h)
    while not np.isinf(noise_scale(gradient.group_gram, np.arange(12), K)):
        h = _gradients(rng, 12, 64, 0.0, 1.0)
        gradient = _columns(h)
    reads = cell_reads(_seed_columns(gradient, 12), SMOKE.analysis)
    assert reads["gradient_noise_scale"] is None and reads["gradient_noise_scale_ci_high"] is None
    record = {"id": "c", "n_seeds": 12, "reads": reads, "gradient": gradient_record(gradient)}
    assert record["gradient"]["noise_scale_unbounded"] is True
    section = gradient_section({"cells": [record]})
    assert section is not None and "| unbounded [" in section and "no mean gradient shows" in section


def test_a_cell_without_gradients_has_undefined_reads_and_a_design_without_them_has_none() -> None:
    unavailable = GradientColumns(
        "g.json", False, "not available: why", K, (1, 2), np.zeros((0, 0)), np.zeros((0, 0)), {}
    )
    reads = cell_reads(_seed_columns(unavailable, 2), SMOKE.analysis)
    assert reads["gradient_noise_scale"] is None and reads["gradient_half_cosine"] is None
    plain = _seed_columns(None, 4)
    assert not {"gradient_noise_scale", "gradient_half_cosine"} & set(cell_read_names(plain))
    assert not {"gradient_noise_scale", "gradient_half_cosine"} & {r.read for r in read_rows(())}
    assert "gradient_reads" not in AnalysisNumbers.to_dict(SMOKE.analysis)


def test_the_file_round_trips_and_is_checked_against_the_cell(tmp_path: Path) -> None:
    assert phase2_gradients.GRADIENT_FORMAT == GRADIENT_FORMAT  # the writer's format is the reader's
    rng = np.random.default_rng(5)
    g = rng.standard_normal((2 * K, 16))
    record = {
        "format": GRADIENT_FORMAT,
        "cell": "c5",
        "available": True,
        "reason": None,
        "sketch": {"dims": 16},
        "episodes": [{"seed": s, "draw": k} for s in (7, 9) for k in range(K)],
        "episode_gram": (g @ g.T).tolist(),
    }
    path = tmp_path / "c5.json"
    phase2_gradients.write_gradient_file(record, path)
    first = path.read_bytes()
    phase2_gradients.write_gradient_file(json.loads(first), path)
    assert path.read_bytes() == first
    read = read_gradient_file(path, "c5", [7, 9], K)
    h = g.reshape(2, K, 16).mean(axis=1)
    np.testing.assert_allclose(read.group_gram, h @ h.T, rtol=1e-12)
    with pytest.raises(ValueError, match=r"c5.json: field 'episodes'"):
        read_gradient_file(path, "c5", [7, 8], K)
    with pytest.raises(ValueError, match=r"field 'cell' is 'c5'"):
        read_gradient_file(path, "c1", [7, 9], K)
