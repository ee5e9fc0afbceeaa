"""``grpo-probe study explore``: the exploratory re-analysis of a study's tables.

Why these cases: the re-analysis exists to tell an ordering of arms inside a scene from an ordering of
scenes, so its statistics are checked on data where the answer is known (a read that ranks arms inside
each design but scenes the wrong way round; a read that only tracks the scene), its partial correlation
against a regression of ranks, its permutation test at both ends, and its bytes for the same inputs.
End to end it runs on the suite's tiny study (tests/session_runs.py), whose records and tables are
written by the workflow itself, so every candidate reads columns that exist.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.stats import rankdata

from grpo_probe import cli
from grpo_probe.study.design import Study, load_study
from grpo_probe.study.explore import EXPLORATORY_LABEL, explore_rows, write_explore
from grpo_probe.study.explore_reads import CANDIDATE_READS, arm_tables, candidate_names
from grpo_probe.study.nested import nested_rank_correlation
from grpo_probe.study.ranks import spearman
from grpo_probe.study.within_stats import partial_rank, within_design

REPO = Path(__file__).resolve().parents[2]
SMOKE_STUDY = "prereg/studies/validation_smoke.yaml"
TINY_STUDY = "prereg/studies/validation_tiny.yaml"
STATS = {"seed": 7, "resamples": 2000, "confidence": 0.95}


def _designs(offsets: list[float], arms: int) -> tuple[list[str], list[float], list[float]]:
    """Designs d0, d1, ... each of ``arms`` arms; gain = the design's offset + the arm's index."""
    designs, index, offset = [], [], []
    for d, off in enumerate(offsets):
        for i in range(arms):
            designs.append(f"d{d}")
            index.append(float(i))
            offset.append(off)
    gains = [o + i for o, i in zip(offset, index, strict=True)]
    return designs, index, gains


def test_a_read_that_ranks_arms_within_designs_but_scenes_backwards() -> None:
    offsets = [0.0, 10.0, 20.0, 30.0]
    designs, index, gains = _designs(offsets, 5)
    # equal to the gain inside each design, but the designs' offsets reversed
    read = [i - 10.0 * o for i, o in zip(index, [offsets[int(d[1:])] for d in designs], strict=True)]
    within = within_design("r", read, gains, designs, permutations=999, **STATS)
    assert within.mean == pytest.approx(1.0)
    assert within.per_design == pytest.approx([1.0] * 4)
    assert within.ci_low == pytest.approx(1.0) and within.ci_high == pytest.approx(1.0)
    pooled = nested_rank_correlation("r", read, gains, designs, **STATS)
    assert pooled.rho is not None and pooled.rho < -0.5


def test_a_read_that_only_tracks_the_scene_orders_nothing_within() -> None:
    rng = np.random.default_rng(3)
    offsets = [0.0, 5.0, 10.0, 15.0, 20.0]
    designs, _, _ = _designs(offsets, 5)
    scale = [offsets[int(d[1:])] for d in designs]
    gains = (np.asarray(scale) + rng.normal(0.0, 1.0, len(scale))).tolist()
    within = within_design("scale", scale, gains, designs, permutations=999, **STATS)
    assert within.mean == 0.0 and within.flat == [f"d{d}" for d in range(5)]
    assert within.p_value == 1.0  # every within-design shuffle reaches the observed 0
    pooled = nested_rank_correlation("scale", scale, gains, designs, **STATS)
    assert pooled.rho is not None and pooled.rho > 0.8


def test_the_partial_rank_correlation_is_the_correlation_of_rank_residuals() -> None:
    rng = np.random.default_rng(11)
    x, y, z = rng.normal(size=(3, 9))
    y = y + 0.8 * z
    x = x + 0.5 * z
    rx, ry, rz = rankdata(x), rankdata(y), rankdata(z)
    design = np.column_stack([np.ones(9), rz])
    res_x = rx - design @ np.linalg.lstsq(design, rx, rcond=None)[0]
    res_y = ry - design @ np.linalg.lstsq(design, ry, rcond=None)[0]
    expected = float(np.corrcoef(res_x, res_y)[0, 1])
    assert partial_rank(x, y, z) == pytest.approx(expected, abs=1e-12)
    r_xy, r_xz, r_yz = spearman(x, y), spearman(x, z), spearman(y, z)
    assert r_xy is not None and r_xz is not None and r_yz is not None
    formula = (r_xy - r_xz * r_yz) / np.sqrt((1 - r_xz**2) * (1 - r_yz**2))
    assert partial_rank(x, y, z) == pytest.approx(formula)
    assert partial_rank(z, y, z) is None, "a read that is the covariate has nothing beyond it"
    assert partial_rank(x, y, np.ones(9)) == pytest.approx(r_xy), "a constant covariate holds nothing"


def test_the_permutation_p_is_one_for_a_flat_read_and_small_for_a_perfect_one() -> None:
    designs, index, gains = _designs([0.0, 3.0, 6.0, 9.0], 5)
    flat = [float(d[1:]) for d in designs]
    assert within_design("flat", flat, gains, designs, permutations=2000, **STATS).p_value == 1.0
    perfect = within_design("perfect", index, gains, designs, permutations=2000, **STATS)
    # P(all four designs shuffled into order) = (1/120)^4: only the observed arrangement reaches it
    assert perfect.p_value == pytest.approx(1 / 2001)


def _synthetic_rows() -> list[dict[str, Any]]:
    rng = np.random.default_rng(5)
    designs, index, gains = _designs([0.0, 4.0, 8.0], 5)
    rows = []
    for k, (design, i, gain) in enumerate(zip(designs, index, gains, strict=True)):
        reads = {name: float(rng.normal()) for name in candidate_names()}
        reads["choice_std_cm"] = i + 0.1 * float(rng.normal())
        reads["gradient_noise_scale"] = None if k % 4 == 0 else reads["gradient_noise_scale"]
        rows.append(
            {"design": design, "arm": f"a{i:.0f}", "head": "flow", "cell": "c", "gain": gain, **reads}
        )
    return rows


@pytest.fixture
def smoke_study(monkeypatch: pytest.MonkeyPatch) -> Study:
    monkeypatch.chdir(REPO)  # member designs are named relative to the repository
    return load_study(SMOKE_STUDY)


def test_the_same_rows_give_the_same_bytes_and_name_a_winner(smoke_study: Study, tmp_path: Path) -> None:
    rows = _synthetic_rows()
    one = write_explore(smoke_study, rows, tmp_path / "one")
    write_explore(smoke_study, rows, tmp_path / "two")
    for name in ("explore.json", "explore.md", "explore_reads.parquet"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    assert one["seed"] == smoke_study.seed and one["permutations"] >= 2000
    page = (tmp_path / "one" / "explore.md").read_text()
    assert page.startswith(EXPLORATORY_LABEL) and "EXPLORATORY" in page.splitlines()[0]
    assert (
        page.rstrip().splitlines()[-1].startswith("Winner (exploratory, to be confirmed by a locked study): ")
    )
    assert "choice_std_cm" in page.rstrip().splitlines()[-1]
    noise = next(a for a in one["reads"] if a["read"] == "gradient_noise_scale")
    assert noise["arms"] == 11, "arms without the read are left out of its answers"
    table = pd.read_parquet(tmp_path / "one" / "explore_reads.parquet")
    assert len(table) == 15 and table["gradient_noise_scale"].isna().sum() == 4


def test_when_no_read_orders_arms_within_a_design_the_page_says_so(
    smoke_study: Study, tmp_path: Path
) -> None:
    rows = _synthetic_rows()
    for r in rows:  # every read tracks the scene alone: constant inside each design
        r |= {name: float(r["design"][1:]) for name in candidate_names()}
    record = write_explore(smoke_study, rows, tmp_path)
    assert all(a["within"]["mean"] == 0.0 for a in record["reads"])
    assert record["winner"].startswith("Winner: none. No read orders arms within a design (")
    assert "competence alone does not order the arms within designs" in record["competence"]
    page = (tmp_path / "explore.md").read_text()
    assert page.rstrip().splitlines()[-1] == record["winner"]


def test_a_missing_member_record_is_named(
    smoke_study: Study, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["study", "explore", SMOKE_STUDY, "--results", str(tmp_path)])
    assert code == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'smooth_plane_smoke' / 'decision.json'}: decision record not found" in err
    assert not (tmp_path / "studies").exists()


def _copy_results(run: Path, to: Path) -> Path:
    """The member records and tables of the shared run, in a folder of this test's own."""
    for member in ("smooth_plane_tiny", "luck_plane_tiny"):
        source = run / "results" / member
        (to / member).mkdir(parents=True)
        for name in ("decision.json", "phase2.json"):
            shutil.copy2(source / name, to / member / name)
        for folder in ("cells", "anchors"):
            shutil.copytree(source / folder, to / member / folder, ignore=shutil.ignore_patterns("*.json"))
    return to


