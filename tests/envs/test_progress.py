"""The progress reward is one function, and every environment's record is built from it.

Why: the reads compare ``progress_final_cm`` across scenes, so the boat, the Gymnasium adapter and the
planes must compute it with the same arithmetic; a copy of it in an environment's module could drift.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.envs.progress import progress_of

ENVS = Path(__file__).resolve().parents[2] / "src" / "grpo_probe" / "envs"


def test_the_columns_of_a_trace_are_its_distances_in_cm_and_the_progress_toward_the_goal() -> None:
    progress = progress_of([0.30, 0.10, 0.20])
    assert progress.d0_cm == pytest.approx(30.0) and progress.d_final_cm == pytest.approx(20.0)
    assert progress.progress_final_cm == 100.0 * (0.30 - 0.20)
    assert progress.best_point_cm == 100.0 * (0.30 - 0.10)
    assert progress.distance_trace_cm == (100.0 * 0.30, 100.0 * 0.10, 100.0 * 0.20)
    assert list(progress.columns()) == [
        "d0_cm",
        "d_final_cm",
        "progress_final_cm",
        "best_point_cm",
        "distance_trace_cm",
    ]


def test_an_episode_of_no_tick_made_no_progress_and_no_spawn_is_refused() -> None:
    still = progress_of((0.25,))
    assert (still.progress_final_cm, still.best_point_cm, still.distance_trace_cm) == (0.0, 0.0, (25.0,))
    with pytest.raises(ValueError, match="spawn distance"):
        progress_of([])


def test_no_environment_module_writes_the_progress_arithmetic_again() -> None:
    copies = [
        str(path.relative_to(ENVS))
        for path in sorted(ENVS.rglob("*.py"))
        if path.name != "progress.py" and "100.0 * (d0 - " in path.read_text()
    ]
    assert copies == []
