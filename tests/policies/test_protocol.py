"""The policy protocol's value types validate what a user or a prereg hands them."""

from __future__ import annotations

import pytest

from grpo_probe.policies import RowKey, SamplingMode


def test_sampling_mode_requires_its_own_parameter_and_no_other() -> None:
    assert SamplingMode("temperature", temperature=1.6).temperature == 1.6
    with pytest.raises(ValueError, match="temperature must be a number"):
        SamplingMode("temperature")
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        SamplingMode("temperature", temperature=0.0)
    with pytest.raises(ValueError, match="only allowed for kind 'temperature'"):
        SamplingMode("greedy", temperature=1.0)
    with pytest.raises(ValueError, match="sde_a must be a number"):
        SamplingMode("flow_sde")
    with pytest.raises(ValueError, match="sde_a must be a finite number >= 0"):
        SamplingMode("flow_sde", sde_a=-0.1)
    with pytest.raises(ValueError, match="only allowed for kind 'flow_sde'"):
        SamplingMode("flow_ode", sde_a=0.5)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        SamplingMode("flow_ode", steps=0)
    with pytest.raises(ValueError, match="kind must be one of"):
        SamplingMode("beam")  # type: ignore[arg-type]


def test_row_key_parts_must_be_non_negative_integers() -> None:
    with pytest.raises(ValueError, match=r"RowKey\.draw must be a non-negative integer"):
        RowKey(0, 1, 2, -1)
    with pytest.raises(ValueError, match=r"RowKey\.seed"):
        RowKey(0, True, 2, 0)  # type: ignore[arg-type]
