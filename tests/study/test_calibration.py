"""The pilot calibration: its lock, its selection rule on curves of known shape, and a tiny run end to end.

The tiny run trains a two-iteration pilot of 2 seeds x K = 2 on the smooth plane
(prereg/calibrations/pilot_recipe/plane_calibration.yaml) from heads cloned for three steps on synthetic
demos: the runner needs real networks, not skill. It is run twice into different folders, and every record and
page must come out byte for byte the same; without a monitor, the same bytes as before the monitor existed
(pinned).

The paired reading of "the training reward rises" (``selection.rises``: ``monitor_slope``,
``monitor_difference``) is tested on simulated curves whose seeds differ in difficulty far more than the
policy improves: the OLS slope over fresh seeds cannot see the rise, the paired read can, and a flat
monitor does not rise.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from scipy import stats

from grpo_probe.policies.synthetic_demos import synthetic_demos
from grpo_probe.policies.train import train_arm
from grpo_probe.prereg.schema import SchemaError
from grpo_probe.provenance.environments import environment_value_lines, same_numerics_environment
from grpo_probe.provenance.machine import environment_summary
from grpo_probe.study.calibration import Monitor, Selection, load_calibration, lock_calibration
from grpo_probe.study.calibration_report import NO_BENEFIT, build_calibration_report
from grpo_probe.study.calibration_rule import choose, judge, paired_rise, quarter_change, reward_slope
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
        {
            "design": str(REPO / "prereg/calibrations/pilot_recipe/plane_calibration.yaml"),
            "arms": ["ar_well", "flow_well"],
        }
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


# -- the first calibration stays as it ran ---------------------------------------------------------------
FIRST_SHA256 = "9af885b97e84d051098f224a28c2c5912af54f55df34028a795a6a6441520fa6"
"""The first calibration's sha256 as locked on 2026-12-06 (prereg/calibrations/pilot_recipe.yaml.lock)."""

TINY_DIGESTS = {
    "plane_calibration-ar_well-lr5e-5.json": "81afc29db705bb6f",
    "plane_calibration-flow_well-lr5e-5.json": "53c9980fa3866cb2",
    "c.md": "903c9dca2c0d1468",
    "c.json": "b4fa2dcabc187847",
    "it.parquet": "d9a8a6de907b6584",
    "cand.parquet": "f32268a96d7cfa90",
    "curves.png": "74fbfc71af9ad516",
}
"""The tiny run's files as a calibration without a monitor writes them (:func:`_digests`), in
TINY_ENVIRONMENT; made again when Adam's square root became correctly rounded (the same on every CPU)."""

TINY_ENVIRONMENT = {
    "lock_sha256": "3c455d3b09ed055e163780baa682c1792a9012a61792a2ae3c6e1b58c788e183",
    "libc": "glibc 2.36",
    "machine": "x86_64",
    "numerics": {"setting": "x86-64-v3"},
    "python": "3.11.7",
}
"""The environment :data:`TINY_DIGESTS` hold for (the lock, the numerics setting, Python, libc, machine)."""


def _digests(files: list[Path]) -> dict[str, str]:
    """Each file's sha256 (16 hex digits), without what hangs on the checkout's place or the lock's clock:
    the calibration's sha256 (its candidates name their designs by absolute path here), its path and
    lock date (the page's "Registered in" line, the summary's ``calibration``)."""
    found = {}
    for f in files:
        data = f.read_bytes()
        if f.suffix == ".json":
            content = json.loads(data)
            content.pop("calibration_sha256", None)
            content.pop("calibration", None)
            data = json.dumps(content, sort_keys=True).encode()
        elif f.suffix == ".md":
            data = b"\n".join(line for line in data.splitlines() if not line.startswith(b"Registered in "))
        found[f.name] = hashlib.sha256(data).hexdigest()[:16]
    return found


def test_the_first_calibration_is_the_one_that_ran() -> None:
    """Its lock still verifies, on the bytes it ran under, and it reads the reward's rise as it did."""
    first = load_calibration(REPO / "prereg" / "calibrations" / "pilot_recipe.yaml")
    assert (first.sha256, first.lock_date) == (FIRST_SHA256, "2026-12-06T03:29:20Z")
    assert first.selection.rises == "training_slope" and first.monitor is None


