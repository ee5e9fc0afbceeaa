"""A study whose registered answer is within designs: its file, its verdict, its power and its page.

Why these cases: a pooled rho over designs of different sizes orders the scenes as much as the arms, and
a lab chooses among the arms of one scene. The within-designs answer must say Yes for a read that orders
the arms inside every scene even when it orders the scenes backwards (pooled negative), and No for a read
that only tracks the scenes (pooled positive). Its false-yes rate at the null is checked by simulation,
as every verdict's error rate is, and its power must be high where the ordering is strong and plentiful.
A study registered before the field must load, hash and verify as it did.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy.stats import binom

from grpo_probe.cli import main
from grpo_probe.study.answer_text import pooled_secondary, within_answer_text
from grpo_probe.study.design import Study, StudyError, load_study, lock_study
from grpo_probe.study.inference import infer
from grpo_probe.study.power import MAX_SIMULATED_PERMUTATIONS, study_power
from grpo_probe.study.report import build_study_report
from grpo_probe.study.rows import ArmRow

from .study_cases import CELLS, loaded, member_design, member_records, study_file

REPO = Path(__file__).resolve().parents[2]
READ = "median_choice_std_cm"
WITHIN_BOOT = {"resamples": 400, "confidence": 0.9, "seed": 11, "permutations": 199}


@pytest.fixture()
def members(tmp_path: Path) -> list[dict[str, str]]:
    designs = tmp_path / "designs"
    roles = {
        "scene_a": "subject",
        "scene_d": "subject",
        "smooth_b": "positive_control",
        "luck_c": "negative_control",
    }
    return [
        {"design": str(member_design(designs / name, name)), "role": role, "cells": dict(CELLS)}
        for name, role in roles.items()
    ]


def test_a_within_designs_study_validates_and_locks(tmp_path: Path, members: list[dict[str, str]]) -> None:
    path = study_file(tmp_path / "study.yaml", members, answer="within_designs", bootstrap=WITHIN_BOOT)
    lock_study(path)
    study = load_study(path)
    assert study.answer == "within_designs" and study.permutations == 199


def test_study_check_says_which_answer_it_simulates(
    tmp_path: Path, members: list[dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    power = {"rho": 0.6, "reliability": 0.9, "simulations": 20, "resamples": 100, "seed": 5}
    path = study_file(
        tmp_path / "study.yaml", members, answer="within_designs", bootstrap=WITHIN_BOOT, power=power
    )
    lock_study(path)
    assert main(["study", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "answer: within designs (the power simulates the within-design permutation test" in out
    assert "power: not simulated at the registered size: no subject design has three arms" in out
    pooled = study_file(tmp_path / "pooled.yaml", members, bootstrap=WITHIN_BOOT, power=power)
    lock_study(pooled)
    assert main(["study", "check", str(pooled)]) == 0
    out = capsys.readouterr().out
    assert "answer: pooled (the power simulates the pooled rho's registered interval" in out
    assert "power at the registered size (2 + 2 subject arms" in out


def test_a_within_designs_study_without_permutations_is_refused_naming_the_field(
    tmp_path: Path, members: list[dict[str, str]]
) -> None:
    boot = {k: v for k, v in WITHIN_BOOT.items() if k != "permutations"}
    path = study_file(tmp_path / "bare.yaml", members, answer="within_designs", bootstrap=boot)
    with pytest.raises(StudyError, match=r"bare\.yaml: bootstrap\.permutations: answer: within_designs"):
        lock_study(path)
    assert not Path(f"{path}.lock").exists()
    with pytest.raises(ValueError, match=r"odd\.yaml.*answer"):
        lock_study(study_file(tmp_path / "odd.yaml", members, answer="within", bootstrap=WITHIN_BOOT))


def test_a_study_registered_before_the_field_loads_pooled_and_its_lock_still_verifies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)  # members are named relative to the workflow's folder
    for name in ("calibrated_validation", "powered_validation"):
        study = load_study(f"prereg/studies/{name}.yaml")  # the lock's sha256 must still match
        assert study.answer == "pooled"
        locked = json.loads(Path(f"prereg/studies/{name}.yaml.lock").read_text())
        assert study.sha256 == locked["sha256"]


def _study(**changes: object) -> Study:
    fields: dict[str, object] = {
        "path": Path("within.yaml"),
        "sha256": "0" * 64,
        "lock_date": "",
        "name": "within",
        "description": "",
        "members": (),
        "predictor": READ,
        "reads": (READ,),
        "gain": "progress_final_cm",
        "resamples": 1000,
        "confidence": 0.9,
        "seed": 11,
        "levels": "designs_then_arms",
        "permutations": 999,
        "answer": "within_designs",
    }
    fields.update(changes)
    return Study(**fields)  # type: ignore[arg-type]


def _rows(reads: list[list[float]], gains: list[list[float]]) -> list[ArmRow]:
    """Counted subject arms: design d{i} holds one arm per entry of reads[i]."""
    return [
        ArmRow(
            design=f"d{d}",
            role="subject",
            arm=f"arm{i}",
            head="flow",
            cell=f"c{i}",
            reads={READ: read},
            engagement=None,
            engages=True,
            qualifies=read > 0,
            predicted=False,
            gain=gain,
            gain_ci_low=gain - 0.5,
            gain_ci_high=gain + 0.5,
            gain_se=0.2,
            pilot_verdict="held" if gain > 0.5 else "not shown",
            moved=True,
        )
        for d, (rs, gs) in enumerate(zip(reads, gains, strict=True))
        for i, (read, gain) in enumerate(zip(rs, gs, strict=True))
    ]


OFFSETS = [0.0, 10.0, 20.0, 30.0]


def test_a_read_that_orders_arms_inside_each_design_but_scenes_backwards_says_yes() -> None:
    # inside each design the read equals the gain; the designs' means run the other way, so pooled < 0
    gains = [[off + i for i in range(5)] for off in OFFSETS]
    reads = [[off + i - 2.0 * off for i in range(5)] for off in OFFSETS]
    study = _study()
    inference = infer(study, _rows(reads, gains))
    within = inference.within
    assert within is not None and within.verdict == "Yes"
    assert within.test.mean == pytest.approx(1.0) and within.alpha == pytest.approx(0.1)
    assert within.test.p_value == pytest.approx(1 / 1000)  # no within shuffle reaches rho = 1 everywhere
    assert inference.primary.rho is not None and inference.primary.rho < -0.5
    line = within_answer_text(study, inference)
    assert line.startswith("Within designs: Yes, mean within rho +1.00 [+1.00, +1.00], permutation p = 0.001")
    assert "at registered power not stated" in line
    assert pooled_secondary(study, inference).startswith("Pooled over designs (secondary, not the answer)")
    assert "carried across scenes" in pooled_secondary(study, inference)
    pooled = infer(_study(answer="pooled"), _rows(reads, gains))
    assert pooled.within is None and pooled.primary == inference.primary


def test_a_read_that_only_tracks_the_design_means_says_no() -> None:
    # the read is each design's scale; the gains grow with it, and inside a design follow nothing
    gains = [[off + g for g in (0.3, -0.8, 1.1, 0.0, -0.4)] for off in OFFSETS]
    reads = [[off] * 5 for off in OFFSETS]
    inference = infer(_study(), _rows(reads, gains))
    within = inference.within
    assert within is not None and within.verdict == "No"
    assert within.test.mean == 0.0 and within.test.p_value == 1.0
    assert inference.primary.rho is not None and inference.primary.rho > 0.8
    # a read that varies inside designs but orders their arms one way in half of them and the other way
    # in the rest: no consistent ordering inside a scene, however well it tracks the scenes
    pattern = (0.3, -0.8, 1.1, 0.0, -0.4)
    mixed = [[off + (p if d % 2 else -p) for p in pattern] for d, off in enumerate(OFFSETS)]
    within = infer(_study(), _rows(mixed, gains)).within
    assert within is not None and within.verdict == "No" and within.test.p_value is not None
    assert within.test.per_design == pytest.approx([-1.0, 1.0, -1.0, 1.0])
    assert within.test.mean == pytest.approx(0.0) and within.test.p_value >= 0.1


def test_a_hand_built_within_study_without_permutations_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"within\.yaml: bootstrap\.permutations"):
        infer(_study(permutations=None), _rows([[0.0, 1.0, 2.0]] * 2, [[0.0, 1.0, 2.0]] * 2))


NULL_SIMULATIONS = 600


@pytest.mark.parametrize("sizes", [(5,) * 6, (3, 3, 4, 6, 2)], ids=["six_designs_of_5", "small_uneven"])
def test_at_no_ordering_the_within_answer_says_yes_at_most_at_its_level(sizes: tuple[int, ...]) -> None:
    """rho = 0 is the worst point of the null (a negative rho says Yes less often; a design's shift of
    its reads and gains changes no within-design rank). Registered alpha = 1 - 0.9 = 0.1."""
    result = study_power(
        sizes,
        rho=0.0,
        reliability=0.9,
        simulations=NULL_SIMULATIONS,
        resamples=200,
        confidence=0.9,
        seed=3,
        answer="within_designs",
        permutations=199,
    )
    assert result.answer == "within_designs" and result.permutations == 199
    assert result.ci_low <= 0.1, (
        f"false-yes rate {result.power:.3f} [{result.ci_low:.3f}, {result.ci_high:.3f}]"
    )
    assert result.detected <= binom.ppf(0.999, NULL_SIMULATIONS, 0.1)


def test_a_strong_ordering_over_many_designs_is_detected_and_permutations_are_capped() -> None:
    result = study_power(
        [5] * 10,
        rho=0.6,
        reliability=0.9,
        simulations=100,
        resamples=200,
        confidence=0.9,
        seed=3,
        answer="within_designs",
        permutations=1999,
    )
    assert result.permutations == MAX_SIMULATED_PERMUTATIONS
    assert result.ci_low > 0.8, f"power {result.power:.3f} [{result.ci_low:.3f}, {result.ci_high:.3f}]"
    small = dict(rho=0.6, reliability=0.9, simulations=10, resamples=100, confidence=0.9, seed=1)
    with pytest.raises(ValueError, match="permutations"):
        study_power([5, 5], **small, answer="within_designs")
    with pytest.raises(ValueError, match="group_sizes"):
        study_power([2, 2], **small, answer="within_designs", permutations=99)


def test_the_page_leads_with_the_within_answer_and_labels_the_pooled_rho(
    tmp_path: Path, members: list[dict[str, str]]
) -> None:
    """Two arms per design leave no design a rho of its own: the page says so, first, and still shows
    the pooled rho as a secondary; the record states the registered answer and its power's permutations."""
    path = study_file(
        tmp_path / "study.yaml",
        members,
        answer="within_designs",
        bootstrap={**WITHIN_BOOT, "levels": "designs_then_arms"},
        power={"rho": 0.6, "reliability": 0.8, "simulations": 20, "resamples": 100, "seed": 5},
    )
    lock_study(path)
    study = load_study(path)
    decisions, phase2s = [], []
    for i, member in enumerate(study.members):
        reads = {
            arm: {
                "median_group_std_progress_cm": 0.5,
                READ: 0.5 + j + i,
                "chaos_fraction": 0.1,
                "mean_progress_delta_cm": 0.0,
            }
            for j, arm in enumerate(CELLS)
        }
        gains = {arm: (0.2 + j + i, j + i - 0.3, 0.7 + j + i) for j, arm in enumerate(CELLS)}
        d, p = member_records(tmp_path / "results" / str(i), loaded(member.design.path), reads, gains)
        decisions.append(d)
        phase2s.append(p)
    out = [tmp_path / n for n in ("v.md", "v.json", "v.parquet", "v.png")]
    record = build_study_report(study, decisions, phase2s, *out)
    assert record["study"]["answer"] == "within_designs"
    assert record["answer"].startswith("Within designs: not answered; no design has 3 counted subject arms")
    assert record["power"].startswith("Power: not simulated; no design has 3 counted subject arms")
    assert record["pooled"].startswith("Pooled over designs (secondary, not the answer)")
    page = out[0].read_text()
    lines = [line for line in page.splitlines() if line]
    assert lines[1].startswith("**Within designs:")
    assert page.index("**Within designs:") < page.index("Power:") < page.index("Pooled over designs")
    assert "pooled over designs (secondary: the registered answer is within designs)" in page