@pytest.mark.e2e
@pytest.mark.slow
def test_explore_runs_on_the_tiny_study(
    study_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _copy_results(study_run, tmp_path / "results")
    monkeypatch.chdir(study_run)  # the study names its members relative to the run's copy
    assert cli.main(["study", "explore", TINY_STUDY, "--results", str(results)]) == 0
    assert "exploratory" in capsys.readouterr().out
    folder = results / "studies" / "validation_tiny"
    study = load_study(TINY_STUDY)
    record = json.loads((folder / "explore.json").read_text())
    counted = record["arms"]
    table = pd.read_parquet(folder / "explore_reads.parquet")
    assert list(table.columns) == ["design", "arm", "head", "cell", "gain", *candidate_names()]
    assert len(table) == counted == 0, "the tiny study's arms are all controls: none is counted"
    assert (folder / "explore.md").read_text().startswith(EXPLORATORY_LABEL)
    assert [a["read"] for a in record["reads"]] == list(candidate_names())

    # The reads themselves, on the workflow's own tables: every arm of the planes, controls included.
    always = {c.name for c in CANDIDATE_READS} - {"gradient_noise_scale", "gradient_half_cosine"}
    gradients = []
    for member in study.members:
        cells = {
            c["id"]: c
            for c in json.loads((results / member.design.name / "decision.json").read_text())["cells"]
        }
        for cell_id in member.cells.values():
            tables = arm_tables(results / member.design.name, cells[cell_id])
            reads = {c.name: c.read(tables) for c in CANDIDATE_READS}
            assert all(isinstance(reads[n], float) and np.isfinite(reads[n]) for n in always), reads
            assert 0.0 <= reads["nondegenerate_share"] <= 1.0
            assert 0.0 <= reads["anchor_success_rate"] <= 1.0
            gradients.append(reads["gradient_half_cosine"])
    assert any(g is not None for g in gradients), "the smooth plane's copy registers the gradient reads"
    # Taken as subjects, the same arms give one row each (those the study would count).
    subjects = dataclasses.replace(
        study, members=tuple(dataclasses.replace(m, role="subject") for m in study.members)
    )
    rows = explore_rows(subjects, results)
    arms = {(m.design.name, arm) for m in study.members for arm in m.cells}
    assert {(r["design"], r["arm"]) for r in rows} <= arms
    assert all(set(r) == {"design", "arm", "head", "cell", "gain", *candidate_names()} for r in rows)