def test_without_a_monitor_the_tiny_run_writes_what_it_wrote_before(
    tiny: tuple[Path, dict[str, Path]], tmp_path: Path
) -> None:
    path, heads = tiny
    assert load_calibration(path).monitor is None
    here = environment_summary()
    differing = same_numerics_environment(TINY_ENVIRONMENT, here)
    assert not differing, (
        "this process's environment is not the one TINY_DIGESTS were pinned in, so their bytes are not "
        "promised here (nothing was compared): "
        + "; ".join(environment_value_lines(TINY_ENVIRONMENT, here, ("pinned", "here"), differing))
    )
    found = _digests(_run(path, heads, tmp_path))
    changed = sorted(k for k in TINY_DIGESTS if found.get(k) != TINY_DIGESTS[k])
    assert not changed, f"a calibration without a monitor now writes other bytes: {changed} (now {found})"


# -- the paired reading of "the reward rises" ------------------------------------------------------------
MONITORED = Selection(
    confidence=0.95,
    max_update_kl=0.01,
    entropy_tolerance_nats=0.1,
    heldout_tolerance=0.5,
    rank_by="anchor",
    rises="monitor_slope",
)


def _simulated(rise: float, seed: int) -> dict:
    """A 24-iteration candidate whose policy gains ``rise`` cm linearly: each iteration trains on 8 fresh
    seeds whose difficulty spreads 15 cm (PointMaze's iteration means swing over 35 cm); 16 monitor seeds,
    as spread, are scored at iterations 0, 6, ..., 24 with the same draws, so a seed's difficulty is the
    same at every point and only 0.3 cm of noise is left between two of them."""
    rng = np.random.default_rng(seed)
    n = 24
    curve = rise * np.arange(n + 1) / n
    fresh = rng.normal(30.0, 15.0, size=(n, 8)) + curve[:n, None] + rng.normal(0.0, 2.0, size=(n, 8))
    difficulty = rng.normal(30.0, 15.0, size=16)
    monitored = Monitor(seeds=tuple(range(16)), draws=4, every=6).iterations(n)
    record = _record("simulated", list(fresh.mean(axis=1)), [0.002] * n, [0.9] * n, 0.2)
    record["monitor"] = {
        "points": [
            {"iteration": i, "scores": list(difficulty + curve[i] + rng.normal(0.0, 0.3, size=16))}
            for i in monitored
        ]
    }
    return record


def test_a_rise_the_fresh_seeds_hide_is_seen_paired_by_seed() -> None:
    """A 4 cm rise over 24 iterations: the monitor's paired reads see it in every one of 20 simulated
    candidates; the OLS slope over the fresh seeds' iteration means in few of them."""
    records = [_simulated(4.0, seed) for seed in range(20)]
    by_slope = [judge(r, SELECTION).rises for r in records]
    by_monitor = [judge(r, MONITORED) for r in records]
    by_difference = [judge(r, replace(MONITORED, rises="monitor_difference")) for r in records]
    assert sum(by_slope) <= 6
    assert all(v.rises and v.passes and v.rise is not None for v in by_monitor)
    assert all(v.rises for v in by_difference)
    assert all(v.rise.estimate == pytest.approx(4.0 / 24, rel=0.2) for v in by_monitor)  # type: ignore[union-attr]


def test_a_flat_or_falling_monitor_does_not_rise() -> None:
    flat = [judge(_simulated(0.0, seed), MONITORED) for seed in range(20)]
    assert sum(v.rises for v in flat) <= 3
    assert all(v.failed == ("reward does not rise",) for v in flat if not v.rises)
    falling = [judge(_simulated(-4.0, seed), MONITORED) for seed in range(20)]
    assert not any(v.rises for v in falling) and all(v.rise.high < 0 for v in falling)  # type: ignore[union-attr]


def test_the_paired_reads_are_the_per_seed_slope_and_difference_with_a_t_interval() -> None:
    """Checked against scipy: each seed's linregress slope (or last minus first), then the one-sample t
    interval over seeds."""
    rng = np.random.default_rng(7)
    iterations = [0, 6, 12, 18, 24]
    scores = rng.normal(0.0, 1.0, size=(5, 9)) + rng.normal(0.0, 10.0, size=9) + 0.1 * np.arange(5)[:, None]
    for kind, per_seed in (
        ("monitor_slope", [stats.linregress(iterations, scores[:, s]).slope for s in range(9)]),
        ("monitor_difference", list(scores[-1] - scores[0])),
    ):
        rise = paired_rise(iterations, scores.tolist(), kind, 0.9)
        low, high = stats.ttest_1samp(per_seed, 0.0).confidence_interval(0.9)
        assert (rise.estimate, rise.low, rise.high) == pytest.approx((np.mean(per_seed), low, high))
        assert rise.seeds == 9
    with pytest.raises(ValueError, match="at least 2 monitored policies of at least 2 seeds"):
        paired_rise([0], [[1.0, 2.0]], "monitor_slope", 0.95)
    with pytest.raises(ValueError, match="no paired rise"):
        paired_rise(iterations, scores.tolist(), "ols", 0.95)


