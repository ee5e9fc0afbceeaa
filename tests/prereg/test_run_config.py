"""Run config: validated against its schema, defaults filled, arm bindings refer to registered arms."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.prereg import SchemaError, arm_bindings, load_config, load_prereg

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("prereg_file", ["prereg/grpo_signal_probe.yaml", "prereg/smoke.yaml"])
def test_shipped_config_binds_every_arm_of_both_designs(prereg_file: str) -> None:
    config = load_config(REPO / "config/config.yaml")
    prereg = load_prereg(REPO / prereg_file)
    bindings = arm_bindings(config, prereg)
    assert list(bindings) == list(prereg.arms)
    assert {b.source for b in bindings.values()} == {"reference"}


def test_empty_config_takes_the_schema_defaults() -> None:
    config = load_config({})
    assert (str(config.prereg), config.workers, config.device, str(config.results)) == (
        "prereg/grpo_signal_probe.yaml",
        2,
        "cpu",
        "results",
    )
    assert config.arms == {}


def test_checkpoint_binding_needs_path_and_adapter() -> None:
    config = load_config(
        {"arms": {"ar": {"source": "checkpoint", "path": "ck.pt", "adapter": "my_lab.io:load"}}}
    )
    assert (config.arms["ar"].path, config.arms["ar"].adapter) == ("ck.pt", "my_lab.io:load")
    with pytest.raises(SchemaError, match=r"config: arms\.ar: .* \('adapter' is a required property\)"):
        load_config({"arms": {"ar": {"source": "checkpoint", "path": "ck.pt"}}})


def test_bad_device_names_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("device: tpu\n")
    with pytest.raises(SchemaError, match=rf"{path}: device: 'tpu' is not one of \['cpu', 'cuda'\]"):
        load_config(path)


def test_binding_for_an_unregistered_arm_is_refused() -> None:
    config = load_config({"arms": {"ghost": {"source": "reference"}}})
    prereg = load_prereg(REPO / "prereg/smoke.yaml")
    with pytest.raises(ValueError, match=r"config: arms\.ghost: 'ghost' is not one of the arms"):
        arm_bindings(config, prereg)
