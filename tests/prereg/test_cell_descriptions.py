"""A cell description copied from a design whose arm the probe sampled itself is flagged by ``prereg check``
when the run config serves the arm or binds it through an adapter (grpo_probe.prereg.cell_descriptions)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grpo_probe.cli import main
from grpo_probe.prereg import ArmBinding, load_prereg, lock_path
from grpo_probe.prereg.cell_descriptions import description_warnings, sampler_words
from shipped_files import shipped_designs

from .design_edits import edited

REPO = Path(__file__).resolve().parents[2]
SERVED = ArmBinding("flow_teacher", "server", address="ws://127.0.0.1:8765")
ODE_CELL = "warning: cells[c3_teacher_ode].description"


def test_sampler_words_are_whole_words_and_acronyms_in_capitals() -> None:
    assert sampler_words("fresh ODE noise per draw (Heun, 10 steps)") == ["ODE", "Heun"]
    assert sampler_words("one episode per mode; the act() code; flow_sde; SDE-like") == []
    assert sampler_words("LeRobot's DDPM steps, or ACT's latent at temperature 1.0") == [
        "temperature",
        "DDPM",
        "ACT",
    ]


@pytest.mark.parametrize("path", shipped_designs(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_shipped_design_describes_a_cell_with_another_sampler_than_its_mode(path: Path) -> None:
    assert description_warnings(load_prereg(path, require_lock=False), {}) == []


def test_a_served_arm_whose_cell_names_the_probes_ode_sampler_is_warned_of() -> None:
    smoke = load_prereg(REPO / "prereg/smoke.yaml", require_lock=False)
    (line,) = description_warnings(smoke, {"flow_teacher": SERVED}, {"flow_teacher": "lab.yaml"})
    assert line.startswith(f'{smoke.path}: {ODE_CELL}: "flow arm, fresh ODE noise per draw (Heun, 10 steps)"')
    assert "names the probe's own sampler (ODE, Heun), but arm flow_teacher is served" in line
    assert "(lab.yaml: arms.flow_teacher.source: server)" in line and "DDPM" in line
    # the AR cell's "temperature" is the mode the server is handed, not the probe's integrator
    ar = ArmBinding("ar", "server", address="ws://127.0.0.1:8766")
    assert description_warnings(smoke, {"ar": ar}) == []


def test_an_adapter_is_flagged_and_a_checkpoint_of_the_probes_own_format_is_not() -> None:
    smoke = load_prereg(REPO / "prereg/smoke.yaml", require_lock=False)
    adapter = ArmBinding("flow_teacher", "checkpoint", path="/data/t.pt", adapter="lab.adapters:load")
    (line,) = description_warnings(smoke, {"flow_teacher": adapter})
    assert "is bound through an adapter (arms.flow_teacher.adapter: lab.adapters:load)" in line
    own = ArmBinding("flow_teacher", "checkpoint", path="/data/t.pt")
    assert description_warnings(smoke, {"flow_teacher": own}) == []


def _describe(tmp_path: Path, text: str) -> Path:
    def edit(raw: dict) -> None:
        next(c for c in raw["cells"] if c["id"] == "c3_teacher_ode")["description"] = text

    return edited(tmp_path, "smoke.yaml", edit)


def test_a_description_rewritten_for_the_server_holds_there_and_is_flagged_on_the_probes_own_arm(
    tmp_path: Path,
) -> None:
    """What a lab writes for a served Diffusion checkpoint passes with the arm served; copied back to a
    design whose arm the probe samples, it names a sampler other than the cell's mode."""
    design = load_prereg(
        _describe(tmp_path, "LeRobot Diffusion, fresh DDPM noise per draw"), require_lock=False
    )
    assert description_warnings(design, {"flow_teacher": SERVED}) == []
    (line,) = description_warnings(design, {})
    assert f"{ODE_CELL}: " in line and "names DDPM, but the cell's mode is flow_ode (Heun decode" in line


def test_a_description_naming_another_of_the_probes_samplers_is_flagged(tmp_path: Path) -> None:
    design = load_prereg(_describe(tmp_path, "flow arm, SDE sampler at a = 0.5"), require_lock=False)
    (line,) = description_warnings(design, {})
    assert "names SDE, but the cell's mode is flow_ode" in line and "the probe draws arm flow_teacher" in line


@pytest.fixture
def locked_smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The smoke design and its lock in a folder of their own, with no config/config.yaml beside them."""
    (tmp_path / "prereg").mkdir()
    for name in ("smoke.yaml", "smoke.yaml.lock"):
        shutil.copy(REPO / "prereg" / name, tmp_path / "prereg" / name)
    monkeypatch.chdir(tmp_path)
    assert lock_path(Path("prereg/smoke.yaml")).is_file()
    return Path("prereg/smoke.yaml")


def test_prereg_check_warns_naming_the_design_the_cell_and_the_config_that_serves_the_arm(
    locked_smoke: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prereg", "check", str(locked_smoke)]) == 0
    assert "description" not in capsys.readouterr().err  # no run config: every arm is the reference
    Path("lab.yaml").write_text('arms:\n  flow_teacher: {source: server, address: "ws://gpu-node-3:8765"}\n')
    assert main(["prereg", "check", str(locked_smoke), "--configfile", "lab.yaml"]) == 0  # a warning
    out, err = capsys.readouterr()
    assert "valid and locked" in out
    assert f"{locked_smoke}: {ODE_CELL}: " in err
    assert "(--configfile " in err and "lab.yaml: arms.flow_teacher.source: server)" in err
    assert main(["prereg", "check", str(locked_smoke), "--configfile", "nowhere.yaml"]) == 2
    assert "nowhere.yaml: config file not found" in capsys.readouterr().err
