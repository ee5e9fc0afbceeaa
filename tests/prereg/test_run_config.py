"""Run config: validated against its schema, defaults filled, arm bindings refer to registered arms."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.prereg import SchemaError, arm_bindings, load_config, load_prereg
from grpo_probe.prereg.run_config import ConfigSource, config_sources

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


def test_binding_a_checkpoint_to_an_unregistered_arm_is_refused() -> None:
    bound = {"ghost": {"source": "checkpoint", "path": "/data/ghost.pt", "adapter": "my_lab.adapters:load"}}
    config = load_config({"arms": bound})
    prereg = load_prereg(REPO / "prereg/smoke.yaml")
    with pytest.raises(ValueError, match=r"config: arms\.ghost: 'ghost' is not one of the arms"):
        arm_bindings(config, prereg)


def test_the_shipped_configs_reference_bindings_run_a_design_with_other_arm_ids() -> None:
    """config/config.yaml names the registered probe's arms as reference; the vision design's arm is
    flow_vision, and a reference binding is the default anyway, so it runs with the shipped config."""
    config = load_config({"arms": {"ar": {"source": "reference"}, "flow_teacher": {"source": "reference"}}})
    bindings = arm_bindings(config, load_prereg(REPO / "prereg/designs/smoke/vision_smoke.yaml"))
    assert list(bindings) == ["flow_vision"] and bindings["flow_vision"].source == "reference"


def test_an_error_names_the_source_that_set_the_field(tmp_path: Path) -> None:
    """Sources merge in order (config.yaml, each --configfile, --config); the last to set a field owns it."""
    shipped = tmp_path / "config.yaml"
    shipped.write_text("workers: 2\ndevice: cpu\n")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("device: cuda\nworker: 4\n")
    sources = config_sources([str(shipped)], [cluster], {"workers": "abc"})
    assert [s.name for s in sources] == [str(shipped), f"--configfile {cluster}", "--config"]
    merged = {"workers": "abc", "device": "cuda", "worker": 4}
    with pytest.raises(SchemaError) as err:
        load_config(merged, sources=sources)
    lines = str(err.value).splitlines()
    unknown = "(top level): 'worker' was unexpected; did you mean 'workers'?"
    assert f"--configfile {cluster}: {unknown}" in lines
    assert "--config: workers: 'abc' is not of type 'integer'" in lines
    assert len(lines) == 2


def test_a_nested_error_names_the_source_of_the_binding() -> None:
    sources = [
        ConfigSource("config/config.yaml", {"arms": {"ar": {"source": "reference"}}}),
        ConfigSource("--configfile byo.yaml", {"arms": {"ar": {"source": "checkpoint", "path": "ck.pt"}}}),
    ]
    merged = {"arms": {"ar": {"source": "checkpoint", "path": "ck.pt"}}}
    with pytest.raises(
        SchemaError, match=r"^--configfile byo\.yaml: arms\.ar: .*'adapter' is a required property"
    ):
        load_config(merged, sources=sources)


def test_the_workflow_file_is_not_named_twice_when_also_given_on_the_command_line(tmp_path: Path) -> None:
    shipped = tmp_path / "config.yaml"
    shipped.write_text("workers: 3\n")
    sources = config_sources([shipped], [shipped], {})
    assert [s.name for s in sources] == [f"--configfile {shipped}"]
    assert load_config({"workers": 3}, sources=sources).workers == 3


def test_a_server_binding_takes_a_ws_address_and_an_optional_timeout() -> None:
    config = load_config(
        {"arms": {"ar": {"source": "server", "address": "ws://gpu-3:8765", "timeout_s": 30}}}
    )
    assert (config.arms["ar"].address, config.arms["ar"].timeout_s) == ("ws://gpu-3:8765", 30.0)
    assert (
        load_config({"arms": {"ar": {"source": "server", "address": "ws://h:1"}}}).arms["ar"].timeout_s
        is None
    )
    for wrong in (
        {"source": "server"},
        {"source": "server", "address": "http://gpu-3:8765"},
        {"source": "server", "address": "ws://gpu-3"},
        {"source": "server", "address": "ws://gpu-3:8765", "timeout_s": 0},
        {"source": "server", "address": "ws://gpu-3:8765", "path": "x.pt"},
    ):
        with pytest.raises(SchemaError, match=r"arms\.ar"):
            load_config({"arms": {"ar": wrong}})
