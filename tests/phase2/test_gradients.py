"""The gradient job's pieces: which cells can be differentiated (and the words for those that cannot),
and the keyed CountSketch that maps a gradient to a few thousand coordinates.

Why: an ODE cell or a served arm has no gradient to read, and the page must say why rather than show a
number; the sketch must be a fixed map (same key, same coordinates) that keeps inner products in
expectation, or the noise scale would depend on the projection.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from grpo_probe.phase2.gradients import OWN_CHECKPOINT_FACTORY, count_sketch, unavailable_reason
from grpo_probe.prereg import load_prereg

REPO = Path(__file__).resolve().parents[2]
PLANE = load_prereg(REPO / "prereg/designs/controls/smooth_plane_smoke.yaml", require_lock=False)
CELLS = {c.id: c for c in PLANE.enabled_cells}


def test_the_ar_and_sde_cells_of_own_checkpoints_are_differentiated() -> None:
    for recipe in ({"checkpoint": "p.pt", "factory": None}, {"factory": OWN_CHECKPOINT_FACTORY}):
        assert unavailable_reason(CELLS["c1_ar_t1_0"], recipe) is None
        assert unavailable_reason(CELLS["c5_teacher_sde_a0_5"], recipe) is None


def test_an_ode_cell_a_served_arm_and_an_adapter_say_why_not() -> None:
    ode = unavailable_reason(CELLS["c3_teacher_ode"], {"factory": None})
    assert ode is not None and ode.startswith("not available: the flow_ode sampler has no per-step log-prob")
    served = unavailable_reason(CELLS["c1_ar_t1_0"], {"address": "ws://lab:8000", "factory": None})
    assert served is not None and "served by a policy server (ws://lab:8000)" in served
    adapter = unavailable_reason(CELLS["c5_teacher_sde_a0_5"], {"factory": "labpolicies.pi0:load"})
    assert adapter is not None and "bound through adapter 'labpolicies.pi0:load'" in adapter
    greedy = dataclasses.replace(CELLS["c1_ar_t1_0"], mode=PLANE.arms["ar"].anchor)
    assert unavailable_reason(greedy, {"factory": None}) is not None


def test_the_sketch_is_a_fixed_map_that_keeps_inner_products_in_expectation() -> None:
    first, second = count_sketch(5000, 256, 23), count_sketch(5000, 256, 23)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    assert not np.array_equal(first[0], count_sketch(5000, 256, 24)[0])
    rng = np.random.default_rng(0)
    x = rng.standard_normal(5000)
    y = 0.5 * x + rng.standard_normal(5000)
    found = []
    for key in range(200):
        buckets, signs = count_sketch(5000, 256, key)
        sx = np.bincount(buckets, weights=signs * x, minlength=256)
        sy = np.bincount(buckets, weights=signs * y, minlength=256)
        found.append((sx @ sy, sx @ sx))
    inner, norm = np.mean(found, axis=0)
    assert abs(inner / (x @ y) - 1.0) < 0.05 and abs(norm / (x @ x) - 1.0) < 0.05
