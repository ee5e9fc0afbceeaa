"""``grpo-probe expert DESIGN`` and ``grpo-probe design new``: a design's expert measured, and a new design
written from another with the measured fields, no history and a lock.

Why: a lab that wanted another task of a served suite copied YAML by hand, guessed the episode and the
radius, and had to remember to clear the copied amendments. These run the commands as a lab would, on
scenes that run in process (the smooth plane, Gymnasium's Reacher-v5); the served MetaWorld path runs in
the opt-in served-simulator tests (tests/e2e/test_metaworld_served.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grpo_probe.cli import main
from grpo_probe.envs.expert_competence import measure_expert
from grpo_probe.prereg import load_prereg
from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.cross_field import design_environment
from grpo_probe.prereg.new_design import episode_field, radius_field, start_from

REPO = Path(__file__).resolve().parents[2]
PLANE = "prereg/designs/controls/smooth_plane_smoke.yaml"
REACHER = "prereg/designs/smoke/reacher_smoke.yaml"
PUSH = "prereg/designs/served/metaworld_push_smoke.yaml"


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A lab's folder: the shared rule files and the two in-process designs, as the repository lays them."""
    shutil.copytree(REPO / "prereg/rules", tmp_path / "prereg/rules")
    for design in (PLANE, REACHER):
        (tmp_path / design).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / design, tmp_path / design)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_expert_prints_the_measurement_and_writes_it_as_json(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["expert", PLANE, "--seeds", "3", "--json", "expert.json"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"the expert of {PLANE} (grpo_probe.envs.planes:make_smooth_plane): 3 seeds (0..2)")
    assert "up to 12 replans x 8 = 96 ticks" in out and "| episode | 3 replans x 8 = 24 ticks |" in out
    prereg = load_prereg(PLANE, require_lock=False)  # a draft: the command needs no lock
    expected = measure_expert(prereg.env, range(3), prereg.training.demo_noise, prereg.run_key)
    assert json.loads((lab / "expert.json").read_text()) == json.loads(
        json.dumps({"design": PLANE, **expected.to_dict()})
    )


def test_design_new_writes_the_measured_fields_with_no_history_and_locks_it(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["design", "new", "--from", REACHER, "--task", "Reacher-v5", "--seeds", "3", "reacher_mine"]
    assert main(args) == 0
    out = capsys.readouterr().out
    path = lab / "prereg/designs/smoke/reacher_mine.yaml"
    made = load_prereg(path)  # valid, and locked: the lock is checked
    assert made.name == "reacher_mine" and made.amendments == () and len(made.versions) == 1
    source = read_yaml(lab / REACHER)
    report = measure_expert(design_environment(source), range(3), 0.03, source["run_key"])
    params = read_yaml(path)["env"]["params"]
    assert params["replans"] == report.suggested.replans
    assert (
        params["success_radius_m"] == report.suggested.radius_m != source["env"]["params"]["success_radius_m"]
    )
    text = path.read_text()
    assert text.startswith(
        f"# Made by: grpo-probe design new --from {REACHER} --task Reacher-v5 reacher_mine\n"
    )
    assert f"env.params.replans {report.suggested.replans:g} (was 3)" in " ".join(text.split())
    assert "wrote prereg/designs/smoke/reacher_mine.yaml: env.params.replans" in out
    assert "valid and locked" in out
    assert source["amendments"] and read_yaml(path)["amendments"] == []  # the source's history stays behind
    unchanged = {k: v for k, v in read_yaml(path).items() if k not in ("name", "env", "amendments")}
    assert unchanged == {k: v for k, v in source.items() if k not in ("name", "env", "amendments")}
    assert main(args) == 2  # a new design gets a file of its own
    assert "reacher_mine.yaml exists: a new design gets a file of its own" in capsys.readouterr().err


def test_a_design_without_a_task_is_refused_naming_the_field(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["design", "new", "--from", PLANE, "--task", "drawer-open-v3", "mine"]) == 2
    err = capsys.readouterr().err
    assert f"{PLANE}: env.params: the design names no task (env.params.gym_id) for --task to change" in err
    assert not (lab / "prereg/designs/controls/mine.yaml").exists()


def test_a_copy_starts_clean_and_takes_its_task_into_its_description() -> None:
    smoke = read_yaml(REPO / "prereg/smoke.yaml")
    assert smoke["amendments"], "the test needs a design with amendments"
    clean = start_from(smoke, "prereg/smoke.yaml", "mine", None)
    assert clean == {**smoke, "name": "mine", "amendments": []}
    push = read_yaml(REPO / PUSH)
    drawer = start_from(push, PUSH, "drawer", "drawer-open-v3")
    assert (
        drawer["env"]["params"]["gym_id"] == "drawer-open-v3" and push["env"]["params"]["gym_id"] == "push-v3"
    )
    assert "drawer-open-v3" in drawer["description"] and "push-v3" not in drawer["description"]


@pytest.mark.parametrize(
    ("design", "episode", "radius"),
    [
        (PUSH, "env.params.replans", "env.params.success_radius_m"),
        ("prereg/smoke.yaml", "sim.replans", "sim.disk_radius_m"),
        ("prereg/designs/smoke/pusher_smoke.yaml", "env.params.replans", "env.params.success_radius_m"),
        (PLANE, "env.params.replans", None),
    ],
)
def test_the_measured_fields_are_where_each_environment_registers_them(
    design: str, episode: str, radius: str | None
) -> None:
    raw = read_yaml(REPO / design)
    config = design_environment(raw)
    assert ".".join(episode_field(raw, config) or ()) == episode
    found = radius_field(raw, config)
    assert (".".join(found) if found else None) == radius
