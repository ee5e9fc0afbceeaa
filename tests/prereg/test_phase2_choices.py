"""The ``phase2:`` section names its policy loss and advantage estimator; both names are optional and
default to the pilot's original choices, so every shipped, locked design keeps its bytes and its lock.

Whether a name is registered is phase 2's to say (tests/phase2/test_pilot_choices.py); here the prereg
package's side: the parse, the schema's default and pattern, and the message it words from the
registered names it is given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.name_registry import Registry
from grpo_probe.prereg import SchemaError, load_prereg
from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.prereg.phase2 import DEFAULT_ADVANTAGE, DEFAULT_POLICY_LOSS, choice_problems
from grpo_probe.prereg.schema import load_prereg_schema
from shipped_files import shipped_designs

from .design_edits import REPO, edited, load_error

SHIPPED = shipped_designs()


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(REPO)) for p in SHIPPED])
def test_a_shipped_design_still_matches_its_lock_and_trains_with_the_default_names(path: Path) -> None:
    prereg = load_prereg(path)  # require_lock: the canonical sha256 must equal the lock's
    if prereg.phase2 is None:
        return
    assert not {"policy_loss", "advantage"} & set(read_yaml(path)["phase2"]), "the file names neither"
    assert (prereg.phase2.policy_loss, prereg.phase2.advantage) == (DEFAULT_POLICY_LOSS, DEFAULT_ADVANTAGE)


def test_the_schema_defaults_are_the_parsers_defaults() -> None:
    """One default, stated twice (the schema documents it, the parser applies it): they must agree."""
    fields = load_prereg_schema()["properties"]["phase2"]["properties"]
    assert fields["policy_loss"]["default"] == DEFAULT_POLICY_LOSS
    assert fields["advantage"]["default"] == DEFAULT_ADVANTAGE


def test_naming_the_defaults_parses_to_the_same_pilot_under_another_hash(tmp_path: Path) -> None:
    def name_them(raw: dict) -> None:
        raw["phase2"].update(policy_loss=DEFAULT_POLICY_LOSS, advantage=DEFAULT_ADVANTAGE)

    named = load_prereg(edited(tmp_path, "smoke.yaml", name_them), require_lock=False)
    shipped = load_prereg(REPO / "prereg" / "smoke.yaml")
    assert named.phase2 == shipped.phase2
    assert named.sha256 != shipped.sha256  # the registered text changed, so would its lock


def test_a_named_loss_and_estimator_are_parsed_as_written(tmp_path: Path) -> None:
    def name_them(raw: dict) -> None:
        raw["phase2"].update(policy_loss="vanilla_pg", advantage="rloo")

    prereg = load_prereg(edited(tmp_path, "smoke.yaml", name_them), require_lock=False)
    assert prereg.phase2 is not None
    assert (prereg.phase2.policy_loss, prereg.phase2.advantage) == ("vanilla_pg", "rloo")


def test_a_name_that_is_not_an_identifier_is_refused_by_the_schema_naming_file_and_field(
    tmp_path: Path,
) -> None:
    path = edited(tmp_path, "smoke.yaml", lambda raw: raw["phase2"].update(policy_loss="Clip-Higher"))
    message = load_error(path, SchemaError)
    assert message.startswith(f"{path}: phase2.policy_loss: 'Clip-Higher' does not match")


def test_an_unregistered_name_is_worded_with_its_field_and_the_registered_names(tmp_path: Path) -> None:
    def name_them(raw: dict) -> None:
        raw["phase2"].update(policy_loss="ppo_kl", advantage="rloo")

    phase2 = load_prereg(edited(tmp_path, "smoke.yaml", name_them), require_lock=False).phase2
    assert phase2 is not None
    assert choice_problems(
        phase2,
        _registry("policy loss", "clip_higher", "ppo_k3"),
        _registry("advantage estimator", "grpo_outcome"),
    ) == [
        "phase2.policy_loss: no policy loss 'ppo_kl' is registered (registered: clip_higher, ppo_k3); "
        "did you mean 'ppo_k3'?",
        "phase2.advantage: no advantage estimator 'rloo' is registered (registered: grpo_outcome)",
    ]
    assert choice_problems(phase2, _registry("policy loss", "ppo_kl"), _registry("advantage", "rloo")) == []


def _registry(what: str, *names: str) -> Registry[object]:
    registry: Registry[object] = Registry(what)
    for name in names:
        registry.register(name, object())
    return registry
