"""A sampling kind is one registered declaration: a toy kind added here flows through the design check,
the prereg schema, the text reports print, the records and the flow head, with no other file changed."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from grpo_probe.policies.check.determinism import draw0_twins_of
from grpo_probe.policies.flow_head import FlowPolicy, VelocityMLP
from grpo_probe.policies.flow_sde import NoiseFn, Velocity, time_grid
from grpo_probe.policies.protocol import RowKey
from grpo_probe.prereg import PreregError, load_prereg
from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.schema import default_schema_dir, load_prereg_schema
from grpo_probe.rollout.oracles import draw0_probe_mode
from grpo_probe.sampling import (
    SAMPLING_KINDS,
    Draw0,
    SamplerKind,
    SamplingMode,
    mode_params,
    mode_schema_rules,
    mode_text,
    register_sampler,
    register_sampler_entry,
    sampler,
    sampling_kinds,
    unregister_sampler,
)

REPO = Path(__file__).resolve().parents[2]
TOY = "toy_midpoint"
"""A toy kind of the shape of docs/extending.md's ``flow_midpoint``, under a name of its own (a reader who
adds the example keeps this test passing: tests/test_docs_examples.py)."""


def _midpoint(
    velocity: Velocity, x: torch.Tensor, mode: SamplingMode, noise: NoiseFn
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Explicit midpoint rule from t = 1 to t = 0: x <- x - dt v(x - dt/2 v(x, t), t - dt/2)."""
    grid = time_grid(mode.steps)
    for i in range(mode.steps):
        t, dt = grid[i], grid[i] - grid[i + 1]
        half = x - 0.5 * dt * velocity(x, t)
        x = x - dt * velocity(half, t - 0.5 * dt)
    return x, None


@pytest.fixture
def toy_kind() -> Iterator[SamplerKind]:
    """The toy kind and its entry, registered for one test (its entry lives in this module)."""
    kind = register_sampler(
        SamplerKind(
            TOY, head="flow", takes=("steps",), summary="explicit midpoint rule", entry_module=__name__
        )
    )
    register_sampler_entry(TOY)(_midpoint)
    try:
        yield kind
    finally:
        unregister_sampler(TOY)


JITTER = "flow_jitter"


