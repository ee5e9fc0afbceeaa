"""A registered validation study: its file and lock are checked, and its page ranks the arms' reads
against their gains, from the members' records alone, with the same bytes every time."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from grpo_probe.study.design import StudyError, load_study, lock_study
from grpo_probe.study.figure import LABEL_GAP_PT, label_offsets
from grpo_probe.study.report import build_study_report

from .study_cases import CELLS, loaded, member_design, member_records, study_file


@pytest.fixture()
def members(tmp_path: Path) -> dict[str, Path]:
    designs = tmp_path / "designs"
    return {
        "scene": member_design(designs / "a", "scene_a"),
        "scene2": member_design(designs / "d", "scene_d"),
        "scene3": member_design(designs / "e", "scene_e"),
        "positive": member_design(designs / "b", "smooth_b"),
        "negative": member_design(designs / "c", "luck_c"),
    }


ROLES = {
    "scene": "subject",
    "scene2": "subject",
    "scene3": "subject",
    "positive": "positive_control",
    "negative": "negative_control",
}


def _entries(members: dict[str, Path]) -> list[dict]:
    return [{"design": str(path), "role": ROLES[key], "cells": dict(CELLS)} for key, path in members.items()]


def test_a_locked_study_loads_and_an_edited_one_is_refused(tmp_path: Path, members: dict[str, Path]) -> None:
    path = study_file(tmp_path / "study.yaml", _entries(members))
    with pytest.raises(StudyError, match=r"not locked .*grpo-probe study lock"):
        load_study(path)
    lock_study(path)
    study = load_study(path)
    assert [m.role for m in study.members] == [ROLES[k] for k in members]
    assert study.members[0].cells == CELLS and study.predictor == "median_choice_std_cm"
    study_file(path, _entries(members), predictor="chaos_fraction")
    with pytest.raises(StudyError, match=r"differs from the one locked in .*study\.yaml\.lock"):
        load_study(path)


def test_member_problems_are_named_with_file_and_field(tmp_path: Path, members: dict[str, Path]) -> None:
    gated = member_design(tmp_path / "g", "gated_g", pilot="gated")
    entries = _entries(members)
    entries[0]["cells"] = {"ar": "c3_teacher_ode", "flow_teacher": "no_such_cell"}
    entries.append({"design": str(gated), "role": "subject", "cells": {"ghost": "c1_ar_t1_0"}})
    path = study_file(
        tmp_path / "bad.yaml", entries, predictor="median_group_std_progress_cm", reads=["not_a_read"]
    )
    with pytest.raises(StudyError) as caught:
        lock_study(path)
    message = str(caught.value)
    assert "members[0].cells.ar: cell 'c3_teacher_ode' samples arm 'flow_teacher', not 'ar'" in message
    assert "members[0].cells.flow_teacher:" in message and "no enabled cell 'no_such_cell'" in message
    assert "members[5].design:" in message and "phase2.pilot: every_arm" in message
    assert "members[5].cells.ghost:" in message and "has no arm 'ghost'" in message
    assert "reads[0]: 'not_a_read' is not a probe read" in message
    assert "predictor: 'median_group_std_progress_cm' must be one of reads" in message
    assert not Path(f"{path}.lock").exists()


def test_a_schema_error_names_the_field(tmp_path: Path, members: dict[str, Path]) -> None:
    entries = _entries(members)
    entries[1]["role"] = "control"
    with pytest.raises(ValueError, match=r"bad\.yaml: members\[1\]\.role"):
        lock_study(study_file(tmp_path / "bad.yaml", entries))


def _records(tmp_path: Path, members: dict[str, Path]) -> tuple[list[Path], list[Path]]:
    # Subjects: in every scene the arm that reads more signal gains more, and across scenes too;
    # positive control: both arms gain, in the order of their reads; negative control: no signal, no
    # gain, and its reads and gains at the ends of both axes, where the correlation must not see them.
    cases = {
        "scene": (
            {"ar": 0.4, "flow_teacher": 2.5},
            {"ar": (0.1, -0.5, 0.7), "flow_teacher": (1.2, 0.2, 2.1)},
        ),
        "scene2": (
            {"ar": 0.6, "flow_teacher": 1.1},
            {"ar": (0.3, -0.1, 0.6), "flow_teacher": (0.9, 0.4, 1.3)},
        ),
        "scene3": (
            {"ar": 0.2, "flow_teacher": 3.1},
            {"ar": (0.05, -0.2, 0.3), "flow_teacher": (1.6, 1.1, 2.2)},
        ),
        "positive": (
            {"ar": 1.5, "flow_teacher": 3.0},
            {"ar": (0.8, 0.1, 1.4), "flow_teacher": (2.0, 1.1, 3.0)},
        ),
        "negative": (
            {"ar": 9.0, "flow_teacher": 0.01},
            {"ar": (-0.2, -0.9, 0.5), "flow_teacher": (3.0, -0.7, 6.1)},
        ),
    }
    decisions, phase2s = [], []
    for key, (choice, gains) in cases.items():
        reads = {
            arm: {
                "median_group_std_progress_cm": value * 1.5,
                "median_choice_std_cm": value,
                "chaos_fraction": 0.9 if key == "negative" else 0.05,
                "mean_progress_delta_cm": -value,
            }
            for arm, value in choice.items()
        }
        d, p = member_records(tmp_path / "results" / key, loaded(members[key]), reads, gains)
        decisions.append(d)
        phase2s.append(p)
    return decisions, phase2s


def test_the_page_ranks_reads_against_gains_and_judges_the_controls(
    tmp_path: Path, members: dict[str, Path]
) -> None:
    path = study_file(tmp_path / "study.yaml", _entries(members))
    lock_study(path)
    study = load_study(path)
    decisions, phase2s = _records(tmp_path, members)
    out = tmp_path / "out"
    files = [out / "validation.md", out / "validation.json", out / "arms.parquet", out / "probe_vs_gain.png"]
    record = build_study_report(study, decisions, phase2s, *files)
    assert [r["arm"] for r in record["rows"]] == ["ar", "flow_teacher"] * 5
    primary = next(c for c in record["correlations"] if c["read"] == "median_choice_std_cm")
    # The six subject arms only: the controls (the luck plane reads 9.0 and gains nothing) stay out.
    assert primary["n"] == 6 and primary["rho"] == pytest.approx(1.0)
    assert primary["inference"] == "arm bootstrap"
    assert record["answer"].startswith("Yes, the probe's ordering matches the gains'")
    controls = " ".join(record["controls"])
    assert "Positive control smooth_b: the pilot resolved a gain above zero on ar, flow_teacher" in controls
    assert "Negative control luck_c: the probe qualified ar (it must not)" in controls
    table = pq.read_table(files[2]).to_pandas()
    assert list(table["gain"]) == [0.1, 1.2, 0.3, 0.9, 0.05, 1.6, 0.8, 2.0, -0.2, 3.0]
    assert list(table["counted"]) == [True] * 6 + [False] * 4
    page = files[0].read_text()
    assert "![probe read against pilot gain](probe_vs_gain.png)" in page
    assert "| median_choice_std_cm (the registered predictor) | 6 | +1.00 |" in page
    assert "Power: not stated" in page
    first = {f.name: f.read_bytes() for f in files}
    build_study_report(study, decisions, phase2s, *files)
    assert {f.name: f.read_bytes() for f in files} == first, "the study's outputs must be byte-identical"
    assert json.loads(files[1].read_text())["study"]["sha256"] == study.sha256


def test_a_member_record_of_another_design_version_is_refused(
    tmp_path: Path, members: dict[str, Path]
) -> None:
    path = study_file(tmp_path / "study.yaml", _entries(members))
    lock_study(path)
    study = load_study(path)
    decisions, phase2s = _records(tmp_path, members)
    record = json.loads(phase2s[3].read_text())
    record["design"]["prereg_sha256"] = "0" * 64
    phase2s[3].write_text(json.dumps(record))
    with pytest.raises(
        ValueError, match=r"phase2\.json: written for prereg sha256 0{64}, but .*smooth_b\.yaml"
    ):
        build_study_report(
            study, decisions, phase2s, *(tmp_path / n for n in ("a.md", "a.json", "a.parquet", "a.png"))
        )


def test_an_unmoved_pilot_has_no_gain_to_rank(tmp_path: Path, members: dict[str, Path]) -> None:
    path = study_file(tmp_path / "study.yaml", _entries(members))
    lock_study(path)
    study = load_study(path)
    decisions, phase2s = _records(tmp_path, members)
    for index in (0, 4):  # a subject's and the negative control's flow pilot did not move the policy
        record = json.loads(phase2s[index].read_text())
        stage = next(s for s in record["stages"] if s["arm"] == "flow_teacher")
        stage["movement"]["moved"], stage["verdict"] = False, "not tested"
        stage["eval"]["changes"][0].update(delta=-1.3, ci_low=-1.9, ci_high=-0.5)  # an unlucky held-out draw
        phase2s[index].write_text(json.dumps(record))
    out = [tmp_path / n for n in ("v.md", "v.json", "v.parquet", "v.png")]
    result = build_study_report(study, decisions, phase2s, *out)
    primary = next(c for c in result["correlations"] if c["read"] == "median_choice_std_cm")
    assert primary["n"] == 5 and primary["rho"] == pytest.approx(1.0)
    assert result["left_out"] == ["- scene_a/flow_teacher: the pilot did not move it"]
    negative = next(line for line in result["controls"] if line.startswith("Negative control"))
    assert "the pilot resolved no gain, as it must not" in negative
    assert "did not move flow_teacher, so the held-out change there is the draws' luck" in negative


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted((REPO / "prereg/studies").glob("*.yaml")), ids=lambda p: p.name)
def test_every_registered_study_loads_locked_with_every_arm_piloted(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The studies under prereg/studies/ match their locks, and so does every member design (each loads
    through its own lock), each piloting every arm; the validation study has its two subjects and both
    controls."""
    monkeypatch.chdir(REPO)  # members are named relative to the workflow's folder
    study = load_study(path.relative_to(REPO))
    assert all(m.design.phase2 is not None and m.design.phase2.pilot == "every_arm" for m in study.members)
    roles = sorted(m.role for m in study.members)
    assert {"positive_control", "negative_control"} <= set(roles)
    if study.name == "validation":
        assert roles == ["negative_control", "positive_control", "subject", "subject"]
        luck = next(m.design for m in study.members if m.role == "negative_control")
        assert luck.env.params_dict()["key"] == "seed_and_actions"