def test_a_monitor_read_needs_a_monitored_record() -> None:
    with pytest.raises(ValueError, match="holds no monitor scores"):
        judge(RISING, MONITORED)


def test_the_monitored_policies() -> None:
    assert Monitor((1, 2), 4, 6).iterations(24) == (0, 6, 12, 18, 24)
    assert Monitor((1, 2), 4, 5).iterations(24) == (0, 5, 10, 15, 20, 24)
    assert Monitor((1, 2), 4, 30).iterations(24) == (0, 24)


# -- a monitor is registered and checked as the rest -----------------------------------------------------
def _monitored_spec(**monitor: Any) -> dict[str, Any]:
    raw = _spec(monitor={"seeds": {"first": 70000, "count": 3}, "draws": 2, "every": 1, **monitor})
    raw["selection"]["rises"] = "monitor_slope"
    return raw


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"seeds": {"first": 50002, "count": 3}},
            r"pilot.monitor.seeds: overlaps pilot.train_seeds \(50002, 50003\)",
        ),
        ({"seeds": [60001, 70000]}, r"pilot.monitor.seeds: overlaps pilot.eval_seeds \(60001\)"),
        (
            {"seeds": {"first": 30, "count": 3}},
            r"pilot.monitor.seeds: overlaps .*training.demos.seeds \(30, 31\)",
        ),
        ({"seeds": [70000]}, r"pilot.monitor.seeds: a t interval over seeds needs at least 2 seeds"),
    ],
)
def test_the_monitor_seeds_stay_off_every_other_seed(tmp_path: Path, change: dict, message: str) -> None:
    path = _write(tmp_path / "calibration.yaml", _monitored_spec(**change))
    with pytest.raises(StudyError, match=message):
        lock_calibration(path)


def test_a_monitor_read_without_a_monitor_is_refused(tmp_path: Path) -> None:
    raw = _spec()
    raw["selection"]["rises"] = "monitor_difference"
    with pytest.raises(
        StudyError, match=r"calibration.yaml: selection.rises: monitor_difference reads the monitor"
    ):
        lock_calibration(_write(tmp_path / "calibration.yaml", raw))
    raw["selection"]["rises"] = "slope"
    with pytest.raises(SchemaError, match=r"selection.rises: 'slope' is not one of"):
        lock_calibration(_write(tmp_path / "calibration.yaml", raw))


def test_the_second_calibration_reruns_the_first_read_paired() -> None:
    """Locked; the same candidates trained by the same pilots (each candidate design's phase2 section but
    its description), its reward's rise read on 16 monitor seeds at iterations 0, 6, 12, 18 and 24."""
    first = load_calibration(REPO / "prereg" / "calibrations" / "pilot_recipe.yaml")
    second = load_calibration(REPO / "prereg" / "calibrations" / "pilot_recipe_v2.yaml")
    assert second.ids == first.ids and second.name != first.name
    for a, b in zip(first.candidates, second.candidates, strict=True):
        pilots = [{k: v for k, v in c.design.raw["phase2"].items() if k != "description"} for c in (a, b)]  # type: ignore[index]
        assert pilots[0] == pilots[1] and (a.head, a.lr) == (b.head, b.lr)
    assert replace(second.selection, rises="training_slope") == first.selection
    assert second.selection.rises == "monitor_slope" and second.monitor is not None
    assert len(second.monitor.seeds) == 16 and second.monitor.iterations(second.iterations) == (
        0,
        6,
        12,
        18,
        24,
    )


# -- a tiny monitored calibration end to end ---------------------------------------------------------------
def test_a_tiny_monitored_calibration_runs_end_to_end_byte_for_byte(
    tiny: tuple[Path, dict[str, Path]], tmp_path: Path
) -> None:
    _, heads = tiny
    path = _write(tmp_path / "monitored.yaml", _monitored_spec())
    lock_calibration(path)
    first, second = _run(path, heads, tmp_path / "a"), _run(path, heads, tmp_path / "b")
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), f"{a.name} differs between two runs"
    for record in (json.loads(p.read_text()) for p in first[:2]):
        points = record["monitor"]["points"]
        assert [p["iteration"] for p in points] == [0, 1, 2]
        assert all(len(p["scores"]) == 3 for p in points)
        assert record["monitor"]["seeds"] == [70000, 70001, 70002]
    candidates = pd.read_parquet(first[-2])
    assert {"monitor_rise", "monitor_rise_low", "monitor_rise_high"} <= set(candidates.columns)
    assert list(candidates["rises"]) == list(candidates["monitor_rise_low"] > 0)
    page = first[-5].read_text()
    assert "monitor slope / it [CI]" in page and "read on the monitor" in page