def _jitter(
    velocity: Velocity, x: torch.Tensor, mode: SamplingMode, noise: NoiseFn
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Euler steps plus a * sqrt(dt) * keyed noise: at a = 0 it is the Euler sampler bit for bit."""
    grid = time_grid(mode.steps)
    for i in range(mode.steps):
        t, dt = grid[i], grid[i] - grid[i + 1]
        x = x - dt * velocity(x, t) + float(mode.sde_a) * math.sqrt(dt) * noise(i)  # type: ignore[arg-type]
    return x, None


@pytest.fixture
def jitter_kind() -> Iterator[SamplerKind]:
    """A stochastic toy kind whose noise-off twin (a = 0) reproduces the Euler sampler."""
    kind = register_sampler(
        SamplerKind(
            JITTER,
            head="flow",
            takes=("sde_a", "steps"),
            summary="Euler with additive keyed noise",
            entry_module=__name__,
            draw0=Draw0(
                probe=lambda m: SamplingMode(JITTER, sde_a=0.0, steps=m.steps),
                twin_of=lambda m: SamplingMode("flow_euler", steps=m.steps),
                against="run",
                reference_name="euler",
                skip=("mode", "sde_a"),
                compared="every column but the mode labels against the Euler sampler",
            ),
        )
    )
    register_sampler_entry(JITTER)(_jitter)
    try:
        yield kind
    finally:
        unregister_sampler(JITTER)


def _design(tmp_path: Path, edit: Any) -> Path:
    raw = read_yaml(REPO / "prereg" / "smoke.yaml")
    edit(raw)
    path = tmp_path / "smoke.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _load_error(path: Path) -> str:
    with pytest.raises(PreregError) as info:
        load_prereg(path, require_lock=False)
    return str(info.value)


def test_the_schema_enum_is_the_registry() -> None:
    schema = load_prereg_schema()
    mode = schema["$defs"]["sampling_mode"]
    assert mode["properties"]["kind"]["enum"] == list(sampling_kinds()) == list(SAMPLING_KINDS)
    required = {rule["if"]["properties"]["kind"]["const"]: rule["then"]["required"] for rule in mode["allOf"]}
    assert required["temperature"] == ["temperature"] and required["flow_sde"] == ["sde_a"]
    assert set(required) == {k for k in sampling_kinds() if sampler(k).required}  # one more per kind added
    assert {"temperature", "flow_ode", "flow_sde"} <= set(schema["$defs"]["cell_kind"]["enum"])
    assert schema["$defs"]["cell_kind"]["enum"] == [k for k in sampling_kinds() if sampler(k).cell]
    assert "greedy" not in schema["$defs"]["cell_kind"]["enum"]  # cell=False: its K draws are identical
    # the schema file itself lists no kinds: the registry is their one definition
    on_disk = read_yaml(default_schema_dir() / "prereg.schema.yaml")["$defs"]["sampling_mode"]
    assert "enum" not in on_disk["properties"]["kind"] and "allOf" not in on_disk
    assert "enum" not in read_yaml(default_schema_dir() / "prereg.schema.yaml")["$defs"]["cell_kind"]


def test_the_built_in_kinds_print_as_before() -> None:
    assert mode_text(SamplingMode("greedy")) == "greedy"
    assert mode_text(SamplingMode("temperature", temperature=1.6)) == "temperature(T=1.6)"
    assert (
        mode_text(SamplingMode("temperature", temperature=1.6, noise=False))
        == "temperature(T=1.6, noise off)"
    )
    assert mode_text(SamplingMode("flow_sde", sde_a=0.5)) == "flow_sde(a=0.5, steps=10)"
    assert mode_text(SamplingMode("flow_ode", steps=4)) == "flow_ode(steps=4)"
    assert mode_params(SamplingMode("flow_sde", sde_a=0.5)) == {"sde_a": 0.5, "steps": 10}
    assert mode_params(SamplingMode("temperature", temperature=2.0)) == {"temperature": 2.0}
    assert draw0_probe_mode(SamplingMode("flow_sde", sde_a=0.5, steps=4)) == SamplingMode(
        "flow_sde", sde_a=0.0, steps=4
    )


def test_a_kind_is_registered_once_and_takes_only_known_parameters(toy_kind: SamplerKind) -> None:
    with pytest.raises(ValueError, match=f"'{TOY}' is already registered"):
        register_sampler(toy_kind)
    with pytest.raises(ValueError, match="takes unknown parameter"):
        SamplerKind("beam", head="ar", takes=("width",), summary="", entry_module=__name__)


def test_a_registered_kind_is_a_valid_mode_with_its_text_and_record(toy_kind: SamplerKind) -> None:
    mode = SamplingMode(TOY, steps=4)
    assert mode.head == "flow" and sampler(TOY).deterministic
    assert mode_text(mode) == f"{TOY}(steps=4)"
    assert mode_params(mode) == {"steps": 4}
    assert draw0_probe_mode(mode) == mode  # deterministic: its own draw-0 probe
    with pytest.raises(ValueError, match="sde_a is only allowed for kind 'flow_sde'"):
        SamplingMode(TOY, sde_a=0.5)
    kinds, _, cell_kinds = mode_schema_rules()
    assert TOY in kinds and TOY in cell_kinds and TOY in SAMPLING_KINDS
    schema = load_prereg_schema()
    assert schema["$defs"]["sampling_mode"]["properties"]["kind"]["enum"][-1] == TOY
    assert schema["$defs"]["cell_kind"]["enum"][-1] == TOY


def test_an_unregistered_kind_is_refused_with_the_registered_kinds_and_the_closest() -> None:
    with pytest.raises(ValueError, match=rf"no sampling kind '{TOY}' is registered \(registered: greedy, "):
        SamplingMode(TOY)
    with pytest.raises(ValueError, match=r"no sampling kind 'flow_sd' .*; did you mean 'flow_sde'\?$"):
        SamplingMode("flow_sd")


def test_a_design_uses_a_registered_kind_with_the_same_checks_as_a_built_in(
    tmp_path: Path, toy_kind: SamplerKind
) -> None:
    def anchor_and_cell(raw: dict[str, Any]) -> None:
        raw["arms"]["flow_short"]["anchor"] = {"kind": TOY, "steps": 4}
        raw["cells"].append(
            {
                "id": "c4_short_midpoint",
                "arm": "flow_short",
                "mode": {"kind": TOY, "steps": 4},
                "optional": True,
                "enabled": True,
                "description": "short flow arm, midpoint rule",
            }
        )

    prereg = load_prereg(_design(tmp_path, anchor_and_cell), require_lock=False)
    cell = prereg.cell("c4_short_midpoint")
    assert cell.mode == SamplingMode(TOY, steps=4) and cell.mode_text() == f"{TOY} (steps=4)"

    def on_the_ar_arm(raw: dict[str, Any]) -> None:
        raw["cells"][0]["mode"] = {"kind": TOY}

    assert f"cells[c1_ar_t1_0].mode.kind: {TOY!r} samples the flow head" in _load_error(
        _design(tmp_path, on_the_ar_arm)
    )

    def unlike_the_anchor(raw: dict[str, Any]) -> None:
        raw["cells"][1]["mode"] = {"kind": TOY, "steps": 10}

    message = _load_error(_design(tmp_path, unlike_the_anchor))
    assert (
        f"cells[c3_teacher_ode].mode: the draw-0 oracle compares draw 0 of a {TOY} cell with its arm's anchor"
        in message
    )

    def with_a_parameter_it_does_not_take(raw: dict[str, Any]) -> None:
        raw["arms"]["flow_short"]["anchor"] = {"kind": TOY, "sde_a": 0.1}

    message = _load_error(_design(tmp_path, with_a_parameter_it_does_not_take))
    assert "arms.flow_short.anchor.sde_a: only allowed for kind 'flow_sde'" in message


def test_the_flow_head_samples_a_registered_kind_through_its_entry(toy_kind: SamplerKind) -> None:
    torch.manual_seed(0)
    model = VelocityMLP(
        obs_dim=3, chunk_length=5, action_dims=2, hidden=16, n_layers=2, obs_embed=8, time_embed=8
    )
    policy = FlowPolicy(model, np.zeros(3), np.ones(3), -np.ones(2), np.ones(2))
    obs = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    keys = [RowKey(7, seed, 0, 0) for seed in (1, 2)]
    first = policy.act(obs, keys, SamplingMode(TOY, steps=4))
    again = policy.act(obs, keys, SamplingMode(TOY, steps=4))
    euler = policy.act(obs, keys, SamplingMode("flow_euler", steps=4))
    assert first.actions.tobytes() == again.actions.tobytes()
    assert first.actions.shape == (2, 5, 2) and not np.array_equal(first.actions, euler.actions)
    assert all(d.logprob is None for d in first.diagnostics)


def _tiny_flow_policy() -> FlowPolicy:
    torch.manual_seed(0)
    model = VelocityMLP(
        obs_dim=3, chunk_length=5, action_dims=2, hidden=16, n_layers=2, obs_embed=8, time_embed=8
    )
    return FlowPolicy(model, np.zeros(3), np.ones(3), -np.ones(2), np.ones(2))


def test_a_stochastic_kind_declares_its_draw0_switch_and_every_reader_follows_it(
    tmp_path: Path, jitter_kind: SamplerKind
) -> None:
    mode = SamplingMode(JITTER, sde_a=0.5, steps=4)
    off = SamplingMode(JITTER, sde_a=0.0, steps=4)
    assert not sampler(JITTER).deterministic
    assert draw0_probe_mode(mode) == off  # the draw-0 oracle's probe
    assert draw0_twins_of(mode) == (off, SamplingMode("flow_euler", steps=4))  # what the policy check runs
    assert mode_text(mode) == "flow_jitter(a=0.5, steps=4)"

    policy = _tiny_flow_policy()
    obs = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    keys = [RowKey(7, seed, 0, 0) for seed in (1, 2)]
    euler = policy.act(obs, keys, SamplingMode("flow_euler", steps=4)).actions
    assert policy.act(obs, keys, off).actions.tobytes() == euler.tobytes()
    assert not np.array_equal(policy.act(obs, keys, mode).actions, euler)

    def as_anchor(raw: dict[str, Any]) -> None:
        raw["arms"]["flow_short"]["anchor"] = {"kind": JITTER, "sde_a": 0.5}

    message = _load_error(_design(tmp_path, as_anchor))
    assert f"arms.flow_short.anchor.kind: an anchor is deterministic; {JITTER!r} is not" in message


def test_the_head_imports_a_kinds_entry_module_the_first_time_it_samples_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kind declared in the registry names its math module; nothing else imports that module."""
    (tmp_path / "toy_halfstep_entry.py").write_text(
        "from grpo_probe.policies.flow_sde import euler_sample\n"
        "from grpo_probe.sampling import register_sampler_entry\n\n\n"
        '@register_sampler_entry("flow_halfstep")\n'
        "def halfstep(velocity, x, mode, noise):\n"
        "    return euler_sample(velocity, x, 2 * mode.steps), None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    register_sampler(
        SamplerKind(
            "flow_halfstep",
            head="flow",
            takes=("steps",),
            summary="Euler at twice the steps",
            entry_module="toy_halfstep_entry",
        )
    )
    try:
        policy = _tiny_flow_policy()
        obs = np.zeros((1, 3), dtype=np.float32)
        keys = [RowKey(7, 1, 0, 0)]
        halfstep = policy.act(obs, keys, SamplingMode("flow_halfstep", steps=2)).actions
        euler = policy.act(obs, keys, SamplingMode("flow_euler", steps=4)).actions
        assert halfstep.tobytes() == euler.tobytes()
    finally:
        unregister_sampler("flow_halfstep")


def test_a_kinds_least_steps_is_refused_naming_the_field(tmp_path: Path) -> None:
    """``min_steps`` is a schema bound: a flow_sde cell of one step names the file and the field."""
    rule = next(
        r
        for r in load_prereg_schema()["$defs"]["sampling_mode"]["allOf"]
        if r["if"]["properties"]["kind"]["const"] == "flow_sde"
    )
    assert rule["then"]["properties"] == {"steps": {"minimum": 2}}

    def one_step_sde(raw: dict[str, Any]) -> None:
        raw["cells"][1]["mode"] = {"kind": "flow_sde", "sde_a": 0.5, "steps": 1}

    path = _design(tmp_path, one_step_sde)
    with pytest.raises(
        ValueError, match=r"cells\[c3_teacher_ode\]\.mode\.steps: 1 is less than the minimum of 2"
    ):
        load_prereg(path, require_lock=False)