def test_arm_labels_at_one_read_are_stacked_apart_and_a_lone_label_stays_at_its_point() -> None:
    """Arms that share a read (several sit at a choice std of 0) get labels at least one line apart;
    an arm alone in its column keeps its label beside its point."""
    points = [(50.0, 100.0), (52.0, 101.0), (51.0, 99.5), (300.0, 80.0)]  # points, in points
    offsets = label_offsets(points, column_pt=36.0)
    labels = sorted(y + dy for (_, y), dy in zip(points[:3], offsets[:3], strict=True))
    assert all(b - a >= LABEL_GAP_PT - 1e-9 for a, b in itertools.pairwise(labels))
    assert abs(sum(labels) / 3 - 100.0) < LABEL_GAP_PT  # the stack stays about its points
    assert offsets[3] == 0.0


def test_a_nested_powered_study_states_its_power_before_its_answer_and_counts_only_engaging_subjects(
    tmp_path: Path, members: dict[str, Path]
) -> None:
    """The registered inference is the two-stage bootstrap; an arm that never engages is listed but not
    counted; a study short of its registered size says so; the page gives the power (registered and at
    the measured reliability) before the answer, the within-design test and the classifier's table."""
    path = study_file(
        tmp_path / "study.yaml",
        _entries(members),
        bootstrap={
            "resamples": 400,
            "confidence": 0.9,
            "seed": 11,
            "levels": "designs_then_arms",
            "permutations": 199,
        },
        engagement={"read": "sampled_engagement_rate", "min": 0.1},
        min_subject_arms=8,
        power={"rho": 0.6, "reliability": 0.8, "simulations": 40, "resamples": 200, "seed": 5},
    )
    lock_study(path)
    study = load_study(path)
    assert study.levels == "designs_then_arms" and study.power is not None and study.power.rho == 0.6
    decisions, phase2s = _records(tmp_path, members)
    record = json.loads(decisions[1].read_text())  # scene_d's AR arm never moved the object
    cell = next(c for c in record["cells"] if c["arm"] == "ar")
    cell["reads"]["sampled_engagement_rate"] = 0.0
    decisions[1].write_text(json.dumps(record))
    out = [tmp_path / n for n in ("v.md", "v.json", "v.parquet", "v.png")]
    result = build_study_report(study, decisions, phase2s, *out)
    primary = next(c for c in result["correlations"] if c["read"] == "median_choice_std_cm")
    assert primary["n"] == 5 and primary["inference"] == "nested bootstrap"
    assert result["counted"] == 5 and result["reached_size"] is False
    assert result["left_out"] == ["- scene_d/ar: did not engage (engagement 0)"]
    assert result["inference"]["arms_per_design"] == {"scene_a": 2, "scene_d": 1, "scene_e": 2}
    calls = result["inference"]["classification"]
    # qualifies: choice std > 1 (study_cases); gained: the interval above zero
    assert (calls["go_gained"], calls["go_not"], calls["no_gained"], calls["no_not"]) == (3, 0, 0, 2)
    assert result["reliability"]["n"] == 5 and 0.0 < result["reliability"]["reliability"] < 1.0
    assert result["inference"]["power_registered"]["simulations"] == 40
    assert result["inference"]["permutation"]["permutations"] == 199
    page = out[0].read_text()
    power_at, answer_at = page.index("Power: a study of this size (5 counted"), page.index("did not reach")
    assert power_at < answer_at, "the power comes before the answer"
    assert "The study did not reach its registered size (5 of 8 counted subject arms)" in page
    assert "| probe says go | 3 | 0 | gained: 100 %" in page
    assert "permutation test that shuffles the gains only among the arms of each design" in page
    first = {f.name: f.read_bytes() for f in out}
    build_study_report(study, decisions, phase2s, *out)
    assert {f.name: f.read_bytes() for f in out} == first, "the study's outputs must be byte-identical"
