"""A study whose gain is registered by policy: it ranks the mean of each arm's pilot replicates, and the
gains' reliability comes from the replicates' spread (ICC(1,k), the Spearman-Brown mean of k pilots)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from grpo_probe.cli import main
from grpo_probe.prereg import lock_prereg
from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.study.design import StudyError, load_study, lock_study
from grpo_probe.study.reliability import (
    gain_reliability,
    replicate_note,
    replicate_reliability,
    spearman_brown,
)
from grpo_probe.study.report import build_study_report

from .study_cases import CELLS, REPO, loaded, member_records, study_file

# Per design and arm: (median choice std, anchor replicate gains, sampled replicate gains).
ARMS: dict[str, dict[str, tuple[float, list[float], list[float]]]] = {
    "rep_a": {"ar": (0.5, [0.1, 0.3], [0.2, 0.4]), "flow_teacher": (2.0, [1.0, 1.4], [2.0, 2.2])},
    "rep_b": {"ar": (0.8, [0.5, 0.1], [0.9, 0.7]), "flow_teacher": (3.0, [0.2, 0.6], [3.1, 2.5])},
    "rep_c": {"ar": (0.2, [0.0, -0.2], [0.1, -0.3]), "flow_teacher": (1.5, [0.9, 0.7], [1.2, 1.6])},
}


def replicate_design(folder: Path, name: str, replicates: int = 2, sampled: bool = True) -> Path:
    """The smoke design renamed ``name``, piloted on every arm with ``replicates`` replicates."""
    raw = read_yaml(REPO / "prereg" / "smoke.yaml")
    raw["name"] = name
    phase2 = raw["phase2"]
    phase2["pilot"] = "every_arm"
    phase2["replicates"] = replicates
    phase2["train_seeds"] = {"first": 2000, "count": replicates * 4}
    if sampled:
        phase2["sampled_draws"] = 4
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    lock_prereg(path)
    return path


def _gain(policy: str, replicates: list[float]) -> dict[str, Any]:
    mean = float(np.mean(replicates))
    sd = float(np.std(replicates, ddof=1))
    return {
        "policy": policy,
        "read": "progress_final_cm",
        "draws": 1 if policy == "anchor" else 4,
        "replicates": [
            {"replicate": r, "gain": g, "ci_low": g - 0.5, "ci_high": g + 0.5, "diff_sd": 1.0, "seeds": 96}
            for r, g in enumerate(replicates)
        ],
        "gain": mean,
        "ci_low": mean - 0.3,
        "ci_high": mean + 0.3,
        "replicate_sd": sd,
        "se": sd / np.sqrt(len(replicates)),
    }


def _records(tmp_path: Path, designs: dict[str, Path]) -> tuple[list[Path], list[Path]]:
    decisions, phase2s = [], []
    for name, arms in ARMS.items():
        reads = {
            arm: {
                "median_group_std_progress_cm": 1.0,
                "median_choice_std_cm": choice,
                "chaos_fraction": 0.1,
                "mean_progress_delta_cm": 0.0,
            }
            for arm, (choice, _, _) in arms.items()
        }
        anchor = {
            arm: (float(np.mean(a)), float(np.mean(a)) - 1.0, float(np.mean(a)) + 1.0)
            for arm, (_, a, _) in arms.items()
        }
        d, p = member_records(tmp_path / "results" / name, loaded(designs[name]), reads, anchor)
        record = json.loads(p.read_text())
        for stage in record["stages"]:
            _, a, s = arms[stage["arm"]]
            stage["held_out"] = {"replicates": 2, "gains": [_gain("anchor", a), _gain("sampled", s)]}
        p.write_text(json.dumps(record))
        decisions.append(d)
        phase2s.append(p)
    return decisions, phase2s


@pytest.fixture()
def designs(tmp_path: Path) -> dict[str, Path]:
    return {name: replicate_design(tmp_path / "designs" / name, name) for name in ARMS}


def _entries(designs: dict[str, Path]) -> list[dict[str, Any]]:
    return [{"design": str(p), "role": "subject", "cells": dict(CELLS)} for p in designs.values()]


def test_the_study_ranks_the_registered_policys_mean_gain_with_the_replicate_reliability(
    tmp_path: Path, designs: dict[str, Path]
) -> None:
    path = study_file(
        tmp_path / "study.yaml",
        _entries(designs),
        gain={"read": "progress_final_cm", "policy": "sampled"},
    )
    lock_study(path)
    study = load_study(path)
    assert (study.gain, study.gain_policy, study.replicates) == ("progress_final_cm", "sampled", 2)
    decisions, phase2s = _records(tmp_path, designs)
    out = [tmp_path / n for n in ("v.md", "v.json", "v.parquet", "v.png")]
    record = build_study_report(study, decisions, phase2s, *out)
    sampled = [s for arms in ARMS.values() for _, _, s in arms.values()]
    assert [r["gain"] for r in record["rows"]] == pytest.approx([np.mean(s) for s in sampled])
    assert [list(r["replicate_gains"]) for r in record["rows"]] == sampled
    # every arm has two replicates: the reliability is ICC(1,k) of the replicates, by hand here
    x = np.array(sampled)
    within = np.var(x, axis=1, ddof=1).mean()
    observed = np.var(x.mean(axis=1), ddof=1)
    rel = record["reliability"]
    assert rel["replicates"] == 2 and rel["n"] == 6
    assert rel["reliability"] == pytest.approx(1 - within / (2 * observed))
    between = observed - within / 2
    assert rel["single_replicate"] == pytest.approx(between / (between + within))
    assert spearman_brown(rel["single_replicate"], 2) == pytest.approx(rel["reliability"])
    # the same number as the standard-error form with se = s_r / sqrt(k)
    se = np.std(x, axis=1, ddof=1) / np.sqrt(2)
    assert gain_reliability(x.mean(axis=1), se).reliability == pytest.approx(rel["reliability"])
    assert record["study"]["gain_policy"] == "sampled"
    page = out[0].read_text()
    assert "ICC(1,k) of the one-way random-effects model" in page
    assert "pilot gain in progress_final_cm, sampled policy (trained), mean of replicates [CI]" in page
    assert "| replicate gains |" in page and "| +2, +2.2 |" in page
    # both policies per arm, whichever the study ranks
    assert "## What GRPO trains and what a lab deploys" in page
    row = "| rep_a | flow_teacher | yes | +1.2 [+0.9, +1.5] (se 0.2) | +2.1 [+1.8, +2.4] (se 0.1) |"
    assert row in page
    assert record["rows"][1]["policy_gains"]["anchor"]["gain"] == pytest.approx(1.2)
    # the anchor's gain is another column of the same records: registering it ranks other numbers
    anchor_path = study_file(
        tmp_path / "anchor.yaml", _entries(designs), gain={"read": "progress_final_cm", "policy": "anchor"}
    )
    lock_study(anchor_path)
    anchor = build_study_report(load_study(anchor_path), decisions, phase2s, *out)
    assert [r["gain"] for r in anchor["rows"]] == pytest.approx(
        [np.mean(a) for arms in ARMS.values() for _, a, _ in arms.values()]
    )


def test_a_gain_registered_as_a_column_reads_as_before(tmp_path: Path, designs: dict[str, Path]) -> None:
    path = study_file(tmp_path / "study.yaml", _entries(designs))
    lock_study(path)
    study = load_study(path)
    assert study.gain_policy is None
    decisions, phase2s = _records(tmp_path, designs)
    out = [tmp_path / n for n in ("v.md", "v.json", "v.parquet", "v.png")]
    record = build_study_report(study, decisions, phase2s, *out)
    assert all("replicate_gains" not in r for r in record["rows"]) and "gain_policy" not in record["study"]
    assert all(set(r["policy_gains"]) == {"anchor", "sampled"} for r in record["rows"])
    assert "replicates" not in record["reliability"]
    assert "Reliability = 1 - mean(se^2) / var(gains)" in out[0].read_text()


def test_a_sampled_gain_needs_every_member_to_score_it_and_equal_replicates(tmp_path: Path) -> None:
    designs = {
        "rep_a": replicate_design(tmp_path / "a", "rep_a"),
        "rep_b": replicate_design(tmp_path / "b", "rep_b", sampled=False),
        "rep_c": replicate_design(tmp_path / "c", "rep_c", replicates=3),
    }
    path = study_file(
        tmp_path / "study.yaml", _entries(designs), gain={"read": "progress_final_cm", "policy": "sampled"}
    )
    with pytest.raises(StudyError) as caught:
        lock_study(path)
    message = str(caught.value)
    assert "gain.policy: sampled, but members[1]" in message and "phase2.sampled_draws" in message
    assert "register different phase2.replicates" in message
    bad = study_file(tmp_path / "bad.yaml", _entries(designs), gain={"read": "progress_final_cm"})
    with pytest.raises(ValueError, match=r"bad\.yaml: gain: .* is not valid"):
        lock_study(bad)


def test_replicate_reliability_edges_and_the_check_states_what_one_pilot_must_reach(
    tmp_path: Path, designs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match="same number of replicates"):
        replicate_reliability([[1.0, 2.0], [1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="at least 2 replicates"):
        replicate_reliability([[1.0], [2.0]])
    noisy = replicate_reliability([[0.0, 2.0], [2.0, 0.0], [1.2, 1.0]])
    assert noisy.reliability == 0.0 and noisy.between_var is not None and noisy.between_var < 0
    assert replicate_reliability([[1.0, 1.0]]).reliability is None  # one arm: no spread between arms
    assert spearman_brown(0.9, 0.5) == pytest.approx(0.9 / (2 - 0.9))
    assert "at least 0.818" in replicate_note(2, 0.9)
    path = study_file(
        tmp_path / "study.yaml",
        _entries(designs),
        gain={"read": "progress_final_cm", "policy": "sampled"},
        bootstrap={"resamples": 200, "confidence": 0.9, "seed": 3, "levels": "designs_then_arms"},
        power={"rho": 0.6, "reliability": 0.9, "simulations": 20, "resamples": 100, "seed": 5},
    )
    lock_study(path)
    assert main(["study", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "power at the registered size (2 + 2 + 2 subject arms" in out
    assert "replicates: each arm's gain is the mean of 2 pilot replicates" in out and "0.818" in out
