"""The one name -> entry registry: a name means one entry, an unknown name says what is registered and
suggests the closest, and the names list in registration order."""

from __future__ import annotations

import pytest

from grpo_probe.envs.registry import BUILTIN_IDS, env_config
from grpo_probe.name_registry import EntryClash, Registry, UnknownName, closest, did_you_mean


def _clipped() -> str:
    return "clipped"


def _other() -> str:
    return "other"


def test_an_entry_is_found_by_its_name_and_the_names_keep_registration_order() -> None:
    losses: Registry[object] = Registry("policy loss")
    assert losses.register("clipped", _clipped) is _clipped
    losses.decorator("gspo")(_other)
    assert losses.get("clipped") is _clipped and losses.get("gspo") is _other
    assert losses.names() == ("clipped", "gspo") and list(losses) == ["clipped", "gspo"]
    assert losses.items() == (("clipped", _clipped), ("gspo", _other))
    assert "gspo" in losses and "grpo" not in losses and len(losses) == 2


def test_an_unknown_name_lists_the_registered_ones_and_suggests_the_closest() -> None:
    losses: Registry[object] = Registry("policy loss")
    losses.register("clipped", _clipped)
    losses.register("gspo", _other)
    with pytest.raises(UnknownName) as caught:
        losses.get("cliped")
    assert str(caught.value) == (
        "no policy loss 'cliped' is registered (registered: clipped, gspo); did you mean 'clipped'?"
    )
    assert caught.value.suggestion == "clipped"
    with pytest.raises(UnknownName, match=r"\(registered: clipped, gspo\)$"):
        losses.get("zzzz")
    with pytest.raises(UnknownName, match=r"\(registered: none\)$"):
        Registry[object]("advantage estimator").get("grpo")


def test_a_taken_name_refuses_another_entry_but_takes_the_same_one_again() -> None:
    losses: Registry[object] = Registry("policy loss")
    losses.register("clipped", _clipped)
    losses.register("clipped", _clipped)  # the module imported again
    with pytest.raises(EntryClash, match=r"policy loss 'clipped' is already registered .*cannot register"):
        losses.register("clipped", _other)
    assert losses.get("clipped") is _clipped
    with pytest.raises(ValueError, match="non-empty name"):
        losses.register("", _other)


def test_a_copy_takes_more_entries_and_leaves_the_original_as_it_was() -> None:
    losses: Registry[object] = Registry("policy loss")
    losses.register("clipped", _clipped)
    scoped = losses.copy()
    scoped.register("gspo", _other)
    assert scoped.names() == ("clipped", "gspo") and scoped.what == "policy loss"
    assert losses.names() == ("clipped",)
    with pytest.raises(EntryClash):
        scoped.register("clipped", _other)


def test_an_entry_registered_for_a_block_leaves_after_it_and_one_from_before_stays() -> None:
    losses: Registry[object] = Registry("policy loss")
    losses.register("clipped", _clipped)
    with losses.registered("gspo", _other) as entry:
        assert entry is _other and losses.values() == (_clipped, _other)
    assert losses.names() == ("clipped",)
    with losses.registered("clipped", _clipped):
        pass
    assert losses.names() == ("clipped",)  # registered before the block: still there
    with pytest.raises(EntryClash), losses.registered("clipped", _other):
        pass
    losses.discard("clipped")
    losses.discard("never")  # nothing to take out
    assert len(losses) == 0


def test_a_near_miss_in_any_list_of_names_is_worded_as_a_registry_words_it() -> None:
    assert closest("swatt", ("reset_strike", "swat")) == "swat"
    assert closest("zzz", ("reset_strike", "swat")) is None and closest(3, ("swat",)) is None
    assert did_you_mean("swatt", ("swat",)) == "; did you mean 'swat'?"
    assert did_you_mean("zzz", ("swat",)) == ""


def test_a_misspelt_built_in_environment_is_refused_with_the_one_it_resembles() -> None:
    assert BUILTIN_IDS == ("boat_push", "pusher")
    with pytest.raises(
        ValueError, match=r"env\.id: 'pushr' is neither a built-in .*; did you mean 'pusher'\?$"
    ):
        env_config("pushr", {})
