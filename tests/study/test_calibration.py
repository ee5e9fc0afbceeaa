"""The pilot calibration: its lock, its selection rule on curves of known shape, and a tiny run end to end.

The tiny run trains a two-iteration pilot of 2 seeds x K = 2 on the smooth plane
(prereg/plane_calibration.yaml) from heads cloned for three steps on synthetic demos: the runner needs
real networks, not skill. It is run twice into different folders, and every record and page must come
out byte for byte the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
import yaml

from grpo_probe.policies.synthetic_demos import synthetic_demos
from grpo_probe.policies.train import train_arm
from grpo_probe.study.calibration import Selection, load_calibration, lock_calibration
from grpo_probe.study.calibration_report import NO_BENEFIT, build_calibration_report
from grpo_probe.study.calibration_rule import choose, judge, quarter_change, reward_slope
from grpo_probe.study.calibration_run import run_candidate
from grpo_probe.study.design import StudyError

REPO = Path(__file__).resolve().parents[2]
SELECTION = Selection(
    confidence=0.95, max_update_kl=0.01, entropy_tolerance_nats=0.1, heldout_tolerance=0.5, rank_by="anchor"
)
TINY = {
    "ar": {"steps": 3, "warmup_steps": 1, "vocab_size": 300, "d_model": 32, "n_layers": 1, "n_heads": 2},
    "flow": {"steps": 3, "warmup_steps": 1, "hidden": 64, "n_layers": 2, "obs_embed": 16, "time_embed": 16},
}


def _spec(**pilot: Any) -> dict[str, Any]:
    """The registered calibration cut to one scene and one lr per head, its pilot changed as asked."""
    raw = yaml.safe_load((REPO / "prereg" / "calibrations" / "pilot_recipe.yaml").read_text())
    raw["name"] = "tiny_calibration"
    raw["candidates"] = [
        {"design": str(REPO / "prereg" / "plane_calibration.yaml"), "arms": ["ar_well", "flow_well"]}
    ]
    for head in raw["heads"].values():
        head["lrs"] = [5.0e-5]
    raw["heads"]["flow"]["recipe"]["mode"]["steps"] = 4
    sizes = {
        "iterations": 2,
        "seeds_per_iteration": 2,
        "rollouts_per_seed": 2,
        "train_seeds": {"first": 50000, "count": 4},
        "eval_seeds": {"first": 60000, "count": 2},
        "eval_draws": 2,
    }
    raw["pilot"].update({**sizes, **pilot})
    raw["bootstrap"]["resamples"] = 200
    return raw


def _write(path: Path, raw: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# -- the lock -------------------------------------------------------------------------------------------
def test_the_lock_refuses_an_edited_calibration(tmp_path: Path) -> None:
    path = _write(tmp_path / "calibration.yaml", _spec())
    with pytest.raises(StudyError, match="not locked"):
        load_calibration(path)
    lock_calibration(path)
    assert [c.id for c in load_calibration(path).candidates] == [
        "plane_calibration-ar_well-lr5e-5",
        "plane_calibration-flow_well-lr5e-5",
    ]
    edited = _spec()
    edited["heads"]["ar"]["lrs"] = [5.0e-4]
    _write(path, edited)
    with pytest.raises(StudyError, match="differs from the one locked"):
        load_calibration(path)


def test_a_candidate_is_checked_as_a_design(tmp_path: Path) -> None:
    """A training seed the design's demos use is refused, naming the calibration and the field."""
    path = _write(tmp_path / "calibration.yaml", _spec(train_seeds={"first": 0, "count": 4}))
    with pytest.raises(StudyError, match=r"candidates\[0\].*phase2.train_seeds: overlaps the demo seeds"):
        lock_calibration(path)


def test_the_shipped_calibration_is_locked() -> None:
    calibration = load_calibration(REPO / "prereg" / "calibrations" / "pilot_recipe.yaml")
    assert len({c.design.name for c in calibration.candidates}) >= 2
    flow = [c for c in calibration.candidates if c.head == "flow"]
    assert flow and all(c.design.phase2.recipe("flow").per_dimension for c in flow)  # type: ignore[union-attr]


# -- the selection rule on curves of known shape -----------------------------------------------------------
def _record(
    name: str, rewards: list[float], kls: list[float], entropies: list[float], anchor_low: float
) -> dict:
    iterations = [
        {"iteration": i, "mean_reward": r, "update_kl": k, "entropy": e}
        for i, (r, k, e) in enumerate(zip(rewards, kls, entropies, strict=True))
    ]
    held_out = {
        "sampled": {"gain": 0.3, "low": -0.1, "high": 0.7},
        "anchor": {"gain": anchor_low + 0.4, "low": anchor_low, "high": anchor_low + 0.8},
    }
    return {
        "candidate": name,
        "head": "ar",
        "lr": float(len(name)),
        "iterations": iterations,
        "held_out": held_out,
    }


