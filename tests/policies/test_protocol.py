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
    with pytest.raises(ValueError, match="no sampling kind 'beam' is registered"):
        SamplingMode("beam")  # type: ignore[arg-type]


def test_row_key_parts_must_be_non_negative_integers() -> None:
    with pytest.raises(ValueError, match=r"RowKey\.draw must be a non-negative integer"):
        RowKey(0, 1, 2, -1)
    with pytest.raises(ValueError, match=r"RowKey\.seed"):
        RowKey(0, True, 2, 0)  # type: ignore[arg-type]


def test_capabilities_keep_to_one_head_and_its_log_probs() -> None:
    from grpo_probe.policies import PolicyCapabilities

    declared = PolicyCapabilities(["flow_sde", "flow_ode", "flow_sde"], "per_step")
    assert declared.kinds == ("flow_ode", "flow_sde") and declared.head == "flow"  # registry order, once
    assert PolicyCapabilities.from_dict(declared.to_dict()) == declared
    with pytest.raises(ValueError, match="mixes the kinds of heads ar and flow"):
        PolicyCapabilities(("greedy", "flow_ode"))
    with pytest.raises(ValueError, match="must name at least one of"):
        PolicyCapabilities(("beam",))
    with pytest.raises(ValueError, match="must be a sequence of sampling kinds"):
        PolicyCapabilities("flow_ode")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'per_token' are not the flow head's"):
        PolicyCapabilities(("flow_ode", "flow_sde"), "per_token")
    with pytest.raises(ValueError, match="recorded by the SDE sampler: declare 'flow_sde'"):
        PolicyCapabilities(("flow_ode",), "per_step")
    with pytest.raises(ValueError, match="trainable must be True or False"):
        PolicyCapabilities(("greedy",), trainable="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"source\.json: capabilities: must be a mapping"):
        PolicyCapabilities.from_dict({"kinds": ["greedy"]}, "source.json: capabilities")


def test_a_policy_that_declares_nothing_samples_its_head_and_trains_nothing() -> None:
    from grpo_probe.policies import PolicyCapabilities
    from grpo_probe.policies.protocol import declared_capabilities, policy_capabilities

    class Undeclared:
        head = "ar"

    assert declared_capabilities(Undeclared()) is None
    assert policy_capabilities(Undeclared()) == PolicyCapabilities(("greedy", "temperature"))
    lacking = policy_capabilities(Undeclared()).lacks(["greedy", "beam"], "per_token", trainable=True)
    assert lacking == [
        "sampling kind 'beam'",
        "per-token log-probs (capabilities.logprobs 'per_token')",
        "trainable parameters (capabilities.trainable)",
    ]


def test_a_policy_written_to_be_served_declares_its_capabilities_in_process_too() -> None:
    """The docs' stand-ins import the serve distribution's PolicyCapabilities (a served policy cannot import
    the project); bound in process the same object is read as the project's declaration."""
    from grpo_probe.policies import PolicyCapabilities
    from grpo_probe.policies.protocol import declared_capabilities
    from grpo_probe.serve.contract import PolicyCapabilities as ServedCapabilities

    class ServedStandIn:
        head = "flow"
        capabilities = ServedCapabilities(kinds=("flow_ode",))

    assert declared_capabilities(ServedStandIn()) == PolicyCapabilities(("flow_ode",))

    class WrongHead(ServedStandIn):
        head = "ar"

    with pytest.raises(ValueError, match="declares kinds of the flow head"):
        declared_capabilities(WrongHead())

    class NotADeclaration:
        head = "flow"
        capabilities = ("flow_ode",)

    with pytest.raises(ValueError, match=r"is a tuple, not a grpo_probe\.policies\.PolicyCapabilities"):
        declared_capabilities(NotADeclaration())