N = 24
RISING = _record("rises", [10 + 0.2 * i + 0.1 * (-1) ** i for i in range(N)], [0.004] * N, [0.9] * N, 0.2)
EXPLODING = _record(
    "explodes",
    [10 + 0.2 * i for i in range(N)],
    [0.004 * 1.4**i for i in range(N)],
    [0.9 + 0.1 * i for i in range(N)],
    0.2,
)
FLAT = _record("flat", [10 + 0.3 * (-1) ** i for i in range(N)], [0.002] * N, [0.9] * N, -0.2)


def test_a_rising_curve_with_small_steps_passes_and_gains() -> None:
    verdict = judge(RISING, SELECTION)
    assert verdict.slope is not None and verdict.slope.low > 0
    assert verdict.passes and verdict.gained and verdict.failed == ()


def test_a_curve_whose_kl_explodes_fails_on_kl_and_entropy() -> None:
    verdict = judge(EXPLODING, SELECTION)
    assert verdict.rises and not verdict.passes
    assert verdict.failed == ("update KL above the bound", "entropy grows")


def test_a_flat_curve_does_not_rise() -> None:
    verdict = judge(FLAT, SELECTION)
    assert verdict.slope is not None and verdict.slope.low < 0 < verdict.slope.high
    assert verdict.failed == ("reward does not rise",) and not verdict.gained


def test_the_chosen_lr_is_the_passing_one_that_gains() -> None:
    choices = choose([judge(r, SELECTION) for r in (RISING, EXPLODING, FLAT)], SELECTION)
    assert choices["ar"].chosen == float(len("rises"))
    assert choose([judge(FLAT, SELECTION)], SELECTION)["ar"].chosen is None


def test_the_slope_interval_and_the_quarters() -> None:
    slope = reward_slope([0.0, 1.0, 2.0, 3.0, 4.1], 0.95)
    assert slope.low < slope.slope < slope.high and slope.slope == pytest.approx(1.02)
    assert quarter_change([1, 1, 2, 2, 3, 3, 5, 5]) == 4.0
    with pytest.raises(ValueError, match="at least 3"):
        reward_slope([1.0, 2.0], 0.95)


# -- a tiny calibration end to end ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    root = tmp_path_factory.mktemp("calibration")
    path = _write(root / "calibration.yaml", _spec())
    lock_calibration(path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    heads = {}
    try:
        for head in ("ar", "flow"):
            heads[head] = root / f"{head}.pt"
            demos = synthetic_demos(64, obs_dim=4, length=10, dims=2)
            train_arm(head, demos, heads[head], {**TINY[head], "batch_size": 8}, chunk_shape=(10, 2))
    finally:
        torch.set_num_threads(threads)
    return path, heads


def _run(path: Path, heads: dict[str, Path], out: Path) -> list[Path]:
    calibration = load_calibration(path)
    records = [
        run_candidate(calibration, c, heads[c.head], out / "work" / c.id, out / f"{c.id}.json")
        for c in calibration.candidates
    ]
    pages = [out / name for name in ("c.md", "c.json", "it.parquet", "cand.parquet", "curves.png")]
    build_calibration_report(calibration, records, *pages)
    return [out / f"{c.id}.json" for c in calibration.candidates] + pages


def test_a_tiny_calibration_runs_end_to_end_byte_for_byte(
    tiny: tuple[Path, dict[str, Path]], tmp_path: Path
) -> None:
    path, heads = tiny
    first, second = _run(path, heads, tmp_path / "a"), _run(path, heads, tmp_path / "b")
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), f"{a.name} differs between two runs"
    assert not (tmp_path / "a" / "work").exists() or not any((tmp_path / "a" / "work").iterdir())
    iterations = pd.read_parquet(first[-3])
    assert len(iterations) == 2 * 2 and set(iterations["head"]) == {"ar", "flow"}
    assert (iterations["update_kl"] >= 0).all()
    flow = iterations[iterations["head"] == "flow"]
    assert flow["entropy"].nunique() == 1  # the SDE's entropy is set by its schedule
    candidates = pd.read_parquet(first[-2])
    assert list(candidates["passes"]) == [False, False]  # two iterations leave the slope without an interval
    page = first[-5].read_text()
    assert "reward does not rise" in page
    assert (NO_BENEFIT in page.lower()) == (not candidates["gained"].any())


def test_the_command_checks_locks_and_refuses_a_missing_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grpo_probe import cli

    path = _write(tmp_path / "calibration.yaml", _spec())
    assert cli.main(["study", "calibrate", "lock", str(path)]) == 0
    assert cli.main(["study", "calibrate", "check", str(path)]) == 0
    assert "plane_calibration-flow_well-lr5e-5" in capsys.readouterr().out
    assert cli.main(["study", "calibrate", "run", str(path), "--results", str(tmp_path / "results")]) == 1
    assert "no checkpoint of 'ar_well'; train it first" in capsys.readouterr().err
